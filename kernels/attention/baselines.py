"""attention baselines: the implementations the cuTile Rust port (op.py) is timed against.

    o = softmax(q kᵀ · scale + mask) v     q (b, h, sq, d), k and v (b, hkv, skv, d), f16 or bf16

GQA (hkv divides h), any strides with the last dim contiguous; `causal` hides key j from query i
when j > i + skv - sq (aligned to the end of the keys), a `window` (> 0, causal only; -1 none) also
when j <= i + skv - sq - window; `sinks` (h,) adds exp(sink_h) to each softmax's denominator (op.py).
Entries (q, k, v, sinks, causal, scale, window) -> o, a backend that has no sinks or no window
refusing the config (NotServed, a skip with the reason):
``torch_attention`` and ``torch_flash_attention`` (torch's scaled_dot_product_attention on its cuDNN
and its FlashAttention-2 backend: the `torch` and `torch_flash` baselines), ``triton_attention``
and ``cutile_attention`` (ours: one program per (query tile, batch · head), an online softmax over
the key tiles, unmasked tiles first and only the ones crossing the diagonal or the key tail
masked; the Triton one with sinks and a window, skipping the tiles outside it), TileGym's cuTile
``fmha``, or its ``attention_sink`` for configs with sinks. Variants of ours: "BMxBN" tiles, "auto" = 128x64 (64x64
for up to 64 queries); unmeasured, to be swept on the H200 (NOTES.md).
"""

import math

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "attention"
DTYPES = (torch.float16, torch.bfloat16)
VARIANTS = ("auto", "128x64", "128x128", "64x64")
LOG2E = 1.4426950408889634
F32_LOWEST = -3.4028234663852886e38  # running max's start: a row with every key hidden so far stays finite


def _check_inputs(q, k, v) -> None:
    if q.dim() != 4 or k.dim() != 4 or k.shape != v.shape or k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ValueError(
            "attention baseline: q must be (b, h, sq, d) and k, v (b, hkv, skv, d), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"attention baseline: q, k and v must share one dtype of {DTYPES}, got {q.dtype}, {k.dtype}")
    if q.shape[1] % k.shape[1] or q.shape[3] not in (64, 128):
        raise ValueError(
            f"attention baseline: hkv must divide h and d be 64 or 128, got q {tuple(q.shape)}, k {tuple(k.shape)}"
        )
    if any(t.stride(3) != 1 for t in (q, k, v)):
        raise ValueError("attention baseline: q, k and v must be contiguous in their last dim")


def _scale(q, scale) -> float:
    return 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)


def _refuse(backend: str, sinks, window, what: str) -> None:
    """NotServed for the sinks or the window `backend` has no way to take."""
    if sinks is not None and "sinks" in what:
        raise bs.NotServed(f"{backend} has no sink logits")
    if window is not None and window > 0 and "window" in what:
        raise bs.NotServed(f"{backend} has no sliding window")


def _sdpa(backend: str, q, k, v, sinks=None, causal=0, scale=None, window=-1):
    """torch.nn.functional.scaled_dot_product_attention restricted to one of its backends (on the
    CPU torch's own math), GQA as enable_gqa; a causal sq != skv passes the end-aligned mask
    explicitly. A shape that backend does not serve ("No available kernel") is NotServed, so a
    record named after a backend is always that backend's. SDPA has no sinks; a window only as an
    explicit (sq, skv) mask, which on a GPU would time a materialized mask against kernels that skip
    the tiles outside the window: NotServed there (on the CPU, the reference math takes it)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    _refuse(f"SDPA ({backend})", sinks, window, "sinks" + (" window" if q.is_cuda else ""))
    mask, is_causal = None, bool(causal)
    if is_causal and q.shape[2] == 1 and (window or -1) <= 0:
        is_causal = False  # one query aligned to the end sees every key: no mask, which every backend serves
    if is_causal and (q.shape[2] != k.shape[2] or (window or -1) > 0):
        keys, queries = torch.arange(k.shape[2], device=q.device), torch.arange(q.shape[2], device=q.device)
        diag = queries[:, None] + (k.shape[2] - q.shape[2])
        mask, is_causal = keys[None, :] <= diag, False
        if (window or -1) > 0:
            mask &= keys[None, :] > diag - window
    kwargs = dict(attn_mask=mask, is_causal=is_causal, scale=_scale(q, scale), enable_gqa=k.shape[1] != q.shape[1])
    if not q.is_cuda:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs)
    try:
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs)
    except RuntimeError as e:
        if "No available kernel" not in str(e):
            raise
        raise bs.NotServed(
            f"SDPA's {backend} backend does not serve q {tuple(q.shape)}, k {tuple(k.shape)}"
            f"{', an explicit (end-aligned causal) mask' if mask is not None else ''}: {str(e).splitlines()[0]}"
        ) from e


def torch_attention(q, k, v, sinks=None, causal=0, scale=None, window=-1):
    """SDPA on its cuDNN backend (cuDNN's fused flash attention for sm_90)."""
    return _sdpa("CUDNN_ATTENTION", q, k, v, sinks, causal, scale, window)


def torch_flash_attention(q, k, v, sinks=None, causal=0, scale=None, window=-1):
    """SDPA on its FlashAttention-2 backend (torch's bundled flash kernels)."""
    return _sdpa("FLASH_ATTENTION", q, k, v, sinks, causal, scale, window)


def _diag(q, k, causal) -> int:
    """Key j is hidden from query i when j > i + diag (never, for a full mask)."""
    return k.shape[2] - q.shape[2] if causal else k.shape[2]


def tile_plan(sq: int, d: int, variant: str = "auto") -> dict:
    """{"variant", "bm", "bn", "num_warps", "num_stages"} of both our kernels (cuTile ignores the last
    two). Pure.

    >>> tile_plan(4096, 128), tile_plan(17, 64)["variant"]
    ({'variant': '128x64', 'bm': 128, 'bn': 64, 'num_warps': 8, 'num_stages': 3}, '64x64')
    """
    bs.check_variant(KERNEL, variant, VARIANTS)
    if variant == "auto":
        variant = "64x64" if sq <= 64 else "128x64"
    bm, bn = (int(x) for x in variant.split("x"))
    return {"variant": variant, "bm": bm, "bn": bn, "num_warps": 8 if bm * d >= 128 * 128 else 4, "num_stages": 3}


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _triton_step(s, v, m_i, l_i, acc, c):
        """The online-softmax update with one key tile: s = raw scores (-inf where hidden)."""
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * c)
        p = tl.math.exp2(s * c - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        return m_new, l_i * alpha + tl.sum(p, axis=1), acc

    @triton.jit
    def _triton_attention_kernel(
        q_ptr, k_ptr, v_ptr, o_ptr, sinks_ptr, q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, o_sb, o_sh, o_ss,
        H, GROUP, SQ, SKV, DIAG, WINDOW, qk_scale_log2,
        LOWEST: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
        HAS_SINKS: tl.constexpr, HAS_WINDOW: tl.constexpr,
    ):  # fmt: skip
        """One query tile of one (batch, head); the query tiles of a head heaviest first. A sink
        starts the running max and sum as one more score with a zero value row; a window skips
        the key tiles before it and masks the tiles across its start (the tile map of op.key_tiles)."""
        mt = tl.num_programs(0) - 1 - tl.program_id(0)
        b, h = tl.program_id(1) // H, tl.program_id(1) % H
        kvh = h // GROUP
        rows = mt * BM + tl.arange(0, BM)
        cols = tl.arange(0, BN)
        dd = tl.arange(0, D)
        q = tl.load(
            q_ptr + b * q_sb + h * q_sh + rows[:, None] * q_ss + dd[None, :], mask=rows[:, None] < SQ, other=0.0
        )
        k_base = k_ptr + b * k_sb + kvh * k_sh + dd[:, None]  # K read as [D, BN]: transposed in place
        v_base = v_ptr + b * v_sb + kvh * v_sh + dd[None, :]
        m_i = tl.full([BM], LOWEST, tl.float32)
        l_i = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, D], tl.float32)
        if HAS_SINKS:
            sink = tl.load(sinks_ptr + h).to(tl.float32) * 1.4426950408889634 + tl.zeros([BM], tl.float32)
            m_i = tl.maximum(m_i, sink)
            l_i = tl.math.exp2(sink - m_i)
        visited = tl.cdiv(tl.maximum(tl.minimum((mt + 1) * BM + DIAG, SKV), 0), BN)
        full = tl.minimum(tl.maximum(tl.minimum(mt * BM + DIAG + 1, SKV), 0) // BN, visited)
        first, lo, hi = 0, 0, full
        if HAS_WINDOW:
            first = tl.minimum(tl.maximum(mt * BM + DIAG - WINDOW + 1, 0) // BN, visited)
            lo = tl.minimum(tl.maximum(tl.cdiv(tl.maximum((mt + 1) * BM + DIAG - WINDOW, 0), BN), first), visited)
            hi = tl.maximum(full, lo)
            for j in range(first, lo):
                keys = j * BN + cols
                k = tl.load(k_base + keys[None, :] * k_ss, mask=keys[None, :] < SKV, other=0.0)
                v = tl.load(v_base + keys[:, None] * v_ss, mask=keys[:, None] < SKV, other=0.0)
                visible = (keys[None, :] < SKV) & (keys[None, :] <= rows[:, None] + DIAG)
                visible &= keys[None, :] > rows[:, None] + DIAG - WINDOW
                s = tl.where(visible, tl.dot(q, k), float("-inf"))
                m_i, l_i, acc = _triton_step(s, v, m_i, l_i, acc, qk_scale_log2)
        for j in range(lo, hi):
            keys = j * BN + cols
            k = tl.load(k_base + keys[None, :] * k_ss)
            v = tl.load(v_base + keys[:, None] * v_ss)
            m_i, l_i, acc = _triton_step(tl.dot(q, k), v, m_i, l_i, acc, qk_scale_log2)
        for j in range(hi, visited):
            keys = j * BN + cols
            k = tl.load(k_base + keys[None, :] * k_ss, mask=keys[None, :] < SKV, other=0.0)
            v = tl.load(v_base + keys[:, None] * v_ss, mask=keys[:, None] < SKV, other=0.0)
            visible = (keys[None, :] < SKV) & (keys[None, :] <= rows[:, None] + DIAG)
            if HAS_WINDOW:
                visible &= keys[None, :] > rows[:, None] + DIAG - WINDOW
            s = tl.where(visible, tl.dot(q, k), float("-inf"))
            m_i, l_i, acc = _triton_step(s, v, m_i, l_i, acc, qk_scale_log2)
        # A query that saw no key has l = 0 and acc = 0: 0 (l >= 1 otherwise).
        o = acc / tl.maximum(l_i, 1.0)[:, None]
        o_ptrs = o_ptr + b * o_sb + h * o_sh + rows[:, None] * o_ss + dd[None, :]
        tl.store(o_ptrs, o.to(o_ptr.dtype.element_ty), mask=rows[:, None] < SQ)


def _window(window, causal, skv: int) -> int:
    """The kernels' window: -1 for none, or for one of s_kv keys or more (it hides nothing)."""
    window = -1 if window is None else int(window)
    if window != -1 and (window <= 0 or not causal):
        raise ValueError(f"attention baseline: window={window} must be > 0 under causal=1, or -1 for none")
    return window if 0 < window < skv else -1


def triton_attention(q, k, v, sinks=None, causal=0, scale=None, window=-1, *, variant: str = "auto"):
    """Our Triton fused attention; `variant` as in `tile_plan`."""
    bs.require(triton, unavailable_reason, "triton")
    _check_inputs(q, k, v)
    (b, h, sq, d), (hkv, skv) = q.shape, k.shape[1:3]
    window = _window(window, causal, skv)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if o.numel() == 0 or skv == 0:
        return o.zero_()
    plan = tile_plan(sq, d, variant)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3])
    _triton_attention_kernel[(bs.cdiv(sq, plan["bm"]), b * h)](
        q, k, v, o, q if sinks is None else sinks.contiguous(), *strides,
        h, h // hkv, sq, skv, _diag(q, k, causal), window, _scale(q, scale) * LOG2E,
        LOWEST=F32_LOWEST, BM=plan["bm"], BN=plan["bn"], D=d, HAS_SINKS=sinks is not None, HAS_WINDOW=window > 0,
        num_warps=plan["num_warps"], num_stages=plan["num_stages"],
    )  # fmt: skip
    return o


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:
    K = ct.Constant[int]

    def _cutile_step(s, v, m_i, l_i, acc, c):
        m_new = ct.maximum(m_i, ct.max(s, axis=-1, keepdims=True) * c)
        p = ct.exp2(s * c - m_new, flush_to_zero=True)
        alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
        acc = ct.mma(p.astype(v.dtype), v, acc * alpha)
        return m_new, l_i * alpha + ct.sum(p, axis=-1, keepdims=True), acc

    @ct.kernel
    def _cutile_attention_kernel(Q, KT, V, Out, diag: int, c: float, GROUP: K, BM: K, BN: K, D: K):
        """The same schedule as the Triton kernel; K's [D, BN] tiles are read transposed (order)."""
        heads, skv = Q.shape[1], KT.shape[2]
        mt = ct.num_blocks(0) - 1 - ct.bid(0)
        b, h = ct.bid(1) // heads, ct.bid(1) % heads
        kvh = h // GROUP
        q = ct.load(Q, index=(b, h, mt, 0), shape=(1, 1, BM, D), padding_mode=ct.PaddingMode.ZERO).reshape((BM, D))
        m_i = ct.full((BM, 1), F32_LOWEST, dtype=ct.float32)
        l_i = ct.full((BM, 1), 0.0, dtype=ct.float32)
        acc = ct.full((BM, D), 0.0, dtype=ct.float32)
        visited = ct.cdiv(max(min((mt + 1) * BM + diag, skv), 0), BN)
        full = min(max(min(mt * BM + diag + 1, skv), 0) // BN, visited)
        rows = (mt * BM + ct.arange(BM, dtype=ct.int32))[:, None]
        for j in range(visited):
            kt = ct.load(KT, index=(b, kvh, 0, j), shape=(1, 1, D, BN), order=(0, 1, 3, 2), latency=2)
            s = ct.mma(q, kt.reshape((D, BN)), ct.full((BM, BN), 0.0, dtype=ct.float32))
            if j >= full:
                keys = (j * BN + ct.arange(BN, dtype=ct.int32))[None, :]
                s = ct.where((keys < skv) & (keys <= rows + diag), s, -math.inf)
            v = ct.load(V, index=(b, kvh, j, 0), shape=(1, 1, BN, D), latency=4).reshape((BN, D))
            m_i, l_i, acc = _cutile_step(s, v, m_i, l_i, acc, c)
        o = ct.truediv(acc, ct.maximum(l_i, 1.0))
        ct.store(Out, index=(b, h, mt, 0), tile=o.reshape((1, 1, BM, D)).astype(Out.dtype))


def cutile_attention(q, k, v, sinks=None, causal=0, scale=None, window=-1, *, variant: str = "auto"):
    """Our cuTile Python fused attention; `variant` as in `tile_plan`. Neither sinks nor a window
    (the Triton kernel has both)."""
    bs.require(ct, unavailable_reason, "cutile")
    _refuse("our cuTile Python attention", sinks, window, "sinks window")
    _check_inputs(q, k, v)
    bs.require_cuda(KERNEL, "q", q)
    (b, h, sq, d), (hkv, skv) = q.shape, k.shape[1:3]
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if o.numel() == 0 or skv == 0:
        return o.zero_()
    plan = tile_plan(sq, d, variant)
    args = (q, k, v, o, _diag(q, k, causal), _scale(q, scale) * LOG2E, h // hkv, plan["bm"], plan["bn"], d)
    with torch.cuda.device(q.device):
        ct.launch(
            torch.cuda.current_stream(q.device), (bs.cdiv(sq, plan["bm"]), b * h, 1), _cutile_attention_kernel, args
        )
    return o


def tilegym_attention(ops, q, k, v, sinks=None, causal=0, scale=None, window=-1):
    """TileGym's cuTile fmha (its causal mask is aligned to the end of the keys too; it copies
    non-contiguous inputs); with sinks its attention_sink (causal only; a window as its
    sliding_window, the same keys; it takes q (b, s, h_kv, group, d) and k, v (b, s, h_kv, d) and
    returns (b, s, h · d): the copies into that layout, and its own back to (b, h, s, d), are part
    of its time). A window without sinks: NotServed (fmha has none).

    >>> class Ops:  # what TileGym's fmha and attention_sink receive
    ...     def fmha(self, q, k, v, **kw):
    ...         return tuple(q.shape), tuple(k.shape), kw
    ...     def attention_sink(self, q, k, v, sinks, **kw):
    ...         return torch.zeros(q.shape[0], q.shape[1], q.shape[2] * q.shape[3] * q.shape[4]), (q.shape, kw)
    >>> q, kv = torch.empty(1, 4, 8, 64), torch.empty(1, 2, 8, 64)
    >>> tilegym_attention(Ops(), q, kv, kv, None, 1)
    ((1, 4, 8, 64), (1, 2, 8, 64), {'scaling': 0.125, 'is_causal': True})
    >>> ops = Ops()
    >>> ops.attention_sink = lambda q, k, v, sinks, **kw: print(tuple(q.shape), kw) or torch.zeros(1, 8, 4 * 64)
    >>> tuple(tilegym_attention(ops, q, kv, kv, torch.zeros(4), 1, None, 3).shape)
    (1, 8, 2, 2, 64) {'sm_scale': 0.125, 'sliding_window': 3, 'start_q': 0}
    (1, 4, 8, 64)
    """
    window = _window(window, causal, k.shape[2])
    if sinks is None:
        _refuse("TileGym's fmha", sinks, window, "window")
        return ops.fmha(q, k, v, scaling=_scale(q, scale), is_causal=bool(causal))
    if not causal:
        raise bs.NotServed("TileGym's attention_sink is causal only")
    (b, h, sq, d), (hkv, skv) = q.shape, k.shape[1:3]
    query = q.transpose(1, 2).reshape(b, sq, hkv, h // hkv, d)
    key, value = (t.transpose(1, 2).contiguous() for t in (k, v))
    o = ops.attention_sink(
        query, key, value, sinks, sm_scale=_scale(q, scale), sliding_window=window if window > 0 else None,
        start_q=skv - sq,
    )  # fmt: skip
    return o.view(b, sq, h, d).transpose(1, 2)


BACKENDS = {
    "cutile": cutile_attention,
    "triton": triton_attention,
    "torch": torch_attention,
    "torch_flash": torch_flash_attention,
    **providers.backends(tilegym=tilegym_attention),  # Liger-Kernel has no attention forward
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
