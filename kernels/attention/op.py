"""attention, the cuTile Rust port: the fused forward of softmax(q kᵀ · scale + mask) v.

    o = attention(q, k, v, sinks=None, causal=False, scale=None, window=None, variant="auto", out=None)

q (b, h, s_q, d), k and v (b, h_kv, s_kv, d) CUDA f16/bf16 with d 64 or 128 and h_kv dividing h
(GQA; MQA with h_kv = 1: query head i reads key/value head i // (h // h_kv)); any strides with the
last dim contiguous, so the (b, s, h, d) layout of a model passes `x.transpose(1, 2)` without a copy.
`causal` hides key j from query i when j > i + s_kv - s_q (the mask aligned to the end of the keys,
as FlashAttention and TileGym define it; a query that sees no key, possible only when s_q > s_kv,
gets 0). `scale` defaults to 1 / sqrt(d). The output has q's layout (torch.empty_like) unless `out`
is given. Pass `causal`, `scale` and `window` by keyword: `sinks` comes first, as in the export.

`sinks` (gpt-oss), a (h,) tensor of q's dtype or f32 on q's device: per-head sink logits, each one
more score of every query of its head (not multiplied by `scale`) whose value is zero, so
o_i = sum_j exp(s_ij - m) v_j / (exp(sink_h - m) + sum_j exp(s_ij - m)); a sink of -inf is no sink.
`window` (Mistral, gpt-oss), needs `causal`: a sliding window of that many keys, query i seeing key
j iff i + s_kv - s_q - window < j <= i + s_kv - s_q; the kernel skips the key tiles outside it, so
the work is O(s_q · window). None (or -1) is no window.

`cutile_attention` (kernels/attention/ffi.rs) called through tilekit.runtime.port. `variant`: "auto" the
autotuned candidate of `variants` for this GPU, dtype and shape class, "default" ffi.rs's defaults,
a dict {"bm", "bn", "occupancy", "warps", "splits", "depth"} (splits: ffi.rs's decode path for up
to 16 queries per sequence, the key/value cache cut in splits across tile blocks and the query heads
of one key/value head packed into one tile; 0 the forward kernel, -1 the decode path wherever it
applies with a split count for the GPU, about 1 tile block per SM; -n, 2 <= n <= 16, about n;
depth: the decode split kernel's K and V load latency hints, 1 to 16, from which tileiras sizes
their pipeline in shared memory, -1 its default; a variant without it is depth -1).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from tilekit.runtime import autotune, checks, port

CDEF = """
int32_t cutile_attention(const TensorDesc* out, const TensorDesc* q, const TensorDesc* k,
                         const TensorDesc* v, const TensorDesc* sinks, int32_t causal,
                         float scale, int32_t window,
                         int32_t bm, int32_t bn, int32_t occupancy, int32_t warps,
                         int32_t splits, int32_t depth, int32_t device_id, uint64_t stream);
int32_t cutile_attention_lse(const TensorDesc* out, const TensorDesc* lse, const TensorDesc* q,
                             const TensorDesc* k, const TensorDesc* v, const TensorDesc* sinks,
                             int32_t causal, float scale, int32_t window,
                             int32_t bm, int32_t bn, int32_t occupancy, int32_t warps,
                             int32_t splits, int32_t depth, int32_t device_id, uint64_t stream);
int32_t cutile_attention_paged(const TensorDesc* out, const TensorDesc* q, const TensorDesc* k_cache,
                               const TensorDesc* v_cache, const TensorDesc* block_table,
                               const TensorDesc* seqlens, const TensorDesc* sinks, float scale,
                               int32_t window, int32_t bm, int32_t bn, int32_t occupancy,
                               int32_t warps, int32_t splits, int32_t depth, int32_t device_id,
                               uint64_t stream);
"""

DTYPES = ("bfloat16", "float16")
DEFAULT_VARIANT = {"bm": -1, "bn": -1, "occupancy": -1, "warps": -1, "splits": -1, "depth": -1}
HEAD_DIMS = (64, 128)  # ffi.rs HEAD_DIMS: one tile spans the head dim
LOG2E = 1.4426950408889634  # the kernels exponentiate in base 2 (defined before the entry: the backward reads it)
INDEX_LIMIT = 2**31 - 1  # the kernel's views index with i32


def check_sizes(b: int, h: int, hkv: int, sq: int, skv: int, d: int, kernel: str = "attention") -> None:
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
        raise ValueError(f"{kernel}: head dim d={d}: the kernel supports d = 64 and 128")
    if hkv < 1 or h % hkv:
        raise ValueError(
            f"{kernel}: q has {h} heads and k/v {hkv}: the key/value heads must divide the query heads (GQA)"
        )
    for name, shape in (("q", (b, h, sq, d)), ("k", (b, hkv, skv, d))):
        if math.prod(shape) > INDEX_LIMIT:
            raise ValueError(
                f"{kernel}: {name} {shape} has {math.prod(shape)} elements; the kernel indexes with i32 "
                f"(at most {INDEX_LIMIT}): split the batch"
            )


def check_window(window, causal) -> int:
    """The export's `window`: -1 for None or -1, else a positive int under the causal mask;
    ValueError/TypeError naming the fix otherwise. Pure.

    >>> check_window(None, False), check_window(-1, True), check_window(4096, True)
    (-1, -1, 4096)
    >>> check_window(0, True)
    Traceback (most recent call last):
    ValueError: attention: window=0 must be a positive number of keys, or None for no window
    >>> check_window(128, False)
    Traceback (most recent call last):
    ValueError: attention: window=128 needs causal=True (a sliding window looks back from each query's diagonal)
    """
    if window is None or (isinstance(window, int) and not isinstance(window, bool) and window == -1):
        return -1
    if not isinstance(window, int) or isinstance(window, bool):
        raise TypeError(f"attention: window must be an int or None, got {type(window).__name__}")
    if window <= 0 or window > INDEX_LIMIT:
        raise ValueError(f"attention: window={window} must be a positive number of keys, or None for no window")
    if not causal:
        raise ValueError(
            f"attention: window={window} needs causal=True (a sliding window looks back from each query's diagonal)"
        )
    return window


def key_tiles(mt: int, bm: int, bn: int, skv: int, diag: int, window: int = -1) -> tuple[int, int, int, int]:
    """The key tiles query tile `mt` visits, as kernel.rs's key_tiles and window_tiles count them
    (row i sees key j < skv with i + diag - window < j <= i + diag; diag = skv - sq when causal,
    skv for no mask; window -1 none): (first, lo, hi, visited), tiles [first, lo) and
    [hi, visited) masked, [lo, hi) run unmasked. Pure: tests.py checks it on the CPU.

    Llama-like 4096 tokens, 128 x 64 tiles, a 1024-key window: the last query tile walks 18 key
    tiles, not 64 (14 unmasked), and the first tile only the 2 on its diagonal:

    >>> key_tiles(31, 128, 64, 4096, 0, 1024), key_tiles(0, 128, 64, 4096, 0, 1024), key_tiles(31, 128, 64, 4096, 0)
    ((46, 48, 62, 64), (0, 0, 0, 2), (0, 0, 62, 64))
    """

    def cdiv(a, b):
        return -(-a // b)

    visited = cdiv(max(0, min((mt + 1) * bm + diag, skv)), bn)
    full = min(max(0, min(mt * bm + diag + 1, skv)) // bn, visited)
    if window <= 0:
        return 0, 0, full, visited
    first = min(max(0, mt * bm + diag - window + 1) // bn, visited)
    lo = min(max(cdiv(max(0, (mt + 1) * bm + diag - window), bn), first), visited)
    return first, lo, max(full, lo), visited


def decode_split(skv: int, bn: int, diag: int, window: int, asked: int) -> tuple[int, int, int, int]:
    """ffi.rs's decode arithmetic (Plan::decode_tiles, decode_split): (first key tile, end, splits,
    key tiles per split) for `asked` splits over the key tiles the queries can see, the first one
    where query 0's window starts (window -1, or >= skv: none), none empty. Pure: tests.py's
    emulation of the decode kernels walks exactly these tiles.

    Batch 1 over 8192 keys in 64-wide tiles asking 33 splits, then with a 1000-key window:

    >>> decode_split(8192, 64, 8191, -1, 33), decode_split(8192, 64, 8191, 1000, 4)
    ((0, 128, 32, 4), (112, 128, 4, 4))
    """
    end = -(-skv // bn)
    first = min(max(0, diag - window + 1) // bn, end) if 0 < window < skv else 0
    visible = max(end - first, 1)
    per = -(-visible // min(max(asked, 1), visible))
    return first, end, -(-visible // per), per


def export_args(
    bm: int, bn: int, occupancy: int, warps: int, splits: int = -1, depth: int = -1
) -> tuple[int, int, int, int, int, int]:
    """A variant's arguments of the export, (bm, bn, occupancy, warps, splits, depth). Pure."""
    return int(bm), int(bn), int(occupancy), int(warps), int(splits), int(depth)


@port.entry(layouts={"q": "(b, h, s_q, d)", "k": "(b, h_kv, s_kv, d)", "v": "(b, h_kv, s_kv, d)"})
def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    sinks: Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    window: int | None = None,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """softmax(q kᵀ · scale + mask) v; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    args = _checked(q, k, v, sinks, causal, scale, window, out)
    o = out if out is not None else torch.empty_like(q)
    if k.shape[2] == 0:
        return o.zero_()  # no key: every query sees none (a sink only adds to the denominator)
    _run(variant, o, None, *args)
    return o


def attention_lse(q, k, v, sinks=None, causal=False, scale=None, window=None, *, variant="auto") -> tuple:
    """The training forward: (o, lse), o as `attention` makes it (its checks, a fresh output in q's
    layout) and lse the f32 (b, h, s_q) log-sum-exp of each query row's scaled scores in base 2
    (m + log2(l), sinks included; +inf for a row that sees no key and no sink), what
    kernels/attention_backward recomputes the probabilities from. Always the forward kernel (the
    decode path keeps no row statistics); autotuned apart from `attention`'s calls."""
    args = _checked(q, k, v, sinks, causal, scale, window, None)
    o = torch.empty_like(q)
    b, h, sq = q.shape[:3]
    lse = torch.empty((b, h, sq), dtype=torch.float32, device=q.device)
    if k.shape[2] == 0:  # no key: o = 0; lse = the sink's logit alone (base 2), or +inf (no sink, or -inf)
        sink = args[3]
        lse.fill_(math.inf)
        if sink is not None:
            logit = sink.float() * LOG2E
            lse.copy_(torch.where(logit == -math.inf, math.inf, logit)[None, :, None].expand(b, h, sq))
        return o.zero_(), lse
    _run(variant, o, lse, *args)
    return o, lse


def _checked(q, k, v, sinks, causal, scale, window, out, kernel: str = "attention") -> tuple:
    """attention's checks, messages naming `kernel`: (q, k, v, sinks (contiguous), causal (0/1),
    scale, window (-1: none))."""
    checks.dtypes(kernel, DTYPES, q=q, k=k, v=v)
    b, h, sq, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise ValueError(
            f"{kernel}: k and v must both be (b, h_kv, s_kv, d) with q's b={b} and d={d}, got "
            f"{tuple(k.shape)} and {tuple(v.shape)}"
        )
    hkv, skv = k.shape[1], k.shape[2]
    check_sizes(b, h, hkv, sq, skv, d, kernel)
    checks.contiguous_last_dim(kernel, q=q, k=k, v=v)
    checks.out_matches(kernel, out, tuple(q.shape), q)
    if out is not None:
        checks.contiguous_last_dim(kernel, out=out)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"{kernel}: scale={scale} must be finite and > 0")
    window = check_window(window, causal)
    if sinks is not None:
        if not isinstance(sinks, torch.Tensor):
            raise TypeError(
                f"{kernel}: sinks must be a ({h},) tensor of per-head logits or None, got {type(sinks).__name__}"
                " (causal, scale and window go by keyword)"
            )
        if tuple(sinks.shape) != (h,) or sinks.dtype not in (q.dtype, torch.float32):
            raise ValueError(
                f"{kernel}: sinks must be ({h},) of q's dtype {q.dtype} or torch.float32, one logit per query "
                f"head, got {tuple(sinks.shape)} {sinks.dtype}"
            )
        checks.cuda(kernel, q=q, sinks=sinks)
        sinks = sinks.contiguous()
    checks.cuda(kernel, q=q, k=k, v=v)
    return q, k, v, sinks, int(bool(causal)), scale, window


def _run(variant, o, lse, q, k, v, sinks, causal, scale, window) -> None:
    """The export on checked arguments, autotuned per tune_key (with `lse`: apart, the key says so)."""
    b, h, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]

    def key():
        tk = tune_key(
            str(q.dtype)[6:], b, h, hkv, sq, skv, d, causal=bool(causal), window=window, sinks=sinks is not None
        )
        return tk if lse is None else {**tk, "lse": True}

    sizes, args = (b, h, hkv, sq, skv, d), (q, k, v, sinks, causal, scale, window)
    if lse is None:
        port.run(__name__, variant, sizes, o, *args, key=key)
    else:
        port.run(__name__, variant, sizes, o, lse, *args, key=key, export="cutile_attention_lse")


# -- autotune: the port's variants (ffi.rs: query and key tile rows, occupancy hint) ---------------


def tune_key(
    dtype: str,
    b: int,
    h: int,
    hkv: int,
    sq: int,
    skv: int,
    d: int,
    *,
    causal: bool = False,
    window: int = -1,
    sinks: bool = False,
) -> dict:
    """Problem class: head dim, mask, query and key lengths and the b · h tile-block rows rounded up to
    powers of two (for the forward kernel GQA's group changes only which K/V a block reads); a
    window's length class and sinks only when present (the keys without them are unchanged).

    >>> tune_key("bfloat16", 4, 32, 8, 4096, 4096, 128, causal=True)
    {'dtype': 'bfloat16', 'd': 128, 'causal': True, 'sq_class': 4096, 'skv_class': 4096, 'bh_class': 128}
    >>> tune_key("bfloat16", 4, 64, 8, 4096, 4096, 64, causal=True, window=128, sinks=True)["window_class"]
    128

    Up to 16 queries (where the decode path may apply) the group of query heads per key/value
    head joins the key: it decides whether the decode path applies (`decodes`) and how many tile
    blocks its split count needs.

    >>> tune_key("bfloat16", 8, 32, 8, 1, 8192, 128, causal=True)["group"]
    4
    """
    pow2 = autotune.pow2
    key = {
        "dtype": dtype,
        "d": d,
        "causal": causal,
        "sq_class": pow2(sq),
        "skv_class": pow2(skv),
        "bh_class": pow2(b * h),
    }
    if 0 < window < skv:  # a window of s_kv keys or more runs as none
        key["window_class"] = pow2(window)
    if sinks:
        key["sinks"] = True
    if sq <= DECODE_MAX_SQ:
        key["group"] = h // hkv
    return key


def _v(bm: int, bn: int, occupancy: int = -1, warps: int = -1, splits: int = 0, depth: int = -1) -> dict:
    return {"bm": bm, "bn": bn, "occupancy": occupancy, "warps": warps, "splits": splits, "depth": depth}


DECODE_MAX_SQ, DECODE_MAX_ROWS = 16, 128  # ffi.rs: the decode path's queries and packed rows
LEAN = -100  # ffi.rs DECODE_LEAN: splits = LEAN - n asks for the lean grid at n tile blocks an SM
# the sub-tiled decode kernel's most packed rows: at 64 its four [rows, d] accumulators spill (1456
# bytes of stack at d = 128, 168 at 32 rows; cuobjdump -res-usage, NOTES.md "Sub-tiles a warp each")
DECODE_SUB_MAX_ROWS = 32


def packed_rows(h: int, hkv: int, sq: int) -> int:
    """The rows a decode tile packs before ffi.rs's `decode_rows` rounds them up to a power of two
    (at least 16): the group's query heads times s_q rounded up to a power of two. Pure.

    >>> packed_rows(32, 8, 1), packed_rows(32, 1, 3)
    (4, 128)
    """
    return (h // hkv) * autotune.pow2(sq)


def decodes(h: int, hkv: int, sq: int) -> bool:
    """Whether ffi.rs's decode path takes this shape (`decode_rows`): s_q <= 16 and the group's query
    heads times s_q (rounded up to a power of two) in at most 128 rows. Pure.

    >>> decodes(32, 8, 1), decodes(32, 8, 16), decodes(32, 1, 8), decodes(32, 8, 17)
    (True, True, False, False)
    """
    return 1 <= sq <= DECODE_MAX_SQ and packed_rows(h, hkv, sq) <= DECODE_MAX_ROWS


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

    Where the decode path applies (`decodes`: up to 16 queries; NOTES.md, "Decode"), 64-key tiles
    with the split count ffi.rs picks for the GPU (1 tile block per SM: the split kernel holds one
    an SM at its default hints, 255 registers a thread and 119 KB of shared memory), the same steps
    as four 16-key sub-tiles a warp each (bn 16: attention_decode_batched, NOTES.md "Sub-tiles a
    warp each"; where the packed rows are at most 32, past which its four accumulators spill;
    128-key tiles otherwise), then split blocks planned to share an SM: 32-key tiles two an SM
    (occupancy 2: 128 registers and 85 KB a block, NOTES.md "Two split blocks an SM") and 64-key
    tiles two an SM at depth 2 (86 KB; at the default depth a block takes 119 KB and they ran one an
    SM, NOTES.md "The loads' depth"), the same two an SM and one an SM on the lean grid (splits
    LEAN - n: every SM's slots busy, where the split grids fill 128 of 132; NOTES.md "the grid
    fills 128 of 132 SMs"), and last the forward kernel with 64-key tiles (its 128-key ones
    were never the pick at a decode shape). Depth 8 and four blocks an SM at depth 1 were
    candidates too, slower on every probed shape (NOTES.md, "The loads' depth, timed"):

    >>> [(v["bn"], v["splits"], v["occupancy"], v["depth"]) for v in variants(64, 32, 8, 1, 8192, 128)]
    [(64, -1, -1, -1), (16, -1, -1, -1), (32, -2, 2, -1), (64, -2, 2, 2), (64, -102, 2, 2), (64, -101, -1, -1), (64, 0, -1, -1)]
    >>> variants(1, 32, 8, 16, 8192, 128)[1]["bn"]  # 4 heads x 16 queries: 64 rows
    128
    """
    del b, skv, d
    if sq <= 64:
        forward = [_v(64, 64), _v(64, 128)]
        if not decodes(h, hkv, sq):
            return forward
        sub_tiles = packed_rows(h, hkv, sq) <= DECODE_SUB_MAX_ROWS
        one_per_sm = [_v(64, 64, splits=-1), _v(64, 16 if sub_tiles else 128, splits=-1)]
        per_sm = [_v(64, 32, occupancy=2, splits=-2), _v(64, 64, occupancy=2, splits=-2, depth=2)]
        lean = [_v(64, 64, occupancy=2, splits=LEAN - 2, depth=2), _v(64, 64, splits=LEAN - 1)]
        return [*one_per_sm, *per_sm, *lean, forward[0]]
    tiles128 = [_v(128, 64, warps=8), _v(128, 128, warps=8)]
    return [*tiles128, _v(64, 64), _v(64, 128), _v(128, 64, occupancy=2, warps=4), _v(64, 64, occupancy=2)]


# -- decode over a paged key/value cache (issue 41's serving form) ---------------------------------


def attention_paged(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    block_table: Tensor,
    seqlens: Tensor,
    sinks: Tensor | None = None,
    scale: float | None = None,
    window: int | None = None,
    *,
    variant: str | dict = "auto",
    validate: bool = False,
) -> Tensor:
    """Decode attention over a paged key/value cache, vLLM's and FlashAttention's layout: q (b, h,
    s_q, d) with s_q <= 16 (a (b, s_q, h, d) tensor's `.transpose(1, 2)` is read in place); k_cache
    and v_cache (pages, page, h_kv, d) of q's dtype, any strides with d contiguous; block_table (b,
    width) int32, row i the pages of sequence i in order (its key n in page block_table[i, n // page]
    at slot n % page); seqlens (b,) int32, each sequence's length in keys, at most width · page. The
    s_q queries of sequence i are its last positions: the causal mask aligned to its own end, so
    query j sees keys up to seqlens[i] - s_q + j (a query that sees none gets 0). `sinks`, `scale`
    and `window` as `attention`'s. Returns a fresh (b, h, s_q, d) tensor in q's layout.

    Only the page ids a sequence's length covers must be valid: the entries past them, up to the
    end of its last key tile (never past the table's width), may be read and may hold anything,
    and the keys read through them are hidden; an id inside the length that is not in [0, pages)
    is not read and its keys are hidden (the kernel never touches memory outside the cache):
    `validate=True` checks the table and the lengths on the host first (a device-to-host copy) and
    raises ValueError naming the first bad entry. `variant` as `attention`'s, the decode path only
    (`paged_variants`; "auto" autotunes over them per `paged_tune_key`). Also the op
    torch.ops.tilekit.attention_paged (variant "auto"), which torch.compile calls without a graph
    break; no gradient (a serving kernel)."""
    if torch.compiler.is_compiling():
        if variant != "auto" or validate:
            raise ValueError("attention_paged: under torch.compile only variant='auto' without validate runs")
        return torch.ops.tilekit.attention_paged(q, k_cache, v_cache, block_table, seqlens, sinks, scale, window)
    return _paged(q, k_cache, v_cache, block_table, seqlens, sinks, scale, window, variant=variant, validate=validate)


PAGED_KERNEL = "attention_paged"


def _paged(
    q, k_cache, v_cache, block_table, seqlens, sinks=None, scale=None, window=None, *, variant="auto", validate=False
):
    """attention_paged's checks, then the export (autotuned); on fake tensors the checks and the
    output only (tilekit.runtime.port launches nothing). The schema's defaults are this signature's:
    torch calls the op's fake without the trailing arguments that equal them."""
    kernel = PAGED_KERNEL
    for name, t, dims in (("q", q, "(b, h, s_q, d)"), ("k_cache", k_cache, "(pages, page, h_kv, d)")):
        if not isinstance(t, Tensor) or t.dim() != 4:
            raise ValueError(f"{kernel}: {name} must be {dims}, a tensor of 4 dims, got {getattr(t, 'shape', t)!r}")
    checks.dtypes(kernel, DTYPES, q=q, k_cache=k_cache, v_cache=v_cache)
    b, h, sq, d = q.shape
    pages, page, hkv = k_cache.shape[:3]
    if k_cache.shape != v_cache.shape or k_cache.shape[3] != d:
        raise ValueError(
            f"{kernel}: k_cache and v_cache must both be (pages, page, h_kv, d) with q's d={d}, got "
            f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}"
        )
    for name, t, shape in (("block_table", block_table, None), ("seqlens", seqlens, (b,))):
        want = f"({b}, width)" if shape is None else f"({b},)"
        bad_shape = not isinstance(t, Tensor) or (
            (t.dim() != 2 or t.shape[0] != b) if shape is None else tuple(t.shape) != shape
        )
        if bad_shape or t.dtype != torch.int32:
            raise ValueError(
                f"{kernel}: {name} must be an int32 {want} tensor, got "
                f"{getattr(t, 'dtype', type(t).__name__)} {tuple(getattr(t, 'shape', ()))}"
            )
    if min(b, hkv, page, pages) == 0 or d not in HEAD_DIMS or h % hkv or not decodes(h, hkv, sq):
        raise ValueError(
            f"{kernel}: b={b}, h={h}, h_kv={hkv}, s_q={sq}, d={d}, {pages} pages of {page}: needs d in {HEAD_DIMS}, "
            f"h_kv dividing h, s_q <= {DECODE_MAX_SQ} with (h / h_kv) · s_q (each rounded up to a power of two) <= "
            f"{DECODE_MAX_ROWS}, and no empty dim"
        )
    checks.contiguous_last_dim(kernel, q=q, k_cache=k_cache, v_cache=v_cache, block_table=block_table)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"{kernel}: scale={scale} must be finite and > 0")
    window = check_window(window, True)
    if sinks is not None:
        if not isinstance(sinks, Tensor) or tuple(sinks.shape) != (h,) or sinks.dtype not in (q.dtype, torch.float32):
            raise ValueError(f"{kernel}: sinks must be ({h},) of q's dtype {q.dtype} or torch.float32, or None")
        sinks = sinks.contiguous()
    checks.cuda(kernel, q=q, k_cache=k_cache, v_cache=v_cache, block_table=block_table, seqlens=seqlens)
    seqlens = seqlens.contiguous()
    if validate:
        check_pages(block_table, seqlens, pages, page)
    out = torch.empty_like(q)

    def key():
        return paged_tune_key(str(q.dtype)[6:], b, h, hkv, sq, d, block_table.shape[1] * page, page, window, sinks)

    sizes = (b, h, hkv, sq, block_table.shape[1] * page, d)
    args = (k_cache, v_cache, block_table, seqlens, sinks, scale, window)
    port.run(
        __name__, variant, sizes, out, q, *args, key=key, export="cutile_attention_paged",
        candidates=paged_variants(h, hkv, sq, page),
    )  # fmt: skip
    return out


def check_pages(block_table: Tensor, seqlens: Tensor, pages: int, page: int) -> None:
    """ValueError naming the first sequence whose length is negative or past the table's width · page,
    or whose page id (among the pages its length uses) is outside [0, pages). Copies both to the host.

    >>> t = torch.tensor([[0, 1, 7], [2, 9, 9]], dtype=torch.int32)
    >>> check_pages(t, torch.tensor([33, 16], dtype=torch.int32), 8, 16)
    >>> check_pages(t, torch.tensor([33, 17], dtype=torch.int32), 8, 16)
    Traceback (most recent call last):
    ValueError: attention_paged: block_table[1, 1] = 9 is not a page of the cache (0..7); sequence 1 has 17 keys, 2 pages
    >>> check_pages(t, torch.tensor([49, 0], dtype=torch.int32), 8, 16)
    Traceback (most recent call last):
    ValueError: attention_paged: seqlens[0] = 49 is outside 0..48 (the table's 3 pages of 16 keys)
    """
    table, lens = block_table.cpu(), seqlens.cpu().long()
    width = table.shape[1]
    bad = ((lens < 0) | (lens > width * page)).nonzero()
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"{PAGED_KERNEL}: seqlens[{i}] = {int(lens[i])} is outside 0..{width * page} (the table's {width} pages "
            f"of {page} keys)"
        )
    used = torch.arange(width)[None, :] < ((lens + page - 1) // page)[:, None]
    wrong = (used & ((table < 0) | (table >= pages))).nonzero()
    if len(wrong):
        i, j = (int(x) for x in wrong[0])
        raise ValueError(
            f"{PAGED_KERNEL}: block_table[{i}, {j}] = {int(table[i, j])} is not a page of the cache (0..{pages - 1}); "
            f"sequence {i} has {int(lens[i])} keys, {int(used[i].sum())} pages"
        )


def paged_tune_key(dtype: str, b: int, h: int, hkv: int, sq: int, d: int, cap: int, page: int, window, sinks) -> dict:
    """The paged decode's problem class: as `tune_key`'s decode classes with the table's capacity in
    keys for s_kv (the splits are sized for it) and the page size itself: it decides how a key tile
    is read (ffi.rs `PagedPlan::pieces`) and so the candidates, so no pick passes between sizes (a
    64-key tile picked for 16-key pages would gather over 12-key ones, 35-70x slower).

    >>> paged_tune_key("bfloat16", 8, 32, 8, 1, 128, 8192, 16, -1, None)
    {'dtype': 'bfloat16', 'd': 128, 'causal': True, 'sq_class': 1, 'skv_class': 8192, 'bh_class': 256, 'group': 4, 'paged': True, 'page': 16}
    """
    key = tune_key(dtype, b, h, hkv, sq, cap, d, causal=True, window=window, sinks=sinks is not None)
    return key | {"paged": True, "page": page}


def paged_variants(h: int, hkv: int, sq: int, page: int) -> list[dict]:
    """The paged decode's candidates, each a key tile read through views of the cache where it can
    (ffi.rs `PagedPlan::pieces`: the tile inside one page, or four quarters each inside one; a tile
    that neither fits gathers its rows through pointer tiles, 4-70x slower on an H100, NOTES.md "A
    paged key/value cache, timed"). Pages of 64 keys or a multiple: 64-key tiles one and two an SM
    (the contiguous cache's default and its H200 pick), 32-key tiles two an SM, and 128-key tiles one
    an SM where the packed rows are many (MQA, speculative queries: fewer, longer steps). Pages of 16
    or 32 keys (vLLM's default is 16) or another multiple of 16: 64-key tiles of four 16-key pieces,
    one and two an SM, beside the one-page tile (16 or 32 keys) two an SM. Otherwise 32-key tiles
    two an SM: four 8-key pieces where 8 divides the page, else the gather. Pure:

    >>> [(v["bn"], v["occupancy"], v["splits"]) for v in paged_variants(32, 8, 1, 256)]
    [(64, -1, -1), (64, 2, -2), (32, 2, -2)]
    >>> len(paged_variants(64, 1, 1, 256)), [(v["bn"], v["occupancy"]) for v in paged_variants(32, 8, 1, 16)]
    (4, [(64, -1), (64, 2), (16, 2)])
    >>> [v["bn"] for v in paged_variants(32, 8, 1, 32)], [(v["bn"], v["occupancy"]) for v in paged_variants(32, 8, 1, 7)]
    ([64, 64, 32], [(32, 2)])
    """
    if page % 64 == 0:
        wide = page % 128 == 0 and packed_rows(h, hkv, sq) > 32
        tiles = [_v(64, 64, splits=-1), _v(64, 64, occupancy=2, splits=-2), _v(64, 32, occupancy=2, splits=-2)]
        return tiles + ([_v(64, 128, splits=-1)] if wide else [])
    if page % 16 == 0:
        one_page = 32 if page % 32 == 0 else 16
        return [_v(64, 64, splits=-1), _v(64, 64, occupancy=2, splits=-2), _v(64, one_page, occupancy=2, splits=-2)]
    return [_v(64, 32, occupancy=2, splits=-2)]


PAGED_SCHEMA = (
    "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seqlens, Tensor? sinks=None, "
    "float? scale=None, int? window=None) -> Tensor"
)
_PAGED_OP = torch.library.custom_op("tilekit::attention_paged", _paged, mutates_args=(), schema=PAGED_SCHEMA)
_PAGED_OP.register_fake(_paged)
