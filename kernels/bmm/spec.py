"""bmm: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel describes; its
suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

C[i] = A[i] @ B[i] with A (batch, m, k), B (batch, k, n), C (batch, m, n) in f16 or bf16, products
accumulated in f32. A config's `at` / `bt` (1) makes A's / B's matrices column-major (the
transpose(1, 2) of a row-major batch: K of attention's Q @ K^T), `shared` (1) makes B one matrix
expanded over the batch (batch stride 0), `ai` (1) interleaves A's batches with its rows (Q of shape
(seq, heads, dim) seen as (heads, seq, dim)).
"""

from __future__ import annotations

import torch

from kernels.bmm import op
from tilekit.runtime import mma
from tilekit.runtime.kernel import BadInput, FfiCase, KernelSpec, call, generator, shapes, sweep_grid, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random A, B ~ N(0, 1) (never zeros), laid out as the config says.

    >>> cfg = {"dtype": "float16", "batch": 3, "m": 5, "n": 6, "k": 7, "bt": 1, "shared": 1}
    >>> [(tuple(t.shape), t.stride()) for t in make_inputs(cfg, device="meta").values()]
    [((3, 5, 7), (35, 7, 1)), ((3, 7, 6), (0, 1, 7))]
    >>> [(tuple(t.shape), t.stride()) for t in make_inputs(dict(cfg, at=1, ai=1, shared=0), device="meta").values()]
    [((3, 5, 7), (5, 1, 15)), ((3, 7, 6), (42, 1, 7))]
    """
    g, dt = generator(device, seed), torch_dtype(cfg["dtype"])
    batch, m, n, k = cfg["batch"], cfg["m"], cfg["n"], cfg["k"]

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(dt)

    if cfg.get("ai"):  # stored (rows, batch, cols)
        a = randn(k, batch, m).transpose(0, 1) if cfg.get("at") else randn(m, batch, k).transpose(0, 1)
    else:
        a = randn(batch, k, m) if cfg.get("at") else randn(batch, m, k)
    a = a.transpose(1, 2) if cfg.get("at") else a
    b_batch = 1 if cfg.get("shared") else batch
    b = randn(b_batch, n, k).transpose(1, 2) if cfg.get("bt") else randn(b_batch, k, n)
    return {"a": a, "b": b.expand(batch, k, n)}


def f16(*shape):
    return torch.randn(*shape, dtype=torch.float16)


SPEC = KernelSpec(
    op=op,
    dims={"batch": 1 << 12, "m": 1 << 17, "n": 1 << 17, "k": 1 << 17},
    strides={"at": "-at", "bt": "-bt", "shared": "-shared", "ai": "-ai"},
    perf_id_sep="x",
    # A batch of one, odd sizes below one tile (3x17x33x65), ragged edges on every dim, each
    # transposed layout, B shared by the batch (row- and column-major), A's batches interleaved
    # with its rows, and two larger batches. Moderate sizes keep the float64 reference cheap.
    correctness_shapes=shapes(
        "batch m n k",
        *((1, 128, 128, 128), (3, 17, 33, 65), (4, 129, 257, 65), (16, 512, 512, 512), (8, 300, 1000, 520)),
    )
    + shapes("batch m n k at", (2, 200, 300, 100, 1))
    + shapes("batch m n k bt", (3, 129, 65, 257, 1), (8, 1024, 1024, 128, 1))
    + shapes("batch m n k at bt", (2, 100, 100, 100, 1, 1))
    + shapes("batch m n k shared", (5, 129, 257, 65, 1), (1, 33, 17, 9, 1))
    + shapes("batch m n k bt shared", (3, 65, 70, 130, 1, 1))
    + shapes("batch m n k ai", (4, 33, 40, 50, 1), (6, 257, 128, 128, 1)),
    # The two shapes (cuBLAS 778 / 638 TFLOP/s measured), f16 at the first; attention of
    # 32 heads x batch 4 at 2048 tokens, head dim 128: S = Q @ K^T (K read in place) and O = P @ V;
    # a weight shared by a batch of 16 (batch stride 0).
    perf_configs=shapes(
        "dtype batch m n k",
        *(("bfloat16", 16, 2048, 2048, 2048), ("bfloat16", 64, 512, 512, 1024), ("float16", 16, 2048, 2048, 2048)),
        ("bfloat16", 128, 2048, 128, 2048),
    )
    + shapes("dtype batch m n k bt", ("bfloat16", 128, 2048, 2048, 128, 1))
    + shapes("dtype batch m n k shared", ("bfloat16", 16, 1024, 4096, 4096, 1)),
    # make sweep: batches of heads to a few large products, attention-sized (128) to MLP-sized
    # dims, B as given and transposed (Q Kt)
    sweep=sweep_grid(
        quick=dict(dtype=("bfloat16",), batch=(16, 128), m=(128, 512, 2048), n=(128, 2048), k=(128, 2048)),
        full=dict(
            dtype=op.DTYPES, batch=(1, 16, 128), m=(128, 512, 2048), n=(128, 512, 2048), k=(128, 2048), bt=(None, 1)
        ),
    ),
    tolerance=mma.TOLERANCE,  # matmul's: the final rounding to the output dtype with f32 accumulation
    # an element near zero of a deep product (K = 128256) is a difference of partial sums of the
    # tensor's RMS: its error is judged against that scale (docs/kernels.md, matmul NOTES.md)
    max_error_scale="rms",
    make_inputs=make_inputs,
    reference=mma.reference,
    bytes_moved=mma.bytes_moved,
    flops=mma.flops,
    out_shape=lambda cfg: (cfg["batch"], cfg["m"], cfg["n"]),
    # Every list of candidates: a few tiles (small list), a batch that fills the GPU (400 tiles:
    # FLOP_BOUND, the persistent variants loop), 33-row products with B transposed (decode list),
    # Q @ K^T-like k = 64 with ragged m and n (320 tiles: STORE_BOUND).
    variant_shapes=shapes("batch m n k dtype", (3, 129, 257, 65, "bfloat16"), (16, 640, 640, 320, "float16"))
    + shapes("batch m n k bt dtype", (8, 33, 1000, 520, 1, "bfloat16"), (32, 200, 640, 64, 1, "bfloat16")),
    max_variants=11,
    size_check=lambda **dims: mma.check_index_range("bmm", dims),
    # a of 1024 x 2048 x 1024: 2^31 elements, refused; 2^31 - 2^20 served
    autotune_edges=shapes("batch m n k", (1024, 2048, 64, 1024), (1023, 2048, 64, 1024), (4096, 1, 1, 1)),
    bad_inputs={
        "dtype_mix": BadInput(lambda: call(f16(2, 4, 8), f16(2, 8, 3).bfloat16()), TypeError, "share one dtype"),
        "float32": BadInput(lambda: call(torch.randn(2, 4, 8), torch.randn(2, 8, 3)), TypeError, "share one dtype"),
        "inner_dim": BadInput(lambda: call(f16(2, 4, 8), f16(2, 7, 3)), ValueError, "b (batch, k, n)"),
        "batch_mismatch": BadInput(lambda: call(f16(2, 4, 8), f16(3, 8, 3)), ValueError, "b.expand(batch, k, n)"),
        "two_dims": BadInput(lambda: call(f16(4, 8), f16(8, 3)), ValueError, "a must be (batch, m, k)"),
        "b_two_dims": BadInput(lambda: call(f16(2, 4, 8), f16(8, 3)), ValueError, "(one b for every product: b.expand"),
        "cpu_tensor": BadInput(lambda: call(f16(2, 4, 8), f16(2, 8, 3)), ValueError, "CUDA device"),
        "strided_matrix": BadInput(
            lambda: call(f16(2, 8, 16)[:, ::2, ::2], f16(2, 8, 3)), ValueError, "a must be contiguous in its last dim"
        ),
        "out_shape": BadInput(lambda: call(f16(2, 4, 8), f16(2, 8, 3), out=f16(2, 4, 4)), ValueError, "out must be"),
    },
    ffi_example={"batch": 2, "m": 4, "n": 16, "k": 8, "dtype": "float16"},
    alias_example={"batch": 2, "m": 4, "n": 8, "k": 8, "dtype": "float16"},  # square products: out=a is the same shape
    ffi_cases={
        "batch_mismatch": FfiCase(lambda: {"b": f16(3, 8, 16)}, message="batch dims differ: `a` is [2, 4, 8]"),
        "inner_dim": FfiCase(lambda: {"b": f16(2, 9, 16)}, message="inner dims differ: `a` is [2, 4, 8]"),
        "out_shape": FfiCase(lambda: {"out": f16(2, 4, 17)}, message="`c` shape [2, 4, 17] != (batch, m, n)"),
        "out_overlaps": FfiCase(lambda: {"out": f16(4, 16).expand(2, 4, 16)}, message="`c` strides [0, 16, 1] overlap"),
        "aliased_out": FfiCase(
            lambda: (lambda a: {"a": a, "b": f16(2, 16, 16), "out": a})(f16(2, 4, 16)),
            message="`c` must not alias `a` or `b`",
        ),
        "tile_not_pow2": FfiCase(variant={"bm": 96}, message="bm=96"),
        "cga_not_pow2": FfiCase(variant={"cga": 3}, message="num_cta_in_cga=3"),
        # column-major matrices, a B shared by the batch, interleaved batches: read in place
        "transposed": FfiCase(lambda: {"a": f16(2, 8, 4).transpose(1, 2), "b": f16(2, 16, 8).transpose(1, 2)}, code=-4),
        "shared_b": FfiCase(lambda: {"b": f16(1, 8, 16).expand(2, 8, 16)}, code=-4),
        "interleaved": FfiCase(
            lambda: {"a": f16(4, 2, 8).transpose(0, 1), "out": f16(4, 2, 16).transpose(0, 1)}, code=-4
        ),
    },
)
