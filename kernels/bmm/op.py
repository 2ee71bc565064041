"""bmm, the cuTile Rust port: C[i] = A[i] @ B[i] in f16 or bf16 with f32 accumulation.

    c = bmm(a, b, variant="auto", out=None)    # a: (batch, m, k), b: (batch, k, n) CUDA f16/bf16
    s = bmm(q, k.transpose(1, 2))              # an attention head's K (batch, seq, dim): read in place
    y = bmm(x, w.expand(batch, k, n))          # one matrix shared by every product: batch stride 0

Each matrix of a and b is row-major (last dim contiguous) or column-major (middle dim contiguous:
the transpose(1, 2) of a row-major batch), at any batch stride, 0 included: tilekit.runtime.mma.layout
reads which from the strides, as ffi.rs does. The variant knobs and their defaults are
kernels/matmul's; the candidates are chosen by the batch's tile count and K (NOTES.md, "The variant
space").

`cutile_bmm` (kernels/bmm/ffi.rs) called through tilekit.runtime.port. `variant`: "auto" the autotuned
candidate of `variants` for this GPU, dtype and shape class, "default" ffi.rs's defaults, a dict
{"bm", "bn", "bk", "group", "persistent", "occupancy", "cga"}.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import autotune, checks, mma, ops, port

CDEF = """
int32_t cutile_bmm(const TensorDesc* c, const TensorDesc* a, const TensorDesc* b,
                   int32_t bm, int32_t bn, int32_t bk, int32_t group, int32_t programs,
                   int32_t occupancy, int32_t num_cta_in_cga,
                   int32_t device_id, uint64_t stream);
"""

DTYPES = mma.DTYPES
DEFAULT_VARIANT = dict(mma.DEFAULT_VARIANT)
export_args = mma.export_args  # the same knobs, in the same order


@port.entry(layouts={"a": "(batch, m, k)", "b": "(batch, k, n); one b for every product: b.expand(batch, k, n)"})
def bmm(a: Tensor, b: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """C[i] = A[i] @ B[i]; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(
            f"bmm: a must be (batch, m, k) and b (batch, k, n), got {tuple(a.shape)} and {tuple(b.shape)} "
            "(a b shared by every product: b.expand(batch, k, n))"
        )
    checks.dtypes("bmm", DTYPES, a=a, b=b)
    (batch, m, k), n = a.shape, b.shape[2]
    a_t, b_t = mma.layout("bmm", "a", a), mma.layout("bmm", "b", b)
    checks.out_matches("bmm", out, (batch, m, n), a)
    if out is not None:
        checks.contiguous_last_dim("bmm", size_one_ok=True, out=out)
    mma.check_index_range("bmm", {"batch": batch, "m": m, "n": n, "k": k}, a=a, b=b, c=out)
    checks.cuda("bmm", a=a, b=b)
    c = out if out is not None else torch.empty((batch, m, n), dtype=a.dtype, device=a.device)
    if k == 0:
        return c.zero_()  # empty sums
    shared = b.shape[0] > 1 and b.stride(0) == 0
    key = lambda: tune_key(str(a.dtype)[6:], batch, m, n, k, a_t=a_t, b_t=b_t, shared_b=shared)  # noqa: E731
    port.run(__name__, variant, (batch, m, n, k), c, a, b, key=key)
    return c


# -- autotune: the candidates for the batch's tile count and depth ---------------------------------


def tune_key(dtype: str, batch: int, m: int, n: int, k: int, **layout) -> dict:
    """Problem class (tilekit.runtime.mma.tune_key): batch_class, then matmul's; `layout` a_t, b_t, shared_b."""
    return mma.tune_key(dtype, m, n, k, batch=batch, **layout)


def _v(bm, bn, bk=64, **knobs) -> dict:
    return mma.variant(bm, bn, bk, **knobs)


# Why each: NOTES.md, "The variant space (issue 14)". Persistent forms run at occupancy 1: at 2
# tileiras caps them at 128 registers and spills (150 spill stores at 128 x 128); at 1 they get 255
# registers and a deeper pipeline. Wide tiles run as 2-CTA clusters, and in one CTA on 8 worker warps
# (on the compiler's 4 one CTA spills them; kernels/matmul/NOTES.md, "Eight worker warps").
FLOP_BOUND = (
    _v(128, 128, occupancy=2),  # matmul's measured winner
    _v(128, 128),
    _v(128, 256, cga=2),
    _v(256, 128, cga=2),
    _v(128, 128, occupancy=2, cga=2),  # SASS: each CTA half the tile, multicast loads
    _v(128, 128, persistent=True),
    _v(128, 128, persistent=True, cga=2),
    _v(128, 256, persistent=True, cga=2),  # TileGym's sm_90 form: persistent 2-CTA clusters
    _v(256, 128, persistent=True, cga=2),
    _v(128, 256),  # one CTA on 8 worker warps (ffi_util::MmaVariant::warps; kernels/matmul/NOTES.md)
    _v(128, 256, persistent=True),
)
# k <= 128 (attention's Q @ K^T): one or two K steps per tile; bound by writing C, so the forms that
# overlap a tile's store with the next tile's loads (persistent) and one 128-deep K step.
STORE_BOUND = (
    _v(128, 128, occupancy=2),
    _v(128, 128, 128, occupancy=2),
    _v(128, 128, persistent=True),
    _v(128, 128, 128, persistent=True),
    _v(128, 128, persistent=True, cga=2),
    _v(128, 256, persistent=True, cga=2),
    _v(256, 128, persistent=True, cga=2),
    _v(128, 256, cga=2),
    _v(256, 128, cga=2),
)


def variants(batch: int, m: int, n: int, k: int) -> list[dict]:
    """Candidates. A batch with fewer 128 x 128 tiles than two per SM, or products of at most 64
    rows, gets matmul's lists (kernels/matmul/NOTES.md) for a product with as many tile rows as the
    whole batch:

    >>> [(v["bm"], v["bn"]) for v in variants(2, 300, 300, 64)]  # 18 tiles of 128 x 128
    [(128, 128), (64, 128), (128, 64), (64, 64)]
    >>> variants(8, 16, 4096, 4096) == mma.variants(16, 4096, 4096)
    True

    A batch that fills the GPU gets FLOP_BOUND, or STORE_BOUND at k <= 128; a 256-row (-column) tile
    is left out where the product has at most 128 rows (columns):

    >>> [(v["bm"], v["bn"], v["cga"], v["persistent"]) for v in variants(16, 2048, 2048, 2048)][-4:]
    [(128, 256, 2, True), (256, 128, 2, True), (128, 256, 1, False), (128, 256, 1, True)]
    >>> variants(64, 512, 512, 1024) == variants(16, 1024, 4096, 4096) == list(FLOP_BOUND)
    True
    >>> variants(128, 2048, 2048, 128) == list(STORE_BOUND)
    True
    >>> [(v["bm"], v["bn"], v["persistent"]) for v in variants(128, 2048, 128, 2048) if v["cga"] == 2]  # P @ V
    [(256, 128, False), (128, 128, False), (128, 128, True), (256, 128, True)]
    """
    if m <= 64 or batch * -(-m // 128) * -(-n // 128) < 2 * mma.H200_SMS:
        return mma.variants(m if m <= 64 else batch * -(-m // 128) * 128, n, k)
    listed = STORE_BOUND if k <= 128 else FLOP_BOUND
    rows, cols = max(128, autotune.pow2(m)), max(128, autotune.pow2(n))
    return [v for v in listed if v["bm"] <= rows and v["bn"] <= cols]


# The gradients (issue 43): bmm on transposed views of the saved operands (tilekit.runtime.mma.backward).
ops.register_backward("bmm", mma.backward(bmm.op))
