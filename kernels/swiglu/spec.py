"""swiglu: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel describes;
its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

a (gate) and b (up) are (m, h) tensors stored apart, each in rows of its own stride (a config's
`lda`, `ldb`; `ldo` for out), last dim contiguous; out = silu(a) * b with silu(a) = a * sigmoid(a),
f32 arithmetic, output in a's dtype.
"""

from __future__ import annotations

import torch

from kernels.swiglu import op
from tilekit.runtime import gated
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, row_kernel, shapes, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random a, b ~ N(0, 2^2) (never zeros), column slices of (m, lda) / (m, ldb) buffers
    when the config has row strides, plus tilekit.runtime.gated's SATURATING_GATES (silu's flat parts, and
    100, which a sigmoid written exp(a) / (1 + exp(a)) turns into NaN) at the start of a's row 0.

    >>> inputs = make_inputs({"dtype": "float16", "m": 4, "h": 6, "lda": 16, "ldb": 8}, device="cpu", seed=1)
    >>> [(tuple(t.shape), t.stride()) for t in inputs.values()], inputs["a"][0, :4].tolist()
    ([((4, 6), (16, 1)), ((4, 6), (8, 1))], [-100.0, -30.0, 30.0, 100.0])
    """
    g, dt, m, h = generator(device, seed), torch_dtype(cfg["dtype"]), cfg["m"], cfg["h"]

    def operand(ld):
        return (2 * torch.randn(m, ld or h, generator=g, device=device, dtype=torch.float32)).to(dt)[:, :h]

    a, b = operand(cfg.get("lda")), operand(cfg.get("ldb"))
    gated.plant_saturating_gates(a)
    return {"a": a, "b": b}


def reference(inputs: dict) -> torch.Tensor:
    return gated.reference(inputs["a"], inputs["b"])


def args(dtype=torch.float32, b=None, **kwargs):
    """A BadInput's call: CPU a (4, 8) of `dtype`, and b like it unless given."""
    return call(torch.randn(4, 8, dtype=dtype), torch.randn(4, 8, dtype=dtype) if b is None else b, **kwargs)


SPEC = row_kernel(  # its tolerance: a few output ulps (the torch baseline rounds twice: silu, then the product)
    op,
    "h",
    strides={"lda": "lda", "ldb": "ldb", "ldo": "ldo"},
    out_row_stride="ldo",
    # Tiny to large and irregular H (1000 one padded tile, 4097 a 1-element last tile, 14336 seven
    # 2048-wide tiles); three different row strides, none 16-byte aligned in 257x4097.
    correctness_shapes=shapes("m h", (1, 1), (3, 1000), (1000, 14336), (65536, 4096))
    + shapes("m h lda ldb ldo", (257, 4097, 4100, 8200, 4104), (4096, 4096, 8320, 4096, 4160)),
    # The MLP widths of real models at 16384 tokens (Llama-2-7B 11008, Llama-2-13B 13824, Llama-3-8B
    # and Mistral-7B 14336, Qwen2-7B 18944), silu_and_mul's first shape (65536 x 4096), a decode
    # batch (256 tokens of Llama-3-8B); Llama-2-7B in f16 and Llama-3-8B at 4096 tokens in f32.
    perf_configs=shapes(
        "dtype m h",
        *(("bfloat16", 16384, 11008), ("bfloat16", 16384, 13824), ("bfloat16", 16384, 14336)),
        *(("bfloat16", 16384, 18944), ("bfloat16", 65536, 4096), ("bfloat16", 256, 14336)),
        *(("float16", 16384, 11008), ("float32", 4096, 14336)),
    ),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=gated.bytes_moved,  # 3 m h elements moved, as silu_and_mul's
    # silu_and_mul's: partial row tiles (37 rows), one padded tile (1000), whole tiles (14336),
    # a 1-element last tile (4097), padded rows of a and b with every variant unmasked (64 x 4096).
    variant_shapes=shapes("m h dtype lda ldb", *gated.VARIANT_EDGES, (64, 4096, "float16", 8200, 4160)),
    every_variant_default=True,
    bad_inputs={
        "shape_mismatch": BadInput(lambda: args(b=torch.randn(4, 9)), ValueError, "one shape"),
        "cpu_tensor": BadInput(args, ValueError, "CUDA device"),
        "float64": BadInput(lambda: args(dtype=torch.float64), TypeError, "must share one dtype of"),
        "mixed_dtypes": BadInput(lambda: args(b=torch.randn(4, 8).half()), TypeError, "float32 and torch.float16"),
        "b_strided_last_dim": BadInput(lambda: args(b=torch.randn(8, 4).t()), ValueError, "b must be contiguous"),
        "out_shape": BadInput(lambda: args(out=torch.empty(4, 4)), ValueError, "out must be (4, 8)"),
    },
    ffi_cases={
        "b_shape": FfiCase(lambda: {"b": torch.randn(4, 9)}, message="`b` shape [4, 9] != `a` shape [4, 8]"),
        "b_rows_overlap": FfiCase(
            lambda: {"b": torch.randn(40).as_strided((4, 8), (4, 1))}, message="`b` row stride 4 < its row length 8"
        ),
        "out_over_a": FfiCase(
            lambda: (lambda t: {"a": t[:4], "out": t[1:5]})(torch.randn(5, 8)), message="`out` overlaps `a`"
        ),
        "out_over_b": FfiCase(
            lambda: (lambda t: {"b": t[1:5], "out": t[:4]})(torch.randn(5, 8)), message="`out` overlaps `b`"
        ),
        "block_not_pow2": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        "tile_too_big": FfiCase(variant={"block": 16384, "rows": 2}, message="block*rows <= 16384"),
        # valid, so the calls reach device set-up: a and b one tensor (both only read), out a or b
        # itself (in place), and a, b, out in rows of 20, 12 and 16
        "a_is_b": FfiCase(lambda: dict.fromkeys(("a", "b"), torch.randn(4, 8)), code=-4),
        "out_is_a": FfiCase(lambda: dict.fromkeys(("a", "out"), torch.randn(4, 8)), code=-4),
        "out_is_b": FfiCase(lambda: dict.fromkeys(("b", "out"), torch.randn(4, 8)), code=-4),
        "padded_rows": FfiCase(
            lambda: {"a": torch.randn(4, 20)[:, :8], "b": torch.randn(4, 12)[:, :8], "out": torch.empty(4, 16)[:, :8]},
            code=-4,
        ),
    },
)
