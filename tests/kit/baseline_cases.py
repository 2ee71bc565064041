"""What the generic baseline tests (test_baselines.py) know about each kernels/<name>/baselines.py,
as data: how to make its inputs and their float64 reference, the cases its Triton kernels run under
the interpreter, the inputs it must refuse, the plans its pure config functions must return (its
own rules, and the `auto` plans of the perf shapes pinned: the committed H200 results were timed
with them), and the signatures its kernels are compiled for on the CPU.

Imported by the interpreter's child process too (tests/kit/triton_interp.py), so it imports only
torch: never the baselines, which must be imported after TRITON_INTERPRET=1 is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

H200_SMS = 132
EPS = 1e-6
# Interpreter error bound: max |y - ref| / (1 + |ref|), a few output ulps of each dtype.
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


class Has(dict):
    """An expected plan given by some of its items: equal to any plan that has them."""

    def __eq__(self, plan):
        return isinstance(plan, dict) and all(k in plan and plan[k] == v for k, v in self.items())

    def __repr__(self):
        return f"Has({dict.__repr__(self)})"


@dataclass
class Kernel:
    inputs: Callable  # (dtype name, shape dict) -> {"args": the entries' positional args, ...}, seeded
    reference: Callable  # inputs -> the float64 result
    out_shape: Callable  # shape dict -> [rows, cols] of the output
    interpreted: list  # (dtype, shape, variant, knobs): triton entry under TRITON_INTERPRET=1
    torch_case: tuple  # (dtype, shape, tol): the torch entry against the reference
    bad_inputs: list  # (args of _check_inputs, exception, message regex)
    plans: list  # (config function, args, kwargs, expected plan: ==, or Has(...))
    plan_errors: list  # (config function, args, kwargs, message regex): ValueError
    triton_compile: list  # (kernel, signature, constexprs, compile options): compiled for sm_90
    cutile_kernels: list  # (kernel or (factory, args), dtype, args: "A1"/"A2" = array, else a constant, cubin?)
    zero_counts: Callable = lambda y, inputs: {}  # extra counts an interpreted output must have at 0
    pinned: list = field(default_factory=list)  # (what, getter(baselines), expected, needs triton)
    triton_ptx_has: str = ""  # an instruction every compiled Triton kernel's PTX holds


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


# -- rms_norm -----------------------------------------------------------------------------------


def _rms_inputs(dt, s):
    g = _generator(s["m"] * 7919 + s["n"])
    x = torch.randn(s["m"], s["ld"], generator=g).to(_dtype(dt))[:, : s["n"]]
    w = (1 + 0.1 * torch.randn(s["n"], generator=g)).to(x.dtype)
    return {"args": (x, w, EPS)}


def _rms_reference(inputs):
    x, w, eps = inputs["args"]
    return x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + eps) * w.double()


# Irregular n (1000, 4097), padded rows, a row tile that runs past m, persistent programs that loop
# (one "SM" on the CPU), several column tiles.
_ROW_SHAPES = (
    {"m": 3, "n": 1000, "ld": 1000},
    {"m": 2, "n": 4097, "ld": 4097},
    {"m": 5, "n": 1000, "ld": 1040},
    {"m": 1, "n": 1, "ld": 1},
)
_ROW_VARIANTS = (
    ("row", {}),
    ("multirow", {}),
    ("multirow", {"rows": 2, "ctas_per_sm": 2}),
    ("looped", {}),
    ("looped", {"block": 256}),
    ("auto", {}),
)
_DTYPES = ("float32", "float16", "bfloat16")


def _row_rules() -> list:
    """Plans rms_norm and softmax share (tilekit.baseline_support's row reductions)."""
    return [
        (
            "triton_config",
            (4096, 1000, H200_SMS, "row"),
            {},
            {"variant": "row", "block": 1024, "rows": 1, "num_warps": 4, "grid": 4096},
        ),
        ("triton_config", (4096, 4097, H200_SMS, "row"), {}, Has(num_warps=16)),
        ("triton_config", (4096, 4096, H200_SMS, "row"), {}, Has(num_warps=8)),
        ("cutile_config", (40, 1000, H200_SMS, "multirow"), {}, Has(grid=3)),  # ceil(40 / 16) row tiles
        (
            "triton_config",
            (100, 5000, 8, "looped"),
            {"block": 512, "num_warps": 2},
            {"variant": "looped", "block": 512, "rows": 1, "num_warps": 2, "grid": 100},
        ),
        ("cutile_config", (100, 1000, 8, "multirow"), {"rows": 4, "ctas_per_sm": 2}, Has(grid=16)),
    ]


def _row_errors() -> list:
    return [
        (fn, (10, 1000, 8, "row"), {"block": 512}, "block=512 < n=1000") for fn in ("triton_config", "cutile_config")
    ] + [(fn, (10, 1000, 8, "fastest"), {}, "variant must be one of") for fn in ("triton_config", "cutile_config")]


def _auto(fn, shapes, plans):
    """Pinned auto plans at H200_SMS."""
    return [(fn, (m, n, H200_SMS), {}, plan) for (m, n), plan in zip(shapes, plans)]


RMS_NORM = Kernel(
    inputs=_rms_inputs,
    reference=_rms_reference,
    out_shape=lambda s: [s["m"], s["n"]],
    interpreted=[(dt, s, v, k) for dt in _DTYPES for s in _ROW_SHAPES for v, k in _ROW_VARIANTS],
    torch_case=("float32", {"m": 5, "n": 1000, "ld": 1040}, 1e-5),
    bad_inputs=[
        ((torch.randn(2, 3, 4), torch.randn(4)), ValueError, "must be 2-D"),
        ((torch.randn(2, 4), torch.randn(5)), ValueError, r"w must have shape \(4,\)"),
        ((torch.randn(2, 4), torch.randn(4, dtype=torch.float64)), TypeError, "share one dtype"),
        ((torch.randn(4, 2).t(), torch.randn(4)), ValueError, "last dim must be contiguous"),
    ],
    plans=[
        ("triton_config", (m, n, H200_SMS), {}, Has(variant=v))
        for m, n, v in (
            (262144, 1024, "looped"),
            (262144, 2048, "looped"),
            (262144, 4096, "looped"),
            (65536, 8192, "looped"),
            (65536, 16384, "looped"),
            (262144, 512, "multirow"),
            (64, 512, "row"),
            (1024, 32768, "looped"),
        )
    ]
    + [
        ("cutile_config", (m, n, H200_SMS), {}, Has(variant=v))
        for m, n, v in (
            (262144, 1024, "multirow"),
            (65536, 16384, "multirow"),
            (200, 4096, "row"),
            (1024, 32768, "looped"),
        )
    ]
    + _row_rules()
    + [
        # multirow: persistent, one weight load per program
        (
            "triton_config",
            (262144, 1024, H200_SMS, "multirow"),
            {},
            {"variant": "multirow", "block": 1024, "rows": 8, "num_warps": 16, "grid": H200_SMS * 2},
        ),
        ("cutile_config", (300, 16384, H200_SMS), {}, Has(rows=2)),
    ]
    + _auto(
        "triton_config",
        [(262144, 1024), (262144, 2048), (262144, 4096), (65536, 8192), (65536, 16384)],
        [
            {"variant": "looped", "block": 1024, "rows": 1, "num_warps": 4, "grid": 262144},
            {"variant": "looped", "block": 2048, "rows": 1, "num_warps": 4, "grid": 262144},
            {"variant": "looped", "block": 4096, "rows": 1, "num_warps": 8, "grid": 262144},
            {"variant": "looped", "block": 4096, "rows": 1, "num_warps": 8, "grid": 65536},
            {"variant": "looped", "block": 4096, "rows": 1, "num_warps": 8, "grid": 65536},
        ],
    )
    + _auto(
        "cutile_config",
        [(262144, 1024), (262144, 2048), (262144, 4096), (65536, 8192), (65536, 16384)],
        [
            {"variant": "multirow", "block": 1024, "rows": 16, "grid": H200_SMS},
            {"variant": "multirow", "block": 2048, "rows": 4, "grid": H200_SMS},
            {"variant": "multirow", "block": 4096, "rows": 4, "grid": H200_SMS},
            {"variant": "multirow", "block": 8192, "rows": 4, "grid": H200_SMS},
            {"variant": "multirow", "block": 16384, "rows": 2, "grid": H200_SMS},
        ],
    ),
    plan_errors=_row_errors(),
    triton_compile=[
        (
            "_triton_rows_kernel",
            {
                "x_ptr": "*fp16",
                "w_ptr": "*fp16",
                "y_ptr": "*fp16",
                "m": "i32",
                "n": "i32",
                "stride_x": "i32",
                "stride_y": "i32",
                "eps": "fp32",
                "ROWS": "constexpr",
                "BLOCK": "constexpr",
            },
            {"ROWS": 8, "BLOCK": 1024},
            {},
        ),
        (
            "_triton_looped_kernel",
            {
                "x_ptr": "*bf16",
                "w_ptr": "*bf16",
                "y_ptr": "*bf16",
                "n": "i32",
                "stride_x": "i32",
                "stride_y": "i32",
                "eps": "fp32",
                "BLOCK": "constexpr",
            },
            {"BLOCK": 4096},
            {},
        ),
    ],
    cutile_kernels=[
        (kernel, dt, args, dt == "float16" and kernel == "_cutile_rows_kernel")
        for dt in ("float16", "bfloat16", "float32")
        for kernel, args in (
            ("_cutile_rows_kernel", ["A2", "A1", "A2", EPS, 16, 1024]),
            ("_cutile_looped_kernel", ["A2", "A1", "A2", EPS, 4096]),
        )
    ],
)


# -- softmax ------------------------------------------------------------------------------------


def _softmax_inputs(dt, s):
    m, n = s["m"], s["n"]
    g = _generator(m * 7919 + n)
    shift = 200 * (2 * torch.rand(m, 1, generator=g) - 1)  # a naive exp overflows in f32
    x = (2 * torch.randn(m, s["ld"], generator=g) + shift).to(_dtype(dt))[:, :n]
    keep = torch.ones(m, n, dtype=torch.bool)
    if s.get("masked"):
        cols = torch.arange(n)
        keep = (cols[None, :] <= (torch.arange(m)[:, None] * 997) % n) & (cols[None, :] % 5 != 1)
        x = x.masked_fill(~keep, float("-inf"))
    return {"args": (x,), "keep": keep}


SOFTMAX = Kernel(
    inputs=_softmax_inputs,
    reference=lambda inputs: torch.softmax(inputs["args"][0].double(), dim=-1),
    out_shape=lambda s: [s["m"], s["n"]],
    # Also masked (-inf) logits with a ragged kept prefix, and a looped row past 16384.
    interpreted=[
        (dt, s, v, k)
        for dt in _DTYPES
        for s in _ROW_SHAPES + ({"m": 4, "n": 3000, "ld": 3000, "masked": True},)
        for v, k in _ROW_VARIANTS
    ]
    + [("float32", {"m": 2, "n": 20000, "ld": 20000}, "auto", {})],
    zero_counts=lambda y, inputs: {"masked logits not 0": int((y[~inputs["keep"]] != 0).sum())},
    torch_case=("float32", {"m": 5, "n": 1000, "ld": 1040}, 1e-6),
    bad_inputs=[
        ((torch.randn(2, 3, 4),), ValueError, "must be 2-D"),
        ((torch.randn(2, 4, dtype=torch.float64),), TypeError, "must be one of"),
        ((torch.randn(4, 2).t(),), ValueError, "last dim must be contiguous"),
    ],
    plans=[
        ("triton_config", (m, n, H200_SMS), {}, Has(variant=v))
        for m, n, v in (
            (65536, 1024, "row"),
            (65536, 4096, "row"),
            (65536, 8192, "row"),
            (65536, 16384, "row"),
            (64, 512, "row"),
            (1024, 16385, "looped"),
            (1024, 32768, "looped"),
        )
    ]
    + [
        ("cutile_config", (m, n, H200_SMS), {}, Has(variant=v))
        for m, n, v in ((65536, 1024, "row"), (65536, 8192, "row"), (200, 4096, "row"), (1024, 32768, "looped"))
    ]
    + _row_rules()
    + [
        # multirow: persistent over 8K-element tiles
        (
            "triton_config",
            (65536, 1024, H200_SMS, "multirow"),
            {},
            {"variant": "multirow", "block": 1024, "rows": 8, "num_warps": 16, "grid": H200_SMS * 2},
        ),
        (
            "cutile_config",
            (65536, 1024, H200_SMS, "multirow"),
            {},
            {"variant": "multirow", "block": 1024, "rows": 16, "grid": H200_SMS},
        ),
        ("cutile_config", (300, 16384, H200_SMS, "multirow"), {}, Has(rows=2)),
        # looped tiles are 4096 wide, or the whole row if narrower
        ("triton_config", (64, 32768, H200_SMS), {}, Has(block=4096)),
        ("triton_config", (64, 1000, H200_SMS, "looped"), {}, Has(block=1024)),
        ("cutile_config", (64, 32768, H200_SMS), {}, {"variant": "looped", "block": 4096, "rows": 1, "grid": 64}),
    ]
    + _auto(
        "triton_config",
        [(65536, 1024), (65536, 4096), (65536, 8192)],
        [
            {"variant": "row", "block": 1024, "rows": 1, "num_warps": 4, "grid": 65536},
            {"variant": "row", "block": 4096, "rows": 1, "num_warps": 8, "grid": 65536},
            {"variant": "row", "block": 8192, "rows": 1, "num_warps": 16, "grid": 65536},
        ],
    )
    + _auto(
        "cutile_config",
        [(65536, 1024), (65536, 4096), (65536, 8192)],
        [
            {"variant": "row", "block": 1024, "rows": 1, "grid": 65536},
            {"variant": "row", "block": 4096, "rows": 1, "grid": 65536},
            {"variant": "row", "block": 8192, "rows": 1, "grid": 65536},
        ],
    ),
    plan_errors=_row_errors(),
    # The interpreter runs kernels as Python, so it accepts what the compiler rejects: a plain module
    # global read inside @triton.jit failed every looped launch on the H200 (2026-11-29) while the
    # interpreter tests passed.
    triton_compile=[
        (
            "_triton_looped_kernel",
            {
                "x_ptr": "*fp16",
                "y_ptr": "*fp16",
                "n": "i32",
                "stride_x": "i32",
                "stride_y": "i32",
                "BLOCK": "constexpr",
            },
            {"BLOCK": 1024},
            {},
        ),
        (
            "_triton_rows_kernel",
            {
                "x_ptr": "*bf16",
                "y_ptr": "*bf16",
                "m": "i32",
                "n": "i32",
                "stride_x": "i32",
                "stride_y": "i32",
                "ROWS": "constexpr",
                "BLOCK": "constexpr",
            },
            {"ROWS": 4, "BLOCK": 1024},
            {},
        ),
    ],
    cutile_kernels=[
        (kernel, dt, args, True)
        for dt in ("float16", "bfloat16", "float32")
        for kernel, args in (
            ("_cutile_rows_kernel", ["A2", "A2", 16, 1024]),
            ("_cutile_looped_kernel", ["A2", "A2", 4096]),
        )
    ],
)


# -- silu_and_mul -------------------------------------------------------------------------------


def _silu_inputs(dt, s):
    m, h = s["m"], s["h"]
    g = _generator(m * 7919 + h)
    x = (2 * torch.randn(m, s["ld"], generator=g)).to(_dtype(dt))[:, : 2 * h]
    k = min(h, 4)  # saturating gates: silu must give 0 or the identity there, never NaN
    x[0, :k] = torch.tensor([-100.0, -30.0, 30.0, 100.0][:k]).to(x.dtype)
    return {"args": (x,)}


def _silu_reference(inputs):
    x = inputs["args"][0].double()
    h = x.shape[1] // 2
    gate, up = x[:, :h], x[:, h:]
    return gate * torch.sigmoid(gate) * up


SILU_AND_MUL = Kernel(
    inputs=_silu_inputs,
    reference=_silu_reference,
    out_shape=lambda s: [s["m"], s["h"]],
    # Irregular H (1, 1000, 4097), padded rows, row tiles that run past m, several column tiles (4097
    # and the forced 256-wide block), saturating gates.
    interpreted=[
        (dt, s, v, k)
        for dt in _DTYPES
        for s in (
            {"m": 3, "h": 1000, "ld": 2000},
            {"m": 2, "h": 4097, "ld": 8194},
            {"m": 5, "h": 1000, "ld": 2080},
            {"m": 1, "h": 1, "ld": 2},
        )
        for v, k in (
            ("tiled", {}),
            ("wide", {}),
            ("row", {}),
            ("row", {"block": 256}),
            ("tiled", {"block": 256, "rows": 2}),
            ("auto", {}),
        )
    ],
    torch_case=("float32", {"m": 5, "h": 1000, "ld": 2080}, 1e-5),
    bad_inputs=[
        ((torch.randn(2, 3, 4),), ValueError, "must be 2-D"),
        ((torch.randn(2, 5),), ValueError, "must be even"),
        ((torch.randn(2, 4, dtype=torch.float64),), TypeError, "must be one of"),
        ((torch.randn(4, 2).t(),), ValueError, "last dim must be contiguous"),
    ],
    plans=[
        # the perf configs get 4K-element tiles with no padding (auto = tiled)
        ("config", (65536, 4096), {}, {"variant": "tiled", "block": 4096, "rows": 1, "grid": 65536}),
        ("config", (16384, 14336), {}, {"variant": "tiled", "block": 2048, "rows": 2, "grid": 8192 * 7}),
        ("config", (16384, 14336, "wide"), {}, {"variant": "wide", "block": 2048, "rows": 4, "grid": 4096 * 7}),
        # row: one program per row, chunks of at most 4096
        ("config", (100, 14336, "row"), {}, {"variant": "row", "block": 4096, "rows": 1, "grid": 100}),
        ("config", (100, 1000, "row"), {}, Has(block=1024)),
        # rows never exceed m rounded up, or 64
        ("config", (3, 16), {}, Has(rows=4)),
        ("config", (1000, 16), {}, Has(rows=64)),
        (
            "config",
            (1000, 16, "tiled"),
            {"rows": 8, "block": 32},
            {"variant": "tiled", "block": 32, "rows": 8, "grid": 125},
        ),
    ],
    plan_errors=[("config", (10, 1000, "fastest"), {}, "variant must be one of")],
    triton_compile=[
        (
            "_triton_tiled_kernel",
            {
                "x_ptr": "*bf16",
                "y_ptr": "*bf16",
                "m": "i32",
                "h": "i32",
                "stride_x": "i32",
                "stride_y": "i32",
                "ROWS": "constexpr",
                "BLOCK": "constexpr",
            },
            {"ROWS": 2, "BLOCK": 2048},
            {},
        ),
        (
            "_triton_row_kernel",
            {
                "x_ptr": "*fp16",
                "y_ptr": "*fp16",
                "h": "i32",
                "stride_x": "i32",
                "stride_y": "i32",
                "BLOCK": "constexpr",
            },
            {"BLOCK": 4096},
            {},
        ),
    ],
    cutile_kernels=[
        (kernel, dt, args, dt == "bfloat16")
        for dt in ("bfloat16", "float16", "float32")
        for kernel, args in (
            (("_cutile_kernel", ("tiled", 4)), ["A2", "A2", "A2", 2, 2048]),
            (("_cutile_kernel", ("wide", -1)), ["A2", "A2", "A2", 4, 2048]),
            (("_cutile_kernel", ("row", 4)), ["A2", "A2", "A2", 4096]),
        )
    ],
    pinned=[("CUTILE_OCCUPANCY", lambda B: B.CUTILE_OCCUPANCY, 4, False)],
)


# -- matmul -------------------------------------------------------------------------------------


def _matmul_inputs(dt, s):
    m, n, k = s["m"], s["n"], s["k"]
    g = _generator(m * 7919 + n * 31 + k)
    a = torch.randn(m, s["lda"], generator=g).to(_dtype(dt))[:, :k]
    b = torch.randn(k, s["ldb"], generator=g).to(a.dtype)[:, :n]
    return {"args": (a, b)}


def _matmul_named(m, n, k, variant, bm, bn, grid, warps, stages):
    plan = {"variant": variant, "bm": bm, "bn": bn, "bk": 64, "grid": grid}
    return [
        (
            "triton_config",
            (m, n, k, H200_SMS, variant),
            {},
            dict(plan, num_warps=warps, num_stages=stages, even_k=k % 64 == 0),
        ),
        ("cutile_config", (m, n, H200_SMS, variant), {}, plan),
    ]


MATMUL = Kernel(
    inputs=_matmul_inputs,
    reference=lambda inputs: inputs["args"][0].double() @ inputs["args"][1].double(),
    out_shape=lambda s: [s["m"], s["n"]],
    # Tiny (one partial tile), ragged on every dim (K not a multiple of BK: the masked K step), K a
    # multiple of BK (the unmasked path), column slices, and a persistent grid of one program ("one
    # SM" on the CPU) that walks every tile.
    interpreted=[
        (dt, {"m": m, "n": n, "k": k, "lda": lda, "ldb": ldb}, v, {})
        for dt in ("float16", "bfloat16")
        for m, n, k, lda, ldb in (
            (3, 5, 7, 7, 5),
            (129, 257, 65, 65, 257),
            (130, 300, 128, 128, 300),
            (65, 40, 70, 80, 48),
        )
        for v in ("auto", "128x256x64", "256x128x64", "128x128x64", "persistent")
    ],
    torch_case=("bfloat16", {"m": 33, "n": 17, "k": 65, "lda": 70, "ldb": 17}, TOL["bfloat16"]),
    bad_inputs=[
        ((torch.randn(2, 3, 4).half(), torch.randn(4, 2).half()), ValueError, r"a must be \(m, k\)"),
        ((torch.randn(2, 4).half(), torch.randn(5, 2).half()), ValueError, r"b \(k, n\)"),
        ((torch.randn(2, 4), torch.randn(4, 2)), TypeError, "share one dtype"),
        ((torch.randn(2, 4).half(), torch.randn(4, 2).bfloat16()), TypeError, "share one dtype"),
        ((torch.randn(4, 2).half().t(), torch.randn(4, 2).half()), ValueError, "a's last dim must be contiguous"),
    ],
    plans=[
        # auto is left to autotune on the GPU, and is the big tile off it
        ("triton_config", (4096, 4096, 4096, H200_SMS), {}, None),
        ("triton_config", (100, 100, 100, 1), {"on_gpu": False}, Has(variant="128x256x64", bm=128, bn=256, bk=64)),
        # masked K only when K is ragged
        ("triton_config", (129, 257, 65, H200_SMS, "128x128x64"), {}, Has(even_k=False)),
        # persistent: one program per SM, or fewer tiles
        ("triton_config", (8192, 8192, 64, H200_SMS, "persistent"), {}, Has(grid=H200_SMS)),
        (
            "triton_config",
            (1000, 1000, 64, H200_SMS, "persistent"),
            {},
            Has(grid=8 * 4),
        ),  # ceil(1000/128) * ceil(1000/256)
        ("cutile_config", (8192, 8192, H200_SMS, "persistent"), {}, Has(grid=H200_SMS)),
        ("cutile_config", (1000, 1000, H200_SMS, "persistent"), {}, Has(grid=8 * 4)),
    ]
    # named variants at the perf shapes
    + [
        p
        for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (16384, 1024, 4096))
        for p in (
            _matmul_named(m, n, k, "128x256x64", 128, 256, (m // 128) * (n // 256), 8, 3)
            + _matmul_named(m, n, k, "256x128x64", 256, 128, (m // 256) * (n // 128), 8, 3)
            + _matmul_named(m, n, k, "128x128x64", 128, 128, (m // 128) * (n // 128), 8, 4)
            + _matmul_named(m, n, k, "persistent", 128, 256, H200_SMS, 8, 3)
        )
    ],
    plan_errors=[
        ("cutile_config", (4096, 4096, H200_SMS, "auto"), {}, "'auto' is tuned on the GPU"),
        ("triton_config", (10, 10, 10, 8, "fastest"), {}, "variant must be one of"),
        ("cutile_config", (10, 10, 8, "fastest"), {}, "variant must be one of"),
    ],
    # The interpreter accepts what the compiler rejects, so the kernels are also compiled, here, for
    # the GPU they will run on.
    triton_compile=[
        (
            kernel,
            {
                "a_ptr": "*bf16",
                "b_ptr": "*bf16",
                "c_ptr": "*bf16",
                "M": "i32",
                "N": "i32",
                "K": "i32",
                "stride_am": "i32",
                "stride_bk": "i32",
                "stride_cm": "i32",
                "BM": "constexpr",
                "BN": "constexpr",
                "BK": "constexpr",
                "GROUP": "constexpr",
                "EVEN_K": "constexpr",
            },
            {"BM": 128, "BN": 256, "BK": 64, "GROUP": 8, "EVEN_K": even_k},
            {"num_warps": 8, "num_stages": 3},
        )
        for kernel in ("_triton_matmul_kernel", "_triton_persistent_kernel")
        for even_k in (True, False)
    ],
    cutile_kernels=[
        (kernel, dt, ["A2", "A2", "A2", bm, bn, bk, 8], dt == "bfloat16" and bm == 128)
        for dt in ("bfloat16", "float16")
        for kernel in ("_cutile_tiles_kernel", "_cutile_persistent_kernel")
        for bm, bn, bk in ((128, 256, 64), (64, 64, 32))
    ],
    # The auto path's candidates: the committed H200 results were tuned over exactly these.
    pinned=[
        ("GROUP_M", lambda B: B.GROUP_M, 8, False),
        (
            "TRITON_AUTOTUNE",
            lambda B: B.TRITON_AUTOTUNE,
            (
                (128, 256, 64, 8, 3),
                (256, 128, 64, 8, 3),
                (128, 128, 64, 8, 4),
                (128, 128, 64, 4, 4),
                (64, 256, 64, 4, 4),
            ),
            False,
        ),
        (
            "CUTILE_AUTOTUNE",
            lambda B: B.CUTILE_AUTOTUNE,
            ((128, 256, 64, 1), (256, 128, 64, 1), (128, 256, 64, 2), (256, 256, 64, 2), (128, 128, 64, 1)),
            False,
        ),
        (
            "triton.autotune's configs and key",
            lambda B: (
                [
                    (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"], c.num_warps, c.num_stages)
                    for c in B._triton_autotuned.configs
                ],
                B._triton_autotuned.keys,
            ),
            (
                [
                    (128, 256, 64, 8, 3),
                    (256, 128, 64, 8, 3),
                    (128, 128, 64, 8, 4),
                    (128, 128, 64, 4, 4),
                    (64, 256, 64, 4, 4),
                ],
                ["M", "N", "K"],
            ),
            True,
        ),
    ],
    triton_ptx_has="mma",  # tensor-core instructions (wgmma on sm_90)
)

KERNELS = {"rms_norm": RMS_NORM, "softmax": SOFTMAX, "silu_and_mul": SILU_AND_MUL, "matmul": MATMUL}
