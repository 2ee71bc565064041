"""rope, the cuTile Rust port of the rotary position embedding (Llama's and GPT-NeoX's half-split
layout) applied to q and k in one launch:

    from kernels.rope.op import rope, rope_qk
    qk = rope(q, k, cos, sin, position_ids=None, heads_first=False)   # q's heads, then k's
    q_rot, k_rot = rope_qk(q, k, cos, sin, position_ids)               # the same, as two views

Per token and head, with x1 = x[..., :d/2], x2 = x[..., d/2:] and (c, s) the first d/2 columns of
the token's row of cos and sin: y = (x1 c - x2 s, x2 c + x1 s), which is Hugging Face's
`q * cos + rotate_half(q) * sin` for its tables (they hold the frequencies twice).

- q (b, s, hq, d) and k (b, s, hk, d), CUDA f16/bf16/f32 of one dtype, d even (<= 512), any GQA/MQA
  head counts, the last dim contiguous and any other strides; `heads_first=True` takes them as (b, hq,
  s, d) and (b, hk, s, d) instead (the transposed view a model holds, read without a copy).
- cos and sin: (rows, w) tables (vLLM's cache) or (bc, rows, w) with bc 1 or b (Hugging Face's
  per-batch tables), w = d or d/2, q's dtype or float32.
- position_ids: None (token i of each sequence takes row i), or (s,) / (1 or b, s) int32/int64 row
  ids (decode at any position: a cache's rows looked up on the GPU). An id outside the table fails
  a device-side assertion, as torch's indexing does.

The one output has q's layout with hq + hk heads: (b, s, hq + hk, d), or (b, hq + hk, s, d) with
heads_first; rope_qk splits it into q's and k's views. It is the op torch.ops.tilekit.rope, with
its gradient (kernels/rope_backward: the rotation back, by -s). `cutile_rope` (kernels/rope/ffi.rs):
one tile block per token, every head of q and of k, or for a few tokens (decode) a token's heads over
several; `variant="auto"` autotunes that and the compiler hints.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import autotune, checks, port

CDEF = """
int32_t cutile_rope(const TensorDesc* out, const TensorDesc* q, const TensorDesc* k,
                    const TensorDesc* cos, const TensorDesc* sin, const TensorDesc* positions,
                    int32_t heads_first, int32_t occupancy, int32_t warps, int32_t heads,
                    int32_t device_id, uint64_t stream);
"""

KERNEL = "rope"
DTYPES = ("bfloat16", "float16", "float32")
DEFAULT_VARIANT = {"occupancy": -1, "warps": -1, "heads": -1}  # the compiler's defaults, a token a tile block
MAX_HEAD_DIM, MAX_HEADS, MAX_TILE = 512, 256, 8192  # ffi.rs
I32_MAX = 2**31 - 1


def export_args(occupancy: int = -1, warps: int = -1, heads: int = -1) -> tuple[int, int, int]:
    """A variant's arguments of the export, (occupancy, warps, heads): heads -1 puts a token's every
    head in one tile block, a power of two at most that many of q's or of k's. Pure."""
    return int(occupancy), int(warps), int(heads)


def tune_key(dtype: str, b: int, s: int, hq: int, hk: int, d: int) -> dict:
    """Problem class: the head counts and dim (they set the tiles), tokens rounded up to a power of two.

    >>> tune_key("bfloat16", 4, 4096, 32, 8, 128)
    {'dtype': 'bfloat16', 'hq': 32, 'hk': 8, 'd': 128, 'tokens_class': 16384}
    """
    return {"dtype": dtype, "hq": hq, "hk": hk, "d": d, "tokens_class": autotune.pow2(b * s)}


SPLIT_TOKENS = 256  # up to this many tokens (a decode step's) a token's heads may spread over tile blocks


def variants(b: int, s: int, hq: int, hk: int, d: int) -> list[dict]:
    """One tile block per token, so the knob is how many of them share an SM: tileiras's default and
    occupancy 4, 8 and 16 (a token's tiles need few registers). Up to SPLIT_TOKENS tokens, also 4, 8
    or 16 heads a tile block (a decode step's tokens fill few SMs otherwise: NOTES.md, "A token's
    heads over several tile blocks"); of those that launch alike (both head counts within the
    tile), only the first. Pure:

    >>> [(v["occupancy"], v["heads"]) for v in variants(4, 4096, 32, 8, 128)]
    [(-1, -1), (4, -1), (8, -1), (16, -1)]
    >>> [v["heads"] for v in variants(64, 1, 32, 8, 128)]
    [-1, -1, -1, -1, 4, 8, 16]
    >>> [v["heads"] for v in variants(3, 17, 5, 1, 80)][4:]  # 8 and 16 both put q's 5 heads in one tile
    [4, 8]
    """
    whole = [{"occupancy": o, "warps": -1, "heads": -1} for o in (-1, 4, 8, 16)]
    if b * s > SPLIT_TOKENS:
        return whole
    split, tiles = [], set()
    for h in (4, 8, 16):
        tile = (min(autotune.pow2(hq), h), min(autotune.pow2(hk), h))  # ffi.rs Plan::tiles
        if tile not in tiles:
            tiles.add(tile)
            split.append({"occupancy": -1, "warps": -1, "heads": h})
    return whole + split


def check_size(b: int, s: int, hq: int, hk: int, d: int, kernel: str = KERNEL) -> None:
    """ValueError for sizes ffi.rs refuses whatever the strides: an odd or too wide head dim, too
    many heads, or an output past i32 offsets. Pure."""
    if d % 2 or d > MAX_HEAD_DIM:
        raise ValueError(f"{kernel}: the head dim d = {d} must be even and at most {MAX_HEAD_DIM}")
    if min(hq, hk) < 1 or max(hq, hk) > MAX_HEADS:
        raise ValueError(f"{kernel}: 1 to {MAX_HEADS} heads of q and of k, got hq = {hq}, hk = {hk}")
    if autotune.pow2(max(hq, hk)) * autotune.pow2(max(1, d // 2)) > MAX_TILE:
        raise ValueError(
            f"{kernel}: {max(hq, hk)} heads of d = {d} make a tile past {MAX_TILE} elements (a tile block "
            "holds a token's heads whole); split the heads into calls"
        )
    if b * s * (hq + hk) * d > I32_MAX:
        raise ValueError(
            f"{kernel}: {b} x {s} tokens of {hq + hk} heads of {d} pass 2^31 elements (the kernel's offsets "
            "are i32); split the batch into calls"
        )


def _check_tables(kernel: str, cos: Tensor, sin: Tensor, b: int, d: int) -> int:
    """The tables' rows; ValueError unless cos and sin are one (rows, w) or (1 or b, rows, w) shape
    with w = d or d/2."""
    if cos.shape != sin.shape or cos.dtype != sin.dtype:
        raise ValueError(
            f"{kernel}: cos and sin must share a shape and dtype, got {tuple(cos.shape)} {cos.dtype} and "
            f"{tuple(sin.shape)} {sin.dtype}"
        )
    if cos.stride() != sin.stride():
        raise ValueError(f"{kernel}: cos and sin must share strides, got {cos.stride()} and {sin.stride()}")
    if cos.dim() not in (2, 3) or (cos.dim() == 3 and cos.shape[0] not in (1, b)) or cos.shape[-1] not in (d, d // 2):
        raise ValueError(
            f"{kernel}: cos must be (rows, w) or (1 or b={b}, rows, w) with w = d = {d} or d/2 = {d // 2}, "
            f"got {tuple(cos.shape)}"
        )
    return cos.shape[-2]


def _check_positions(kernel: str, position_ids: Tensor | None, b: int, s: int, rows: int) -> None:
    """position_ids: None (then ValueError where the table is shorter than s), or (s,) or (1 or b, s)
    int32/int64."""
    if position_ids is None:
        if rows < s:
            raise ValueError(
                f"{kernel}: the cos/sin table has {rows} rows for {s} tokens: without position_ids token i "
                "takes row i; pass position_ids"
            )
        return
    if not isinstance(position_ids, torch.Tensor) or position_ids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{kernel}: position_ids must be an int32 or int64 tensor, got {position_ids!r:.80}")
    shape = tuple(position_ids.shape)
    if shape != (s,) and not (len(shape) == 2 and shape[0] in (1, b) and shape[1] == s):
        raise ValueError(f"{kernel}: position_ids must be (s,) or (1 or b, s) with b={b}, s={s}, got {shape}")


def _tokens_view(t: Tensor, heads_first: bool) -> Tensor:
    return t.transpose(1, 2) if heads_first else t


@port.entry(layouts={"q": "(b, s, hq, d)", "k": "(b, s, hk, d)", "cos": "(..., rows, w)", "sin": "(..., rows, w)"})
def rope(
    q: Tensor,
    k: Tensor,
    cos: Tensor,
    sin: Tensor,
    position_ids: Tensor | None = None,
    heads_first: bool = False,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """q's and k's heads rotated, as one (b, s, hq + hk, d) tensor ((b, hq + hk, s, d) with
    heads_first); ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    return rotated(__name__, KERNEL, ("q", "k"), q, k, cos, sin, position_ids, heads_first, variant, out)


def rotated(op, kernel: str, names: tuple, q, k, cos, sin, position_ids, heads_first, variant, out) -> Tensor:
    """rope's entry and its gradient's (rope_backward: the rotation back): the checks, named
    `kernel` and calling q and k `names`, the output, port.run of the op module `op`."""
    qn, kn = names
    q4, k4 = _tokens_view(q, heads_first), _tokens_view(k, heads_first)
    b, s, hq, d = q4.shape
    hk = k4.shape[2]
    if k4.shape[0] != b or k4.shape[1] != s or k4.shape[3] != d:
        layout = "(b, h, s, d)" if heads_first else "(b, s, h, d)"
        raise ValueError(
            f"{kernel}: {qn} and {kn} must share b, s and d in {layout}, got {tuple(q.shape)} and {tuple(k.shape)}"
        )
    check_size(b, s, hq, hk, d, kernel)
    checks.dtypes(kernel, DTYPES, **{qn: q, kn: k})
    if cos.dtype not in (q.dtype, torch.float32):
        raise TypeError(f"{kernel}: cos and sin must be {qn}'s dtype {q.dtype} or torch.float32, got {cos.dtype}")
    _check_positions(kernel, position_ids, b, s, _check_tables(kernel, cos, sin, b, d))
    checks.contiguous_last_dim(kernel, **{qn: q, kn: k}, cos=cos, sin=sin)
    shape = (b, hq + hk, s, d) if heads_first else (b, s, hq + hk, d)
    checks.out_matches(kernel, out, shape, q)
    tensors = {qn: q, kn: k, "cos": cos, "sin": sin} | ({} if position_ids is None else {"position_ids": position_ids})
    checks.cuda(kernel, **tensors)
    y = out if out is not None else torch.empty(shape, dtype=q.dtype, device=q.device)
    key = tune_key(str(q.dtype).removeprefix("torch."), b, s, hq, hk, d) | (
        {"heads_first": True} if heads_first else {}
    )
    port.run(op, variant, (b, s, hq, hk, d), y, q, k, cos, sin, position_ids, int(heads_first), key=lambda: key)
    return y


def rope_qk(
    q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, position_ids: Tensor | None = None, heads_first: bool = False
) -> tuple[Tensor, Tensor]:
    """rope's output split into (q rotated, k rotated): views of its one tensor, in q's and k's layout."""
    y = rope(q, k, cos, sin, position_ids, heads_first)
    return y.split((q.shape[1 if heads_first else 2], k.shape[1 if heads_first else 2]), dim=1 if heads_first else 2)
