"""attention_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    P = exp2(q kᵀ · scale · log2(e) - lse),  dV = Pᵀ dO,  dS = P ⊙ (dO Vᵀ - rowsum(dO ⊙ O)),
    dQ = dS K · scale,  dK = dSᵀ Q · scale                          (f32 inside; GQA sums dK, dV)

Entries (dout, q, k, v, o, lse, causal, scale, window), the port's arguments. Ours, ``triton`` and
``cutile`` (the port's two-kernel schedule: a dQ kernel that also writes Δ = rowsum(dO ⊙ O), then a
dK/dV kernel per key tile that walks each GQA group's query heads; every tile masked, no tile
skipping beyond the diagonal and the window), write the port's one (rows, d) output from the o and
lse given. The others return (dq, dk, dv) apart, as their libraries make them (the kit checks them
stacked: tilekit.runtime.kernel.stacked), from what their own forward saved for the backward, as a
training step has it: ``torch`` and ``torch_flash``, autograd of SDPA on its cuDNN and its
FlashAttention-2 backend from a graph recorded once per input (`saved_sdpa`: the forward runs at the
first, untimed call, so no baseline is timed with a forward in it), and TileGym's cuTile fmha
backward (`_fmha_backward`) from the o and lse given (its forward saves the same base-2 lse). SDPA
and TileGym have no sliding window in these paths (NotServed); TileGym's mask is causal only at
s_q = s_kv.
"""

import torch

from kernels.attention import baselines as fb
from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "attention_backward"
VARIANTS = ("auto", "128x64", "64x64")
LOG2E = fb.LOG2E
SAVED = bs.ForwardSaved()  # SDPA's recorded forward, per q


def _check_inputs(dout, q, k, v, o, lse) -> None:
    fb._check_inputs(q, k, v)
    if dout.shape != q.shape or o.shape != q.shape or dout.dtype != q.dtype or o.dtype != q.dtype:
        raise ValueError(f"attention_backward baseline: dout and o must be q's {tuple(q.shape)} {q.dtype}")
    if lse.shape != q.shape[:3] or lse.dtype != torch.float32:
        raise ValueError(f"attention_backward baseline: lse must be f32 {tuple(q.shape[:3])}, got {tuple(lse.shape)}")


def tile_plan(variant: str = "auto") -> dict:
    """{"variant", "block", "step", "num_warps"}: each kernel's own tile rows (dQ's query tile,
    dK/dV's key tile) and the rows of the tiles it walks. Pure.

    >>> tile_plan()
    {'variant': '128x64', 'block': 128, 'step': 64, 'num_warps': 8}
    """
    bs.check_variant(KERNEL, variant, VARIANTS)
    variant = "128x64" if variant == "auto" else variant
    block, step = (int(x) for x in variant.split("x"))
    return {"variant": variant, "block": block, "step": step, "num_warps": 8 if block == 128 else 4}


def _rows(q, k):
    """The port's (rows, d) output and its dQ, dK, dV parts as (b, heads, s, d) views (op.split's;
    this module does not import op.py, whose import defines the torch ops)."""
    (b, h, sq, d), (hkv, skv) = q.shape, k.shape[1:3]
    nq, nk = b * h * sq, b * hkv * skv
    g = torch.empty((nq + 2 * nk, d), dtype=q.dtype, device=q.device)
    return g, g[:nq].view(q.shape), g[nq : nq + nk].view(k.shape), g[nq + nk :].view(k.shape)


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _triton_visible(queries, keys, SKV, DIAG, WINDOW, HAS_WINDOW: tl.constexpr):
        visible = (keys < SKV) & (keys <= queries + DIAG)
        if HAS_WINDOW:
            visible &= keys > queries + DIAG - WINDOW
        return visible

    @triton.jit
    def _triton_dq_kernel(
        q_ptr, k_ptr, v_ptr, o_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
        q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, o_sb, o_sh, o_ss, do_sb, do_sh, do_ss,
        H, GROUP, SQ, SKV, DIAG, WINDOW, c, scale,
        BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, HAS_WINDOW: tl.constexpr,
    ):  # fmt: skip
        """dQ of one query tile of one (batch, head), and Δ of its rows (for the dK/dV kernel)."""
        mt, bh = tl.program_id(0), tl.program_id(1)
        b, h = bh // H, bh % H
        kvh = h // GROUP
        rows = mt * BM + tl.arange(0, BM)
        dd = tl.arange(0, D)
        inside = rows[:, None] < SQ
        q = tl.load(q_ptr + b * q_sb + h * q_sh + rows[:, None] * q_ss + dd[None, :], mask=inside, other=0.0)
        do = tl.load(do_ptr + b * do_sb + h * do_sh + rows[:, None] * do_ss + dd[None, :], mask=inside, other=0.0)
        o = tl.load(o_ptr + b * o_sb + h * o_sh + rows[:, None] * o_ss + dd[None, :], mask=inside, other=0.0)
        delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)
        tl.store(delta_ptr + bh * SQ + rows, delta, mask=rows < SQ)
        lse = tl.load(lse_ptr + bh * SQ + rows, mask=rows < SQ, other=0.0)
        end = tl.minimum((mt + 1) * BM + DIAG, SKV)
        start = 0
        if HAS_WINDOW:
            start = tl.maximum(mt * BM + DIAG - WINDOW + 1, 0) // BN * BN
        acc = tl.zeros([BM, D], tl.float32)
        for n0 in range(start, end, BN):
            keys = n0 + tl.arange(0, BN)
            k = tl.load(
                k_ptr + b * k_sb + kvh * k_sh + keys[:, None] * k_ss + dd[None, :], mask=keys[:, None] < SKV, other=0.0
            )
            v = tl.load(
                v_ptr + b * v_sb + kvh * v_sh + keys[:, None] * v_ss + dd[None, :], mask=keys[:, None] < SKV, other=0.0
            )
            p = tl.math.exp2(tl.dot(q, tl.trans(k)) * c - lse[:, None])
            p = tl.where(_triton_visible(rows[:, None], keys[None, :], SKV, DIAG, WINDOW, HAS_WINDOW), p, 0.0)
            ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
            acc = tl.dot(ds.to(k.dtype), k, acc)
        tl.store(
            dq_ptr + (bh * SQ + rows[:, None]) * D + dd[None, :], (acc * scale).to(dq_ptr.dtype.element_ty), mask=inside
        )

    @triton.jit
    def _triton_dkdv_kernel(
        q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
        q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, do_sb, do_sh, do_ss,
        H, HKV, SQ, SKV, DIAG, WINDOW, c, scale,
        BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, HAS_WINDOW: tl.constexpr,
    ):  # fmt: skip
        """dK and dV of one key tile of one (batch, key/value head): the query tiles that see it,
        of every query head of its group."""
        nt, bkh = tl.program_id(0), tl.program_id(1)
        b, kvh = bkh // HKV, bkh % HKV
        group = H // HKV
        keys = nt * BN + tl.arange(0, BN)
        dd = tl.arange(0, D)
        k = tl.load(
            k_ptr + b * k_sb + kvh * k_sh + keys[:, None] * k_ss + dd[None, :], mask=keys[:, None] < SKV, other=0.0
        )
        v = tl.load(
            v_ptr + b * v_sb + kvh * v_sh + keys[:, None] * v_ss + dd[None, :], mask=keys[:, None] < SKV, other=0.0
        )
        start = tl.maximum(nt * BN - DIAG, 0) // BM * BM
        end = SQ
        if HAS_WINDOW:
            end = tl.minimum((nt + 1) * BN - 1 - DIAG + WINDOW, SQ)
        dk = tl.zeros([BN, D], tl.float32)
        dv = tl.zeros([BN, D], tl.float32)
        for g in range(group):
            h = kvh * group + g
            bh = b * H + h
            for m0 in range(start, end, BM):
                rows = m0 + tl.arange(0, BM)
                inside = rows[:, None] < SQ
                q = tl.load(q_ptr + b * q_sb + h * q_sh + rows[:, None] * q_ss + dd[None, :], mask=inside, other=0.0)
                do = tl.load(
                    do_ptr + b * do_sb + h * do_sh + rows[:, None] * do_ss + dd[None, :], mask=inside, other=0.0
                )
                lse = tl.load(lse_ptr + bh * SQ + rows, mask=rows < SQ, other=0.0)
                delta = tl.load(delta_ptr + bh * SQ + rows, mask=rows < SQ, other=0.0)
                pt = tl.math.exp2(tl.dot(k, tl.trans(q)) * c - lse[None, :])
                pt = tl.where(_triton_visible(rows[None, :], keys[:, None], SKV, DIAG, WINDOW, HAS_WINDOW), pt, 0.0)
                dv = tl.dot(pt.to(do.dtype), do, dv)
                dst = pt * (tl.dot(v, tl.trans(do)) - delta[None, :])
                dk = tl.dot(dst.to(q.dtype), q, dk)
        out = (bkh * SKV + keys[:, None]) * D + dd[None, :]
        tl.store(dk_ptr + out, (dk * scale).to(dk_ptr.dtype.element_ty), mask=keys[:, None] < SKV)
        tl.store(dv_ptr + out, dv.to(dv_ptr.dtype.element_ty), mask=keys[:, None] < SKV)


def triton_attention_backward(dout, q, k, v, o, lse, causal=0, scale=None, window=-1, *, variant: str = "auto"):
    """Our Triton attention backward (the module docstring); `variant` as in `tile_plan`."""
    bs.require(triton, unavailable_reason, "triton")
    _check_inputs(dout, q, k, v, o, lse)
    (b, h, sq, d), (hkv, skv) = q.shape, k.shape[1:3]
    window = fb._window(window, causal, skv)
    g, dq, dk, dv = _rows(q, k)
    if g.numel() == 0 or skv == 0 or sq == 0:
        return g.zero_()
    plan = tile_plan(variant)
    delta = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    lse = lse.contiguous()
    c, scale, diag = fb._scale(q, scale) * LOG2E, fb._scale(q, scale), fb._diag(q, k, causal)
    qkv = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3])
    _triton_dq_kernel[(bs.cdiv(sq, plan["block"]), b * h)](
        q, k, v, o, dout, lse, delta, dq, *qkv, *o.stride()[:3], *dout.stride()[:3],
        h, h // hkv, sq, skv, diag, window, c, scale,
        BM=plan["block"], BN=plan["step"], D=d, HAS_WINDOW=window > 0, num_warps=plan["num_warps"],
    )  # fmt: skip
    _triton_dkdv_kernel[(bs.cdiv(skv, plan["block"]), b * hkv)](
        q, k, v, dout, lse, delta, dk, dv, *qkv, *dout.stride()[:3],
        h, hkv, sq, skv, diag, window, c, scale,
        BM=plan["step"], BN=plan["block"], D=d, HAS_WINDOW=window > 0, num_warps=plan["num_warps"],
    )  # fmt: skip
    return g


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:
    K = ct.Constant[int]

    def _ct_rows(t, b, h, i, rows, d, latency=None):
        """Tile i of `rows` rows of head h of batch b of a (b, h, s, d) array, zero-padded, as (rows, d)."""
        tile = ct.load(t, index=(b, h, i, 0), shape=(1, 1, rows, d), padding_mode=ct.PaddingMode.ZERO, latency=latency)
        return tile.reshape((rows, d))

    @ct.kernel
    def _cutile_dq_kernel(
        Q, K_, V, Out, dO, LSE, Delta, dQ, diag: int, c: float, scale: float, GROUP: K, BM: K, BN: K, D: K
    ):
        """dQ of one query tile of one (batch, head) and Δ of its rows; every key tile up to the diagonal masked."""
        heads, skv = Q.shape[1], K_.shape[2]
        mt = ct.bid(0)
        b, h = ct.bid(1) // heads, ct.bid(1) % heads
        kvh = h // GROUP
        zero = ct.PaddingMode.ZERO
        q, do, o = _ct_rows(Q, b, h, mt, BM, D), _ct_rows(dO, b, h, mt, BM, D), _ct_rows(Out, b, h, mt, BM, D)
        delta = ct.sum(do.astype(ct.float32) * o.astype(ct.float32), axis=-1, keepdims=True)
        ct.store(Delta, index=(b, h, mt), tile=delta.reshape((1, 1, BM)))
        lse = ct.load(LSE, index=(b, h, mt), shape=(1, 1, BM), padding_mode=zero).reshape((BM, 1))
        rows = (mt * BM + ct.arange(BM, dtype=ct.int32))[:, None]
        acc = ct.full((BM, D), 0.0, dtype=ct.float32)
        visited = ct.cdiv(max(min((mt + 1) * BM + diag, skv), 0), BN)
        for j in range(visited):
            k, v = _ct_rows(K_, b, kvh, j, BN, D, 2), _ct_rows(V, b, kvh, j, BN, D, 2)
            s = ct.mma(q, k.permute((1, 0)), ct.full((BM, BN), 0.0, dtype=ct.float32))
            keys = (j * BN + ct.arange(BN, dtype=ct.int32))[None, :]
            p = ct.where((keys < skv) & (keys <= rows + diag), ct.exp2(s * c - lse, flush_to_zero=True), 0.0)
            dp = ct.mma(do, v.permute((1, 0)), ct.full((BM, BN), 0.0, dtype=ct.float32))
            acc = ct.mma((p * (dp - delta)).astype(k.dtype), k, acc)
        ct.store(dQ, index=(b, h, mt, 0), tile=(acc * scale).reshape((1, 1, BM, D)).astype(dQ.dtype))

    @ct.kernel
    def _cutile_dkdv_kernel(
        Q, K_, V, dO, LSE, Delta, dK, dV, diag: int, c: float, scale: float, GROUP: K, BM: K, BN: K, D: K
    ):
        """dK and dV of one key tile of one (batch, key/value head); every query tile masked."""
        kv_heads, sq = K_.shape[1], Q.shape[2]
        nt = ct.bid(0)
        b, kvh = ct.bid(1) // kv_heads, ct.bid(1) % kv_heads
        zero = ct.PaddingMode.ZERO
        k, v = _ct_rows(K_, b, kvh, nt, BN, D), _ct_rows(V, b, kvh, nt, BN, D)
        keys = (nt * BN + ct.arange(BN, dtype=ct.int32))[:, None]
        dk = ct.full((BN, D), 0.0, dtype=ct.float32)
        dv = ct.full((BN, D), 0.0, dtype=ct.float32)
        first = max(nt * BN - diag, 0) // BM
        for g in range(GROUP):
            h = kvh * GROUP + g
            for mt in range(first, ct.cdiv(sq, BM)):
                q, do = _ct_rows(Q, b, h, mt, BM, D, 2), _ct_rows(dO, b, h, mt, BM, D, 2)
                lse = ct.load(LSE, index=(b, h, mt), shape=(1, 1, BM), padding_mode=zero).reshape((1, BM))
                delta = ct.load(Delta, index=(b, h, mt), shape=(1, 1, BM), padding_mode=zero).reshape((1, BM))
                st = ct.mma(k, q.permute((1, 0)), ct.full((BN, BM), 0.0, dtype=ct.float32))
                queries = (mt * BM + ct.arange(BM, dtype=ct.int32))[None, :]
                pt = ct.where(keys <= queries + diag, ct.exp2(st * c - lse, flush_to_zero=True), 0.0)
                dv = ct.mma(pt.astype(do.dtype), do, dv)
                dpt = ct.mma(v, do.permute((1, 0)), ct.full((BN, BM), 0.0, dtype=ct.float32))
                dk = ct.mma((pt * (dpt - delta)).astype(q.dtype), q, dk)
        ct.store(dK, index=(b, kvh, nt, 0), tile=(dk * scale).reshape((1, 1, BN, D)).astype(dK.dtype))
        ct.store(dV, index=(b, kvh, nt, 0), tile=dv.reshape((1, 1, BN, D)).astype(dV.dtype))


def cutile_attention_backward(dout, q, k, v, o, lse, causal=0, scale=None, window=-1, *, variant: str = "auto"):
    """Our cuTile Python attention backward (the module docstring); `variant` as in `tile_plan`. No
    window (the Triton one has it)."""
    bs.require(ct, unavailable_reason, "cutile")
    _check_inputs(dout, q, k, v, o, lse)
    bs.require_cuda(KERNEL, "q", q)
    (b, h, sq, d), (hkv, skv) = q.shape, k.shape[1:3]
    if fb._window(window, causal, skv) > 0:
        raise bs.NotServed("our cuTile Python attention backward has no sliding window")
    g, dq, dk, dv = _rows(q, k)
    if g.numel() == 0 or skv == 0 or sq == 0:
        return g.zero_()
    plan = tile_plan(variant)
    delta = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    c, scale, diag = fb._scale(q, scale) * LOG2E, fb._scale(q, scale), fb._diag(q, k, causal)
    lse = lse.contiguous()
    common = (diag, c, scale, h // hkv)
    stream = torch.cuda.current_stream(q.device)
    with torch.cuda.device(q.device):
        ct.launch(
            stream, (bs.cdiv(sq, plan["block"]), b * h, 1), _cutile_dq_kernel,
            (q, k, v, o, dout, lse, delta, dq, *common, plan["block"], plan["step"], d),
        )  # fmt: skip
        ct.launch(
            stream, (bs.cdiv(skv, plan["block"]), b * hkv, 1), _cutile_dkdv_kernel,
            (q, k, v, dout, lse, delta, dk, dv, *common, plan["step"], plan["block"], d),
        )  # fmt: skip
    return g


# -- the libraries, from what their forward saved ----------------------------------------------------


def saved_sdpa(backend: str, q, k, v, causal, scale, window) -> tuple:
    """(o, q, k, v) of SDPA on `backend` (fb._sdpa: NotServed where it does not serve the config)
    recorded with autograd once per q (SAVED), the leaves sharing the caller's memory."""

    def make():
        leaves = tuple(t.detach().requires_grad_() for t in (q, k, v))
        with torch.enable_grad():
            return (fb._sdpa(backend, *leaves, None, causal, scale, window), *leaves)

    return SAVED.get(q, make, (backend, k.data_ptr(), v.data_ptr(), int(bool(causal)), scale, window))


def _torch(backend, dout, q, k, v, causal, scale, window):
    o, *leaves = saved_sdpa(backend, q, k, v, causal, scale, window)
    return torch.autograd.grad(o, leaves, dout, retain_graph=True)


def torch_attention_backward(dout, q, k, v, o, lse, causal=0, scale=None, window=-1):
    """Autograd of SDPA on its cuDNN backend (what a training step with F.scaled_dot_product_attention
    runs on sm_90), from its recorded forward: (dq, dk, dv)."""
    _check_inputs(dout, q, k, v, o, lse)
    return _torch("CUDNN_ATTENTION", dout, q, k, v, causal, scale, window)


def torch_flash_attention_backward(dout, q, k, v, o, lse, causal=0, scale=None, window=-1):
    """Autograd of SDPA on its FlashAttention-2 backend, from its recorded forward: (dq, dk, dv)."""
    _check_inputs(dout, q, k, v, o, lse)
    return _torch("FLASH_ATTENTION", dout, q, k, v, causal, scale, window)


def _tilegym(ops, dout, q, k, v, o, lse, causal=0, scale=None, window=-1):
    """TileGym 1.5.1's cuTile fmha backward (tilegym.ops.cutile.attention._fmha_backward, what its
    autograd function runs) from the o and lse given: its fmha_forward_with_lse saves the same lse
    (m + log2(l) of the scaled scores, base 2) and o; (dq, dk, dv). Its causal mask is aligned to the
    start (equal to ours at s_q = s_kv only); no window. It makes contiguous copies of
    non-contiguous inputs (and pads lse to its tile), inside its time."""
    if fb._window(window, causal, k.shape[2]) > 0:
        raise bs.NotServed("TileGym's fmha backward has no sliding window")
    if causal and q.shape[2] != k.shape[2]:
        raise bs.NotServed("TileGym's fmha backward aligns its causal mask to the start: s_q must equal s_kv")
    attn = providers.submodule(ops, "cutile.attention")
    return attn._fmha_backward(q, k, v, o, dout, lse, fb._scale(q, scale), bool(causal))


BACKENDS = {
    "cutile": cutile_attention_backward,
    "triton": triton_attention_backward,
    "torch": torch_attention_backward,
    "torch_flash": torch_flash_attention_backward,
    **providers.backends(tilegym=_tilegym),  # Liger-Kernel has no attention
}

unavailable_reason = bs.reason_for(__name__)
