"""rope baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y1 = x1 c - x2 s;  y2 = x2 c + x1 s      (per head of q and k; (c, s) the token's table row)

Entries (q, k, cos, sin, position_ids, heads_first), the port's arguments: ours,
``triton_rope`` and ``cutile_rope`` (the port's algorithm: one program per token, every head of q
and k, the position looked up on the GPU), each returning the port's one output (q's heads, then
k's); ``torch_rope`` (Hugging Face's `q * cos + rotate_half(q) * sin`, eager) and
``torch_compile_rope`` (that formula under torch.compile), Liger's Triton and cuTile
`LigerRopeFunction` and TileGym's cuTile one (1.5.1's Liger suite), each returning (q rotated, k
rotated). The libraries take tables already looked up per token, as Hugging Face's rotary module
hands them over once per forward for every layer: where a config has position ids, the lookup is
made once per input, outside the timed calls (`per_token`). Liger's and TileGym's kernels write
into q and k (Liger's when they are contiguous in the (b, s, h, d) memory a model holds); the
harness checks each output against the reference of the inputs as they were before the call.
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "rope"
VARIANTS = ("auto",)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def config(hq: int, hk: int, d: int) -> dict:
    """One program per token: heads and half the head dim padded to powers of two.

    >>> config(32, 8, 128), config(28, 4, 80)
    ({'hq': 32, 'hk': 8, 'half': 64}, {'hq': 32, 'hk': 4, 'half': 64})
    """
    return {"hq": bs.next_pow2(hq), "hk": bs.next_pow2(hk), "half": bs.next_pow2(max(1, d // 2))}


def _check_inputs(q, k, cos, sin, ids, heads_first):
    """(q, k) as (b, s, h, d), the tables as (1 or b, rows, w), the ids as (1 or b, s) or None;
    ValueError on shapes the port refuses too."""
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4 or t.dtype not in DTYPES:
            raise ValueError(f"{KERNEL} baseline: {name} must be a 4-D f16/bf16/f32 tensor, got {t!r:.60}")
    if heads_first:
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    if k.shape[0] != q.shape[0] or k.shape[1] != q.shape[1] or k.shape[3] != q.shape[3] or k.dtype != q.dtype:
        raise ValueError(f"{KERNEL} baseline: k {tuple(k.shape)} must share q's b, s, d and dtype ({tuple(q.shape)})")
    if cos.shape != sin.shape or cos.dim() not in (2, 3) or cos.shape[-1] not in (q.shape[3], q.shape[3] // 2):
        raise ValueError(f"{KERNEL} baseline: cos and sin must be (rows, d or d/2) tables, got {tuple(cos.shape)}")
    cos, sin = (t if t.dim() == 3 else t[None] for t in (cos, sin))
    if ids is not None and ids.dim() == 1:
        ids = ids[None]
    return q, k, cos, sin, ids


def _out(q, k, heads_first):
    b, s, hq, d = q.shape
    if heads_first:
        return torch.empty(b, hq + k.shape[2], s, d, dtype=q.dtype, device=q.device).transpose(1, 2)
    return torch.empty(b, s, hq + k.shape[2], d, dtype=q.dtype, device=q.device)


def _stride0(t, dim):
    return 0 if t.shape[dim] == 1 else t.stride(dim)


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _triton_rotate(x_ptr, sh, o_ptr, soh, h, half, c, sn, H: tl.constexpr, HALF: tl.constexpr):
        heads = tl.arange(0, H)[:, None]
        cols = tl.arange(0, HALF)[None, :]
        mask = (heads < h) & (cols < half)
        x1 = tl.load(x_ptr + heads * sh + cols, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x_ptr + heads * sh + half + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_ptr + heads * soh + cols, (x1 * c - x2 * sn).to(o_ptr.dtype.element_ty), mask=mask)
        tl.store(o_ptr + heads * soh + half + cols, (x2 * c + x1 * sn).to(o_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _triton_kernel(
        q_ptr, k_ptr, cos_ptr, sin_ptr, pos_ptr, out_ptr, s_len, hq, hk, half,
        sqb, sqs, sqh, skb, sks, skh, sob, sos, soh, scb, scr, spb, sps, sign,
        HQ: tl.constexpr, HK: tl.constexpr, HALF: tl.constexpr, POS: tl.constexpr,
    ):  # fmt: skip
        """Token program_id(0) = (b, s): its table row (its position id, or s), then q's and k's heads."""
        tok = tl.program_id(0)
        b = tok // s_len
        s = tok % s_len
        if POS:
            row = tl.load(pos_ptr + b * spb + s * sps).to(tl.int64)
        else:
            row = s.to(tl.int64)
        cols = tl.arange(0, HALF)[None, :]
        c = tl.load(cos_ptr + b * scb + row * scr + cols, mask=cols < half, other=0.0).to(tl.float32)
        sn = tl.load(sin_ptr + b * scb + row * scr + cols, mask=cols < half, other=0.0).to(tl.float32) * sign
        o = out_ptr + b.to(tl.int64) * sob + s * sos
        _triton_rotate(q_ptr + b.to(tl.int64) * sqb + s * sqs, sqh, o, soh, hq, half, c, sn, HQ, HALF)
        _triton_rotate(k_ptr + b.to(tl.int64) * skb + s * sks, skh, o + hq * soh, soh, hk, half, c, sn, HK, HALF)

    def _triton(q, k, cos, sin, ids, y, sign):
        cfg = config(q.shape[2], k.shape[2], q.shape[3])
        pos = ids if ids is not None else cos
        _triton_kernel[(q.shape[0] * q.shape[1],)](
            q, k, cos, sin, pos, y, q.shape[1], q.shape[2], k.shape[2], q.shape[3] // 2,
            *q.stride()[:3], *k.stride()[:3], *y.stride()[:3], _stride0(cos, 0), cos.stride(1),
            *((_stride0(ids, 0), ids.stride(1)) if ids is not None else (0, 0)), float(sign),
            HQ=cfg["hq"], HK=cfg["hk"], HALF=cfg["half"], POS=ids is not None, num_warps=4,
        )  # fmt: skip


def rotate(backend: str, launch, q, k, cos, sin, ids, heads_first, sign: float):
    """Our kernel `launch` (Triton's or cuTile's) rotating q's and k's heads by sign * the angle into
    one fresh output in q's layout (rope_backward's baselines rotate back with sign -1)."""
    bs.require(triton if backend == "triton" else ct, unavailable_reason, backend)
    q4, k4, c, sn, ids = _check_inputs(q, k, cos, sin, ids, heads_first)
    y = _out(q4, k4, heads_first)
    if y.numel():
        launch(q4, k4, c, sn, ids, y, sign)
    return y.transpose(1, 2) if heads_first else y


def triton_rope(q, k, cos, sin, position_ids=None, heads_first=False, *, variant="auto") -> torch.Tensor:
    """Our Triton kernel: one output, q's heads then k's, in q's layout."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    return rotate("triton", _triton if triton is not None else None, q, k, cos, sin, position_ids, heads_first, 1.0)


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:

    @ct.kernel
    def _cutile_kernel(
        Q, K, COS, SIN, P, OUT, sign: ct.Constant[float], POS: ct.Constant[bool],
        HQ: ct.Constant[int], HK: ct.Constant[int], HALF: ct.Constant[int],
    ):  # fmt: skip
        """Token bid(0) = (b, s) of Q (b, s, hq, d): its table row, then q's and k's heads, gathered
        and scattered (any strides, heads and d/2 past the tiles masked)."""
        s_len, hq, half = Q.shape[1], Q.shape[2], Q.shape[3] // 2
        b = ct.bid(0) // s_len
        s = ct.bid(0) % s_len
        row = ct.astype(ct.gather(P, (b if P.shape[0] > 1 else 0, s)), ct.int32) if POS else s
        cols = ct.arange(HALF, dtype=ct.int32)
        cb = b if COS.shape[0] > 1 else 0
        c = ct.astype(ct.gather(COS, (cb, row, cols), mask=cols < half), ct.float32).reshape((1, HALF))
        sn = ct.astype(ct.gather(SIN, (cb, row, cols), mask=cols < half), ct.float32).reshape((1, HALF)) * sign
        col = cols.reshape((1, HALF))
        _ct_rotate(Q, OUT, b, s, 0, HQ, half, col, c, sn)
        _ct_rotate(K, OUT, b, s, hq, HK, half, col, c, sn)

    def _ct_rotate(X, OUT, b, s, first, H, half, col, c, sn):
        """The heads of token (b, s) of X (H: their count padded) rotated by (c, sn) into OUT's heads
        from `first`; lanes past X's heads or d/2 neither read nor written (OUT's next heads are k's)."""
        heads = ct.arange(H, dtype=ct.int32).reshape((H, 1))
        inside = (col < half) & (heads < X.shape[2])
        x1 = ct.astype(ct.gather(X, (b, s, heads, col), mask=inside), ct.float32)
        x2 = ct.astype(ct.gather(X, (b, s, heads, col + half), mask=inside), ct.float32)
        ct.scatter(OUT, (b, s, heads + first, col), ct.astype(x1 * c - x2 * sn, OUT.dtype), mask=inside)
        ct.scatter(OUT, (b, s, heads + first, col + half), ct.astype(x2 * c + x1 * sn, OUT.dtype), mask=inside)

    def _cutile(q, k, cos, sin, ids, y, sign):
        cfg = config(q.shape[2], k.shape[2], q.shape[3])
        pos = ids if ids is not None else torch.zeros(1, 1, dtype=torch.int32, device=q.device)
        args = (q, k, cos, sin, pos, y, float(sign), ids is not None, cfg["hq"], cfg["hk"], cfg["half"])
        ct.launch(torch.cuda.current_stream(q.device), (q.shape[0] * q.shape[1],), _cutile_kernel, args)


def cutile_rope(q, k, cos, sin, position_ids=None, heads_first=False, *, variant="auto") -> torch.Tensor:
    """Our cuTile Python kernel: one output, q's heads then k's, in q's layout."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require(ct, unavailable_reason, "cutile")
    bs.require_cuda(KERNEL, "q", q)
    return rotate("cutile", _cutile if ct is not None else None, q, k, cos, sin, position_ids, heads_first, 1.0)


# -- PyTorch and the libraries: tables per token, made once per input ----------------------------

SAVED = bs.ForwardSaved()  # the per-token tables (tests/kit/test_providers.py allows them as arguments)


def per_token(cos, sin, ids, d: int, dtype, full: bool = True):
    """The tables' rows of each token, (1 or b, s, d) (the first halves twice where `full`, as Hugging
    Face's rotary module gives them; in `dtype`), made once per input: the lookup a model's rotary
    module makes once per forward for all its layers."""

    def make():
        c, s_ = (t if t.dim() == 3 else t[None] for t in (cos, sin))
        if ids is not None:
            rows = ids if ids.dim() == 2 else ids[None]
            batch = torch.arange(rows.shape[0], device=rows.device)[:, None] if c.shape[0] > 1 else 0
            c, s_ = c[batch, rows], s_[batch, rows]
        if full and c.shape[-1] == d // 2:
            c, s_ = torch.cat((c, c), -1), torch.cat((s_, s_), -1)
        return c.to(dtype).contiguous(), s_.to(dtype).contiguous()

    return SAVED.get(cos, make, key=(None if ids is None else (ids.data_ptr(), ids._version), d, dtype, full))


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def torch_rope(q, k, cos, sin, position_ids=None, heads_first=False):
    """Hugging Face's apply_rotary_pos_emb (the tables cast to q's dtype, as its rotary module does):
    (q rotated, k rotated)."""
    c, s_ = per_token(cos, sin, position_ids, q.shape[-1], q.dtype)
    c, s_ = (t.unsqueeze(1 if heads_first else 2) for t in (c, s_))
    return q * c + _rotate_half(q) * s_, k * c + _rotate_half(k) * s_


_compiled = None


def torch_compile_rope(q, k, cos, sin, position_ids=None, heads_first=False):
    """torch_rope's formula under torch.compile (default mode, static shapes; a recompile limit of 64
    so no shape falls back to eager), on the per-token tables."""
    global _compiled
    if _compiled is None:
        bs.raise_recompile_limit(64)
        _compiled = torch.compile(_formula, dynamic=False)
    c, s_ = per_token(cos, sin, position_ids, q.shape[-1], q.dtype)
    return _compiled(q, k, c, s_, 1 if heads_first else 2)


def _formula(q, k, c, s_, head_dim: int):
    c, s_ = c.unsqueeze(head_dim), s_.unsqueeze(head_dim)
    return q * c + _rotate_half(q) * s_, k * c + _rotate_half(k) * s_


def library(apply, q, k, cos, sin, ids, heads_first):
    """A library's rope (or its gradient: rope_backward's baselines) on (b, h, s, d) views (its
    interface) with per-token tables in their dtype, full width: apply(q, k, cos, sin) -> (q, k), back
    in the caller's layout."""
    c, s_ = per_token(cos, sin, ids, q.shape[-1], cos.dtype)
    if heads_first:
        return apply(q, k, c, s_)
    q_rot, k_rot = apply(q.transpose(1, 2), k.transpose(1, 2), c, s_)
    return q_rot.transpose(1, 2), k_rot.transpose(1, 2)


def _liger(ops, q, k, cos, sin, position_ids=None, heads_first=False):
    """Liger's LigerRopeFunction (Triton or cuTile: `ops`)."""
    function = providers.submodule(ops, "rope").LigerRopeFunction
    return library(lambda *a: function.apply(*a), q, k, cos, sin, position_ids, heads_first)


def _tilegym(ops, q, k, cos, sin, position_ids=None, heads_first=False):
    """TileGym 1.5.1's cuTile rope from its Liger suite (the backend the provider selected)."""
    rope = providers.package_module(ops, "suites.liger").rope
    return library(rope, q, k, cos, sin, position_ids, heads_first)


BACKENDS = {
    "cutile": cutile_rope,
    "triton": triton_rope,
    "torch": torch_rope,
    "torch_compile": torch_compile_rope,
    **providers.backends(tilegym=_tilegym, liger=_liger, liger_cutile=_liger),
}
unavailable_reason = bs.reason_for(__name__)
