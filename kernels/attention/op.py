"""attention, the cuTile Rust port: the fused forward of softmax(q kᵀ · scale + mask) v.

    o = attention(q, k, v, causal=False, scale=None, variant="auto", out=None)

q (b, h, s_q, d), k and v (b, h_kv, s_kv, d) CUDA f16/bf16 with d 64 or 128 and h_kv dividing h
(GQA; MQA with h_kv = 1: query head i reads key/value head i // (h // h_kv)); any strides with the
last dim contiguous, so the (b, s, h, d) layout of a model passes `x.transpose(1, 2)` without a copy.
`causal` hides key j from query i when j > i + s_kv - s_q (the mask aligned to the end of the keys,
as FlashAttention and TileGym define it; a query that sees no key, possible only when s_q > s_kv,
gets 0). `scale` defaults to 1 / sqrt(d). The output has q's layout (torch.empty_like) unless `out`
is given.

`cutile_attention` (kernels/attention/ffi.rs) called through tilekit.port. `variant`: "auto" the
autotuned candidate of `variants` for this GPU, dtype and shape class, "default" ffi.rs's defaults,
a dict {"bm", "bn", "occupancy", "warps"}.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from tilekit import autotune, checks, port

CDEF = """
int32_t cutile_attention(const TensorDesc* out, const TensorDesc* q, const TensorDesc* k,
                         const TensorDesc* v, int32_t causal, float scale,
                         int32_t bm, int32_t bn, int32_t occupancy, int32_t warps,
                         int32_t device_id, uint64_t stream);
"""

DTYPES = ("bfloat16", "float16")
DEFAULT_VARIANT = {"bm": -1, "bn": -1, "occupancy": -1, "warps": -1}
HEAD_DIMS = (64, 128)  # ffi.rs HEAD_DIMS: one tile spans the head dim
INDEX_LIMIT = 2**31 - 1  # the kernel's views index with i32


def check_sizes(b: int, h: int, hkv: int, sq: int, skv: int, d: int) -> None:
    """ValueError for the sizes ffi.rs refuses (-6) whatever the variant: a head dim other than 64 or
    128, key/value heads that do not divide the query heads, a tensor past i32 indexing. Pure.

    >>> check_sizes(4, 32, 8, 8192, 8192, 128)
    >>> check_sizes(1, 12, 12, 10, 10, 96)
    Traceback (most recent call last):
    ValueError: attention: head dim d=96: the kernel supports d = 64 and 128
    >>> check_sizes(1, 32, 6, 10, 10, 64)
    Traceback (most recent call last):
    ValueError: attention: q has 32 heads and k/v 6: the key/value heads must divide the query heads (GQA)
    >>> check_sizes(64, 32, 8, 8192, 8192, 128)
    Traceback (most recent call last):
    ValueError: attention: q (64, 32, 8192, 128) has 2147483648 elements; the kernel indexes with i32 (at most 2147483647): split the batch
    """
    if d not in HEAD_DIMS:
        raise ValueError(f"attention: head dim d={d}: the kernel supports d = 64 and 128")
    if hkv < 1 or h % hkv:
        raise ValueError(
            f"attention: q has {h} heads and k/v {hkv}: the key/value heads must divide the query heads (GQA)"
        )
    for name, shape in (("q", (b, h, sq, d)), ("k", (b, hkv, skv, d))):
        if math.prod(shape) > INDEX_LIMIT:
            raise ValueError(
                f"attention: {name} {shape} has {math.prod(shape)} elements; the kernel indexes with i32 "
                f"(at most {INDEX_LIMIT}): split the batch"
            )


def export_args(bm: int, bn: int, occupancy: int, warps: int) -> tuple[int, int, int, int]:
    """A variant's arguments of the export, (bm, bn, occupancy, warps). Pure."""
    return int(bm), int(bn), int(occupancy), int(warps)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool = False,
    scale: float | None = None,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """softmax(q kᵀ · scale + mask) v; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"attention: q, k and v must be 4-D (b, h, s, d), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    checks.dtypes("attention", DTYPES, q=q, k=k, v=v)
    b, h, sq, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(
            f"attention: k and v must both be (b, h_kv, s_kv, d) with q's b={b} and d={d}, got "
            f"{tuple(k.shape)} and {tuple(v.shape)}"
        )
    hkv, skv = k.shape[1], k.shape[2]
    check_sizes(b, h, hkv, sq, skv, d)
    checks.contiguous_last_dim("attention", q=q, k=k, v=v)
    checks.out_matches("attention", out, tuple(q.shape), q)
    if out is not None:
        checks.contiguous_last_dim("attention", out=out)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"attention: scale={scale} must be finite and > 0")
    checks.cuda("attention", q=q, k=k, v=v)
    o = out if out is not None else torch.empty_like(q)
    if skv == 0:
        return o.zero_()  # no key: every query sees none
    key = tune_key(str(q.dtype)[6:], b, h, hkv, sq, skv, d, causal=bool(causal))
    port.run(__name__, variant, (b, h, hkv, sq, skv, d), o, q, k, v, int(bool(causal)), scale, key=key)
    return o


# -- autotune: the port's variants (ffi.rs: query and key tile rows, occupancy hint) ---------------


def tune_key(dtype: str, b: int, h: int, hkv: int, sq: int, skv: int, d: int, *, causal: bool = False) -> dict:
    """Problem class: head dim, mask, query and key lengths and the b · h tile-block rows rounded up to
    powers of two (GQA's group changes only which K/V a block reads).

    >>> tune_key("bfloat16", 4, 32, 8, 4096, 4096, 128, causal=True)
    {'dtype': 'bfloat16', 'd': 128, 'causal': True, 'sq_class': 4096, 'skv_class': 4096, 'bh_class': 128}
    """
    del hkv
    pow2 = autotune.pow2
    return {
        "dtype": dtype,
        "d": d,
        "causal": causal,
        "sq_class": pow2(sq),
        "skv_class": pow2(skv),
        "bh_class": pow2(b * h),
    }


def _v(bm: int, bn: int, occupancy: int = -1, warps: int = -1) -> dict:
    return {"bm": bm, "bn": bn, "occupancy": occupancy, "warps": warps}


def variants(b: int, h: int, hkv: int, sq: int, skv: int, d: int) -> list[dict]:
    """Candidates, few: each is a JIT of a few seconds. Why these: NOTES.md, "The variant space".
    128-row query tiles with 8 worker warps (at tileiras's default of 4 the d = 128 tile spills),
    or with 4 warps planned two CTAs per SM (occupancy 2: 128 registers per thread); 64-row tiles;
    64 or 128 key rows per step. Up to 64 queries get 64-row tiles only (a 128-row tile would
    compute mostly padding):

    >>> [(v["bm"], v["bn"], v["occupancy"], v["warps"]) for v in variants(4, 32, 8, 4096, 4096, 128)]
    [(128, 64, -1, 8), (128, 128, -1, 8), (64, 64, -1, -1), (64, 128, -1, -1), (128, 64, 2, 4), (64, 64, 2, -1)]
    >>> [(v["bm"], v["bn"]) for v in variants(1, 32, 8, 17, 4096, 128)]
    [(64, 64), (64, 128)]
    """
    del b, h, hkv, skv, d
    if sq <= 64:
        return [_v(64, 64), _v(64, 128)]
    tiles128 = [_v(128, 64, warps=8), _v(128, 128, warps=8)]
    return [*tiles128, _v(64, 64), _v(64, 128), _v(128, 64, occupancy=2, warps=4), _v(64, 64, occupancy=2)]
