"""matmul: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel describes;
its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

C = A @ B with A (m, k), B (k, n), C (m, n) in f16 or bf16, products accumulated in f32. A config's
`at` / `bt` (1) makes A / B column-major, the .t() of a row-major buffer: `bt` is how a model passes
an nn.Linear weight (x @ W.t()).
"""

from __future__ import annotations

import torch

from kernels.matmul import op
from tilekit.runtime import mma
from tilekit.runtime.kernel import BadInput, FfiCase, KernelSpec, call, generator, shapes, sweep_grid, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random A, B ~ N(0, 1) (never zeros), as column slices of (m, lda) / (k, ldb) buffers
    when the config has row strides (SPEC.make_out: c inside rows of ldc); with `at` / `bt` as the
    .t() of (k, lda) / (n, ldb) buffers.

    >>> cfg = {"dtype": "float16", "m": 5, "n": 6, "k": 7, "lda": 9, "ldb": 8, "ldc": 10}
    >>> inputs = make_inputs(cfg, device="cpu", seed=1)
    >>> out = SPEC.make_out(cfg, inputs)
    >>> [(tuple(t.shape), t.stride()) for t in (inputs["a"], inputs["b"], out)], bool(out.isnan().all())
    ([((5, 7), (9, 1)), ((7, 6), (8, 1)), ((5, 6), (10, 1))], True)
    >>> [(tuple(t.shape), t.stride()) for t in make_inputs(dict(cfg, bt=1), device="meta").values()]
    [((5, 7), (9, 1)), ((7, 6), (1, 8))]
    """
    g, dt = generator(device, seed), torch_dtype(cfg["dtype"])

    def operand(rows, cols, ld, transposed):
        if transposed:
            return operand(cols, rows, ld, False).t()
        return torch.randn(rows, ld or cols, generator=g, device=device, dtype=torch.float32).to(dt)[:, :cols]

    m, n, k = cfg["m"], cfg["n"], cfg["k"]
    return {"a": operand(m, k, cfg.get("lda"), cfg.get("at")), "b": operand(k, n, cfg.get("ldb"), cfg.get("bt"))}


def f16(*shape):
    return torch.randn(*shape, dtype=torch.float16)


SPEC = KernelSpec(
    op=op,
    dims={"m": 1 << 20, "n": 1 << 18, "k": 1 << 18},
    strides={"lda": "-lda", "ldb": "-ldb", "ldc": "-ldc", "at": "-at", "bt": "-bt"},  # "-bt1": B column-major
    out_row_stride="ldc",
    perf_id_sep="x",
    # One tile, ragged edges on every dim (129x257x65: each one past a power of two), a single row,
    # 1000^3, row strides larger than the row (column slices of wider buffers) on all three
    # matrices, and two large squares; column-major B (x @ W.t(): ragged, padded, a decode row block)
    # and both column-major. Moderate sizes keep the float64 reference cheap.
    correctness_shapes=shapes(
        "m n k lda ldb ldc",
        *((128, 128, 128), (129, 257, 65), (1, 72, 40), (1000, 1000, 1000), (777, 1280, 2000, 2048, 1344, 1408)),
        # c a column slice whose last column tile is ragged (257 = 2 x 128 + 1; rows 264 apart): the
        # edge tile's store must stop at column 257 (matmul_acc_ wrote past it on an H100)
        (129, 257, 1000, 1000, 257, 264),
        *((2048, 2048, 2048), (4096, 4096, 4096)),
    )
    + shapes("m n k bt", (129, 257, 65, 1), (16, 4096, 4096, 1))
    + shapes("m n k ldb bt", (777, 1280, 2000, 2048, 1))
    + shapes("m n k at bt", (1000, 1000, 1000, 1, 1)),
    # the squares, a wide and a tall product; x @ W.t() with the weight as given (B column-major) at
    # the squares and at decode sizes of Llama-3-8B (hidden 4096, MLP 14336) for 16 and 64 tokens,
    # and a 128-token chunk at 4096 (32 output tiles of 128 x 128: the sweep's worst loss); and the
    # three products of a training step's LM head (2048 tokens, Llama-3's 128256-word vocabulary:
    # most of the model check's training-step matmul time): logits = x @ W.t(), dx = dlogits @ W
    # (both operands as given), dW = dlogits.t() @ x (A column-major)
    perf_configs=shapes(
        "dtype m n k bt",
        *(("bfloat16", 4096, 4096, 4096), ("bfloat16", 8192, 8192, 8192), ("bfloat16", 8192, 8192, 1024)),
        ("bfloat16", 16384, 1024, 4096),
        *(("bfloat16", 4096, 4096, 4096, 1), ("bfloat16", 8192, 8192, 8192, 1)),
        *(("bfloat16", m, n, 4096, 1) for n in (4096, 14336) for m in (16, 64)),
        ("bfloat16", 128, 4096, 4096, 1),
        ("bfloat16", 2048, 128256, 4096, 1),
        ("bfloat16", 2048, 4096, 128256),
        # Llama-3-8B's MLP down projection (K = 14336) at a decode batch of 256 and a 4 x 2048 prefill
        *(("bfloat16", m, 4096, 14336, 1) for m in (256, 8192)),
    )
    + shapes("dtype m n k at", ("bfloat16", 128256, 4096, 2048, 1)),
    tolerance=mma.TOLERANCE,
    # an element near zero of a deep product (K = 128256) is a difference of partial sums of the
    # tensor's RMS: its error is judged against that scale (docs/kernels.md, matmul NOTES.md)
    max_error_scale="rms",
    make_inputs=make_inputs,
    reference=mma.reference,
    bytes_moved=mma.bytes_moved,
    flops=mma.flops,
    out_shape=lambda cfg: (cfg["m"], cfg["n"]),
    # 129x257x65: ragged on every dim, few tiles (the small-problem variant list). 2176x2096x320:
    # the large-problem list (289 tiles of 128x128, at least two an SM; 153 of 128x256, so the
    # persistent variants loop on an H200), ragged N and M edges for the 256-wide and -tall tiles, and
    # every dim a multiple of 16 like 4096^3, so the JIT'd variants are reused. (2176x1920, before
    # 2026-12-07, had 255 tiles of 128x128: the small list, so the large one went untested.)
    # 33x1000x520 (B column-major) and 33x257x520 (f16, B row-major, odd n): the decode and split-K lists.
    # 130x250x8330: the long-K splits (K past 8192; 131 K-tiles of 64, which 2 and 3 splits leave uneven).
    variant_shapes=shapes("m n k dtype", (129, 257, 65, "bfloat16"), (2176, 2096, 320, "float16"))
    + shapes("m n k bt dtype", (33, 1000, 520, 1, "bfloat16"), (33, 257, 520, 0, "float16"))
    + shapes("m n k bt dtype", (130, 250, 8330, 1, "bfloat16")),
    max_variants=12,
    every_variant_default=True,  # variant="default" (every knob -1: ffi_util::MmaVariant's defaults) too
    # make sweep: decode (m <= 64) to prefill rows, Llama-3-8B's widths and depths, B as given and as
    # an nn.Linear weight (bt)
    sweep=sweep_grid(
        quick=dict(dtype=("bfloat16",), m=(1, 16, 128, 1024, 4096, 8192), n=(4096, 14336), k=(4096,), bt=(None, 1)),
        full=dict(
            dtype=op.DTYPES,
            m=(1, 16, 64, 128, 512, 2048, 4096, 8192),
            n=(1024, 4096, 14336),
            k=(1024, 4096, 8192),
            bt=(None, 1),
        ),
    ),
    size_check=lambda **dims: mma.check_index_range("matmul", dims),
    # c of 16384 x 151936: 2.5e9 elements, past i32: refused; of 65535 x 32768: 2^31 - 2^15 elements
    # (served), of 65536 x 32768: 2^31 (refused)
    autotune_edges=shapes(
        "m n k",
        *((1000, 1, 1), (4097, 11008, 4096), (4096, 151936, 4096), (16384, 151936, 4096)),
        *((65535, 32768, 1), (65536, 32768, 1)),
    ),
    bad_inputs={
        "dtype_mix": BadInput(lambda: call(f16(4, 8), f16(8, 3).bfloat16()), TypeError, "share one dtype"),
        "inner_dim": BadInput(lambda: call(f16(4, 8), f16(7, 3)), ValueError, "a must be (m, k) and b (k, n)"),
        "float32": BadInput(lambda: call(torch.randn(4, 8), torch.randn(8, 3)), TypeError, "share one dtype"),
        "batched": BadInput(lambda: call(f16(2, 4, 8), f16(8, 3)), ValueError, "a must be (m, k)"),
        # a one-column out whose column is strided (the .t() of a row): ffi.rs takes c row-major only
        "out_one_strided_column": BadInput(
            lambda: call(f16(4, 8), f16(8, 1), out=f16(1, 4).t()), ValueError, "out must be contiguous in its last dim"
        ),
    },
    ffi_example={"m": 4, "n": 16, "k": 8, "dtype": "float16"},
    alias_example={"m": 4, "n": 8, "k": 8, "dtype": "float16"},  # a square product: out=a is the same shape
    ffi_cases={
        "inner_dim": FfiCase(lambda: {"b": f16(9, 16)}, message="inner dims differ: `a` is [4, 8] and `b` is [9, 16]"),
        "out_shape": FfiCase(lambda: {"out": f16(4, 17)}, message="`c` shape [4, 17] != (m, n) = (4, 16)"),
        "aliased_out": FfiCase(
            lambda: (lambda a: {"a": a, "b": f16(16, 16), "out": a})(f16(16, 16)),
            message="`c` must not alias `a` or `b`",
        ),
        "tile_not_pow2": FfiCase(variant={"bm": 96}, message="bm=96"),
        "cga_not_pow2": FfiCase(variant={"cga": 3}, message="num_cta_in_cga=3"),
        "too_many_splits": FfiCase(variant={"splits": 17}, message="splits=17: use 1..=16"),
        "split_persistent": FfiCase(variant={"persistent": True, "splits": 2}, message="use programs=0"),
        # row strides larger than the row, on all three: accepted, so the call reaches device set-up
        "column_slices": FfiCase(
            lambda: {"a": f16(129, 72)[:, :65], "b": f16(65, 264)[:, :257], "out": f16(129, 272)[:, :257]}, code=-4
        ),
        # A.t() and an nn.Linear weight as given (x @ W.t()): accepted, read in place
        "column_major": FfiCase(lambda: {"a": f16(8, 4).t(), "b": f16(16, 8).t()}, code=-4),
        "out_column_major": FfiCase(
            lambda: {"out": f16(16, 4).t()}, message="`c` must be contiguous in its last dim (strides [1, 4])"
        ),
        # a single column too (op.py refuses it first: bad_inputs' out_one_strided_column)
        "out_one_strided_column": FfiCase(
            lambda: {"b": f16(8, 1), "out": f16(1, 4).t()},
            message="`c` must be contiguous in its last dim (strides [1, 4])",
        ),
    },
)
