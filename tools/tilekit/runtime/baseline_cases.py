"""What the generic CPU tests of every kernels/<name>/baselines.py (tests/kit/test_baselines.py)
know about one kernel, as data: ``BASELINE_CASES = BaselineCases(SPEC, ...)`` in the kernel's
tests.py. Inputs, their float64 reference and the output's shape come from SPEC; the cases add the
Triton runs under the interpreter, the inputs baselines.py must refuse, the plans its pure config
functions must return (the perf shapes' `auto` plans pinned: the committed H200 results were timed
with them) and the kernels compiled on the CPU.

A kernel's tests.py never imports its baselines.py (getters take it as an argument), so loading
the cases never decides when baselines.py is first imported: it must see TRITON_INTERPRET=1, which
the interpreter's child (tests/kit/triton_interp.py) sets before it loads either.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from tilekit.runtime.kernel import KernelSpec

H200_SMS = 132
# Interpreter error bound: max |y - ref| / (1 + |ref|), a few output ulps of each dtype.
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
DTYPES = ("float32", "float16", "bfloat16")
CONFIGS = ("triton_config", "cutile_config")  # a row reduction's config functions


class Has(dict):
    """An expected plan given by some of its items: equal to any plan that has them."""

    def __eq__(self, plan):
        return isinstance(plan, dict) and all(k in plan and plan[k] == v for k, v in self.items())

    def __repr__(self):
        return f"Has({dict.__repr__(self)})"


@dataclass
class BaselineCases:
    spec: KernelSpec  # the kernel's declaration (kernels/<name>/spec.py)
    interpreted: list  # (cfg, variant, knobs): the triton entry under TRITON_INTERPRET=1, within TOL
    torch_case: tuple  # (cfg, tol): the torch entry against the reference
    bad_inputs: list  # (args of baselines._check_inputs, exception, message regex)
    plans: list  # (config function, args[, kwargs], expected plan: ==, or Has(...))
    plan_errors: list  # (config function, args, kwargs, message regex): ValueError
    triton_compile: list  # (kernel, pointer dtype, constexprs[, compile options]): compiled for sm_90
    # (kernel or (factory, args), dtype, args: "A1"/"A2" = array of dtype ("A2:float32" of its own), else a
    # constant, cubin?)
    cutile_kernels: list
    triton_types: dict = field(default_factory=dict)  # Triton scalar params that are not i32 -> their type
    make_inputs: Callable | None = None  # cfg -> inputs, when the cases need more than SPEC's (seeded, CPU)
    zero_counts: Callable = lambda y, inputs: {}  # extra counts an interpreted output must have at 0
    pinned: list = field(default_factory=list)  # (what, getter(baselines), expected, needs triton)
    triton_ptx_has: str = ""  # an instruction every compiled Triton kernel's PTX holds

    def inputs(self, cfg: dict) -> dict:
        """The entries' arguments, in order (SPEC.run_baseline passes *inputs.values())."""
        if self.make_inputs is not None:
            return self.make_inputs(cfg)
        return self.spec.make_inputs(cfg, device="cpu", seed=0)

    def out_shape(self, cfg: dict) -> list:
        return list(self.spec.out_shape(cfg))

    def plan(self, index: int) -> tuple:
        """(config function, args, kwargs, expected) of plans[index]."""
        fn, args, *kwargs, expected = self.plans[index]
        return fn, args, kwargs[0] if kwargs else {}, expected

    def triton_signature(self, fn, pointer: str) -> dict:
        """A @triton.jit kernel's compile signature, from its parameters: constexprs, pointers
        (named *_ptr) to `pointer` elements, other scalars triton_types' or i32."""
        signature = {}
        for p in fn.params:
            if p.is_constexpr:
                signature[p.name] = "constexpr"
            elif p.name.endswith("_ptr"):
                signature[p.name] = f"*{pointer}"
            else:
                signature[p.name] = self.triton_types.get(p.name, "i32")
        return signature


def load(kernel: str) -> BaselineCases | None:
    """kernels/<kernel>/tests.py's BASELINE_CASES (None when it declares none)."""
    try:
        module = importlib.import_module(f"kernels.{kernel}.tests")
    except ModuleNotFoundError as exc:
        if exc.name != f"kernels.{kernel}.tests":
            raise
        return None
    return getattr(module, "BASELINE_CASES", None)


def tile_plan(variant: str, block: int, rows: int, grid: int, num_warps: int | None = None) -> dict:
    """A plan of programs over (rows x block) tiles: Triton's has num_warps, cuTile's not."""
    plan = {"variant": variant, "block": block, "rows": rows, "grid": grid}
    return plan if num_warps is None else dict(plan, num_warps=num_warps)


# -- row reductions (rms_norm, softmax: tilekit.runtime.baseline_support's row/multirow/looped plans) -----

# Irregular n (1000, 4097), padded rows, a row tile that runs past m, persistent programs that loop
# (one "SM" on the CPU), several column tiles.
ROW_SHAPES = (
    {"m": 3, "n": 1000},
    {"m": 2, "n": 4097},
    {"m": 5, "n": 1000, "row_stride": 1040},
    {"m": 1, "n": 1},
)
ROW_VARIANTS = (
    ("row", {}),
    ("multirow", {}),
    ("multirow", {"rows": 2, "ctas_per_sm": 2}),
    ("looped", {}),
    ("looped", {"block": 256}),
    ("auto", {}),
)


def row_interpreted(*extra_shapes: dict) -> list:
    """Every dtype x (ROW_SHAPES + extra_shapes) x ROW_VARIANTS."""
    return [(dict(s, dtype=dt), v, k) for dt in DTYPES for s in ROW_SHAPES + extra_shapes for v, k in ROW_VARIANTS]


def row_plans(auto: dict, triton: dict, cutile: dict) -> list:
    """A row reduction's plans at H200_SMS: `auto` {(m, n): (Triton's (variant, block, rows, grid,
    num_warps), cuTile's (variant, block, rows, grid))}, the perf shapes' pinned; `triton` and
    `cutile` {(m, n): the variant auto picks}; then ROW_RULES."""
    return (
        [(fn, (m, n, H200_SMS), tile_plan(*plan)) for (m, n), plans in auto.items() for fn, plan in zip(CONFIGS, plans)]
        + [("triton_config", (m, n, H200_SMS), Has(variant=v)) for (m, n), v in triton.items()]
        + [("cutile_config", (m, n, H200_SMS), Has(variant=v)) for (m, n), v in cutile.items()]
        + ROW_RULES
    )


# The plans both row reductions make by the same rules.
ROW_RULES = [
    ("triton_config", (4096, 1000, H200_SMS, "row"), tile_plan("row", 1024, 1, 4096, 4)),
    ("triton_config", (4096, 4097, H200_SMS, "row"), Has(num_warps=16)),
    ("triton_config", (4096, 4096, H200_SMS, "row"), Has(num_warps=8)),
    ("cutile_config", (40, 1000, H200_SMS, "multirow"), Has(grid=3)),  # ceil(40 / 16) row tiles
    ("triton_config", (100, 5000, 8, "looped"), {"block": 512, "num_warps": 2}, tile_plan("looped", 512, 1, 100, 2)),
    ("cutile_config", (100, 1000, 8, "multirow"), {"rows": 4, "ctas_per_sm": 2}, Has(grid=16)),
]
# The row normalizations' (rms_norm, layer_norm: tilekit.runtime.norm.AUTO): the variant each config picks
# where the rule is the row reductions', and the Triton kernels compiled on the CPU.
NORM_FORMS = {
    "triton": {(262144, 512): "multirow", (64, 512): "row", (1024, 32768): "looped"},
    "cutile": {(200, 4096): "row", (1024, 32768): "looped"},
}


def norm_triton_compile(layer: bool) -> list:
    """rms_norm's (layer false) or layer_norm's triton_compile: tilekit.runtime.norm_baselines' kernels."""
    return [
        ("norm_baselines._triton_rows_kernel", "fp16", {"LAYER": layer, "ROWS": 8, "BLOCK": 1024}),
        ("norm_baselines._triton_looped_kernel", "bf16", {"LAYER": layer, "BLOCK": 4096}),
    ]


ROW_ERRORS = [
    (fn, (10, 1000, 8, v), kwargs, match)
    for v, kwargs, match in (("row", {"block": 512}, "block=512 < n=1000"), ("fastest", {}, "variant must be one of"))
    for fn in CONFIGS
]


# -- the GEMM family (matmul, bmm: tilekit.runtime.gemm_baselines) ----------------------------------------

# The named variants: (bm, bn, Triton's num_warps, num_stages); persistent runs 128x256 tiles, one
# program per SM, the others one program per tile.
GEMM_NAMED = {
    "128x256x64": (128, 256, 8, 3),
    "256x128x64": (256, 128, 8, 3),
    "128x128x64": (128, 128, 8, 4),
    "persistent": (128, 256, 8, 3),
}
# The auto path's candidates (BM, BN, BK, num_warps, num_stages) / (BM, BN, BK, CTAs per cluster):
# the committed H200 results were tuned over exactly these. Triton's: the named tiles, then two at 4 warps.
GEMM_TRITON_TUNED = (
    *[(bm, bn, 64, w, s) for bm, bn, w, s in list(GEMM_NAMED.values())[:3]],
    (128, 128, 64, 4, 4),
    (64, 256, 64, 4, 4),
)
GEMM_CUTILE_TUNED = ((128, 256, 64, 1), (256, 128, 64, 1), (128, 256, 64, 2), (256, 256, 64, 2), (128, 128, 64, 1))


def _gemm_triton_autotuned(B) -> tuple:
    """triton.autotune's configs, as (BM, BN, BK, num_warps, num_stages), and its key."""
    tuned = B.gemm._triton_autotuned
    return [(*(c.kwargs[x] for x in ("BM", "BN", "BK")), c.num_warps, c.num_stages) for c in tuned.configs], tuned.keys


def gemm_cases(spec: KernelSpec, layouts: list, **fields) -> BaselineCases:
    """The BaselineCases of a GEMM kernel (a leading `batch` dim when spec has one), `fields` giving
    its interpreted runs, torch case, bad inputs and own plans; added here: the named variants'
    plans at the perf shapes (one program per output tile, or per SM for persistent), the plans
    refused, the pinned candidates, the Triton kernel compiled four ways and the cuTile kernels
    compiled for `layouts` (bm, bn, bk, TRANS_A, TRANS_B, SHARED_B)."""
    batched = "batch" in spec.dims
    one = () if batched else (1,)  # what a batch of one reads as, to write each plan once

    def args(q, *rest):
        return (q, *rest) if batched else rest

    named = [
        p
        for q, m, n, k in ((*one, *spec.dims_of(c).values()) for c in spec.perf_configs)
        for v, (bm, bn, warps, stages) in GEMM_NAMED.items()
        for tiles in [q * -(-m // bm) * -(-n // bn)]
        for plan in [dict(variant=v, bm=bm, bn=bn, bk=64, grid=min(tiles, H200_SMS) if v == "persistent" else tiles)]
        for p in (
            (
                "triton_config",
                args(q, m, n, k, H200_SMS, v),
                dict(plan, num_warps=warps, num_stages=stages, even_k=k % 64 == 0),
            ),
            ("cutile_config", args(q, m, n, H200_SMS, v), plan),
        )
    ]
    fields["plans"] = fields["plans"] + named
    fields["plan_errors"] = [
        ("cutile_config", args(16, 2048, 2048, H200_SMS, "auto"), {}, "'auto' is tuned on the GPU"),
        ("triton_config", args(2, 10, 10, 10, 8, "fastest"), {}, "variant must be one of"),
        ("cutile_config", args(2, 10, 10, 8, "fastest"), {}, "variant must be one of"),
    ]
    fields["triton_compile"] = [
        ("gemm._triton_bmm_kernel", "bf16", dict(BM=128, BN=256, BK=64, GROUP=8, EVEN_K=even, PERSISTENT=p), opts)
        for p in (False, True)
        for even in (True, False)
        for opts in [dict(num_warps=8, num_stages=3)]
    ]
    fields["cutile_kernels"] = [
        (kernel, dt, ["A3", "A3", "A3", bm, bn, bk, 8, *flags], dt == "bfloat16" and bm == 128)
        for dt in ("bfloat16", "float16")
        for kernel in ("gemm._cutile_tiles_kernel", "gemm._cutile_persistent_kernel")
        for bm, bn, bk, *flags in layouts
    ]
    fields["pinned"] = [
        ("GROUP_M", lambda B: B.gemm.GROUP_M, 8, False),
        ("TRITON_AUTOTUNE", lambda B: B.gemm.TRITON_AUTOTUNE, GEMM_TRITON_TUNED, False),
        ("CUTILE_AUTOTUNE", lambda B: B.gemm.CUTILE_AUTOTUNE, GEMM_CUTILE_TUNED, False),
        (
            "triton.autotune's configs and key",
            _gemm_triton_autotuned,
            (list(GEMM_TRITON_TUNED), ["Q", "M", "N", "K"]),
            True,
        ),
    ]
    return BaselineCases(spec, triton_ptx_has="mma", **fields)  # tensor-core instructions (wgmma on sm_90)
