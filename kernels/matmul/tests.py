"""matmul's tests beyond the generated suite (tilekit.suite adds the test_* to
tests/kernels/test_matmul.py), and BASELINE_CASES, what tests/kit/test_baselines.py checks of
baselines.py on the CPU (tilekit.baseline_cases)."""

import torch

from kernels.matmul.spec import SPEC
from tilekit import harness
from tilekit.baseline_cases import H200_SMS as SMS
from tilekit.baseline_cases import TOL, BaselineCases, Has


def check_persistent_port(spec, cfg: dict) -> None:
    """spec's port on a persistent grid of 64x64 tiles, one tile block per SM, into a fresh out,
    checked against the reference (bmm's test takes it too)."""
    inputs = spec.make_inputs(cfg)
    out = spec.make_out(cfg, inputs)
    v = {"bm": 64, "bn": 64, "bk": 32, "group": 4, "persistent": True, "occupancy": 1, "cga": 1}
    spec.run_port(inputs, out=out, variant=v)
    harness.check(spec, "cutile_rs", dict(cfg, variant=v), inputs, out)


def test_op_persistent_grid_strides_over_more_tiles_than_programs_cutile_rs(cuda):
    """64x64 tiles of a 1000x1100 output: 288 tiles for one tile block per SM, each walks several."""
    check_persistent_port(SPEC, {"m": 1000, "n": 1100, "k": 520, "dtype": "bfloat16"})


def test_op_default_variant_cutile_rs(cuda):
    """`variant="default"` (every knob -1: ffi_util::MmaVariant's defaults) is a valid launch."""
    cfg = {"m": 300, "n": 500, "k": 200, "dtype": "float16"}
    inputs = SPEC.make_inputs(cfg)
    out = SPEC.make_out(cfg, inputs)
    SPEC.run_port(inputs, out=out, variant="default")
    harness.check(SPEC, "cutile_rs", cfg, inputs, out)


# The named variants: (bm, bn, Triton's num_warps, num_stages); persistent runs 128x256 tiles, one
# program per SM, the others one program per tile.
NAMED = {
    "128x256x64": (128, 256, 8, 3),
    "256x128x64": (256, 128, 8, 3),
    "128x128x64": (128, 128, 8, 4),
    "persistent": (128, 256, 8, 3),
}
# The auto path's candidates (BM, BN, BK, num_warps, num_stages) / (BM, BN, BK, occupancy): the
# committed H200 results were tuned over exactly these. Triton's: the named tiles, then two at 4 warps.
TRITON_TUNED = (
    *[(bm, bn, 64, w, s) for bm, bn, w, s in list(NAMED.values())[:3]],
    (128, 128, 64, 4, 4),
    (64, 256, 64, 4, 4),
)
CUTILE_TUNED = ((128, 256, 64, 1), (256, 128, 64, 1), (128, 256, 64, 2), (256, 256, 64, 2), (128, 128, 64, 1))


def _triton_autotuned(B) -> tuple:
    """triton.autotune's configs, as (BM, BN, BK, num_warps, num_stages), and its key."""
    tuned = B.gemm._triton_autotuned
    return [(*(c.kwargs[x] for x in ("BM", "BN", "BK")), c.num_warps, c.num_stages) for c in tuned.configs], tuned.keys


BASELINE_CASES = BaselineCases(
    SPEC,
    # Tiny (one partial tile), ragged on every dim (K not a multiple of BK: the masked K step), K a
    # multiple of BK (the unmasked path), column slices, and a persistent grid of one program ("one
    # SM" on the CPU) that walks every tile.
    interpreted=[
        (dict(m=m, n=n, k=k, lda=lda, ldb=ldb, dtype=dt), v, {})
        for dt in ("float16", "bfloat16")
        for m, n, k, lda, ldb in (
            (3, 5, 7, 7, 5),
            (129, 257, 65, 65, 257),
            (130, 300, 128, 128, 300),
            (65, 40, 70, 80, 48),
        )
        for v in ("auto", *NAMED)
    ]
    # column-major B (x @ W.t()), and both operands column-major with a ragged K
    + [(dict(m=65, n=40, k=70, bt=1, dtype="bfloat16"), v, {}) for v in ("auto", "persistent")]
    + [(dict(m=33, n=17, k=65, at=1, bt=1, dtype="float16"), "128x128x64", {})],
    torch_case=({"m": 33, "n": 17, "k": 65, "lda": 70, "dtype": "bfloat16"}, TOL["bfloat16"]),
    bad_inputs=[
        ((torch.randn(2, 3, 4).half(), torch.randn(4, 2).half()), ValueError, r"a must be \(m, k\)"),
        ((torch.randn(2, 4).half(), torch.randn(5, 2).half()), ValueError, r"b \(k, n\)"),
        ((torch.randn(2, 4), torch.randn(4, 2)), TypeError, "share one dtype"),
        ((torch.randn(2, 4).half(), torch.randn(4, 2).bfloat16()), TypeError, "share one dtype"),
        ((torch.randn(4, 8).half()[:, ::2], torch.randn(4, 2).half()), ValueError, "a must be contiguous in its last"),
    ],
    plans=[
        # auto is left to autotune on the GPU, and is the big tile off it
        ("triton_config", (4096, 4096, 4096, SMS), None),
        ("triton_config", (100, 100, 100, 1), {"on_gpu": False}, Has(variant="128x256x64", bm=128, bn=256, bk=64)),
        # masked K only when K is ragged
        ("triton_config", (129, 257, 65, SMS, "128x128x64"), Has(even_k=False)),
        # persistent: one program per SM, or fewer tiles (ceil(1000 / 128) * ceil(1000 / 256))
        ("triton_config", (8192, 8192, 64, SMS, "persistent"), Has(grid=SMS)),
        ("triton_config", (1000, 1000, 64, SMS, "persistent"), Has(grid=8 * 4)),
        ("cutile_config", (8192, 8192, SMS, "persistent"), Has(grid=SMS)),
        ("cutile_config", (1000, 1000, SMS, "persistent"), Has(grid=8 * 4)),
    ]
    + [  # the named variants at the perf shapes
        p
        for m, n, k in (SPEC.dims_of(c).values() for c in SPEC.perf_configs)
        for v, (bm, bn, warps, stages) in NAMED.items()
        # persistent: one program per SM, at most one per tile
        for tiles in [-(-m // bm) * -(-n // bn)]
        for plan in [dict(variant=v, bm=bm, bn=bn, bk=64, grid=min(tiles, SMS) if v == "persistent" else tiles)]
        for p in (
            ("triton_config", (m, n, k, SMS, v), dict(plan, num_warps=warps, num_stages=stages, even_k=k % 64 == 0)),
            ("cutile_config", (m, n, SMS, v), plan),
        )
    ],
    plan_errors=[
        ("cutile_config", (4096, 4096, SMS, "auto"), {}, "'auto' is tuned on the GPU"),
        ("triton_config", (10, 10, 10, 8, "fastest"), {}, "variant must be one of"),
        ("cutile_config", (10, 10, 8, "fastest"), {}, "variant must be one of"),
    ],
    triton_compile=[
        (
            "gemm._triton_bmm_kernel",
            "bf16",
            dict(BM=128, BN=256, BK=64, GROUP=8, EVEN_K=even_k, PERSISTENT=persistent),
            opts,
        )
        for persistent in (False, True)
        for even_k in (True, False)
        for opts in [dict(num_warps=8, num_stages=3)]
    ],
    triton_ptx_has="mma",  # tensor-core instructions (wgmma on sm_90)
    cutile_kernels=[
        (kernel, dt, ["A3", "A3", "A3", bm, bn, bk, 8, ta, tb, 0], dt == "bfloat16" and bm == 128)
        for dt in ("bfloat16", "float16")
        for kernel in ("gemm._cutile_tiles_kernel", "gemm._cutile_persistent_kernel")
        for bm, bn, bk, ta, tb in ((128, 256, 64, 0, 0), (64, 64, 32, 0, 0), (128, 128, 64, 0, 1), (64, 64, 32, 1, 1))
    ],
    pinned=[
        ("GROUP_M", lambda B: B.gemm.GROUP_M, 8, False),
        ("TRITON_AUTOTUNE", lambda B: B.gemm.TRITON_AUTOTUNE, TRITON_TUNED, False),
        ("CUTILE_AUTOTUNE", lambda B: B.gemm.CUTILE_AUTOTUNE, CUTILE_TUNED, False),
        ("triton.autotune's configs and key", _triton_autotuned, (list(TRITON_TUNED), ["Q", "M", "N", "K"]), True),
    ],
)
