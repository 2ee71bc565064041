"""attention_backward, the cuTile Rust port of attention's gradients (FlashAttention-2 style):

    from kernels.attention.op import attention_lse
    from kernels.attention_backward.op import attention_backward, split
    o, lse = attention_lse(q, k, v, sinks, causal=True)                 # the training forward
    g = attention_backward(dout, q, k, v, o, lse, causal=True)          # (rows, d)
    dq, dk, dv = split(g, q, k)

q, o, dout (b, h, s_q, d), k, v (b, h_kv, s_kv, d) f16/bf16 with d 64 or 128 (any strides, last dim
contiguous); lse the forward's f32 (b, h, s_q) base-2 log-sum-exp (kernels/attention/op.py's
attention_lse); causal, scale and window as the forward took them. The scores are recomputed from q,
k and lse (never stored): `cutile_attention_backward` (kernels/attention_backward/ffi.rs) runs a dQ
kernel (which also makes Δ = rowsum(dO ⊙ O)) and a dK/dV kernel that sums over each GQA group's
query heads. One output of (b·h·s_q + 2·b·h_kv·s_kv, d) rows, the kit's one `out`: `split` views it
as dQ, dK, dV (each contiguous). A sink's gradient, -Σ exp(sink - lse) · Δ over its head's rows, is
a reduction made here with torch (`sink_gradient`), not in the kernels.

`variant="auto"` autotunes (block, step, occupancy, warps) over `variants` per dtype and shape class.
Autograd: `forward_gradients` is attention's formula (tilekit.runtime.ops); a call of `attention`
with an input that requires grad runs `training_call`, the op torch.ops.tilekit.attention_train,
which saves lse from the forward instead of recomputing it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from kernels.attention import op as forward
from tilekit.runtime import autotune, checks, port

CDEF = """
int32_t cutile_attention_backward(const TensorDesc* out, const TensorDesc* dout, const TensorDesc* q,
                                  const TensorDesc* k, const TensorDesc* v, const TensorDesc* o,
                                  const TensorDesc* lse, int32_t causal, float scale, int32_t window,
                                  int32_t block, int32_t step, int32_t kv_step, int32_t occupancy,
                                  int32_t warps, int32_t device_id, uint64_t stream);
"""

# kernels/attention/op.py imports this module while it defines its op (tilekit.runtime.ops): of
# `forward`, only what it defines before its entry is read at import (DTYPES, LOG2E), the rest at a call.
DTYPES = forward.DTYPES
DEFAULT_VARIANT = {"block": -1, "step": -1, "kv_step": -1, "occupancy": -1, "warps": -1}
LOG2E = forward.LOG2E


def export_args(
    block: int, step: int, kv_step: int = -1, occupancy: int = -1, warps: int = -1
) -> tuple[int, int, int, int, int]:
    """A variant's arguments of the export, (block, step, kv_step, occupancy, warps). Pure."""
    return int(block), int(step), int(kv_step), int(occupancy), int(warps)


def _v(block: int, step: int, occupancy: int = -1, warps: int = -1, kv_step: int = -1) -> dict:
    return {"block": block, "step": step, "kv_step": kv_step, "occupancy": occupancy, "warps": warps}


def variants(b: int, h: int, hkv: int, sq: int, skv: int, d: int) -> list[dict]:
    """Candidates (each a JIT of two kernels): each kernel's own tile of 128 rows with 8 worker warps,
    dQ walking key tiles of 64 and dK/dV query tiles of 32 (each kernel's fastest on the H100,
    NOTES.md "Where the time goes"; first), or both 64 or both 32; or 64-row own tiles walking 64,
    32 or 128 at the default warps (kv_step -1: dK/dV walks `step` too):

    >>> [(v["block"], v["step"], v["kv_step"], v["warps"]) for v in variants(1, 32, 8, 4096, 4096, 128)]
    [(128, 64, 32, 8), (128, 64, -1, 8), (128, 32, -1, 8), (64, 64, -1, -1), (64, 32, -1, -1), (64, 128, -1, -1)]

    Not 64-row tiles at 8 warps, which ffi.rs refuses (a wrong dQ on the H100: NOTES.md, "Measured").
    """
    del b, h, hkv, sq, skv, d
    tiles128 = [_v(128, 64, warps=8, kv_step=32), _v(128, 64, warps=8), _v(128, 32, warps=8)]
    return [*tiles128, _v(64, 64), _v(64, 32), _v(64, 128)]


def tune_key(dtype: str, b: int, h: int, hkv: int, sq: int, skv: int, d: int, *, causal=False, window=-1) -> dict:
    """Problem class: head dim, mask, GQA group, query and key lengths and b · h rounded up to powers
    of two, a window's length class when present.

    >>> tune_key("bfloat16", 1, 32, 8, 4096, 4096, 128, causal=True)
    {'dtype': 'bfloat16', 'd': 128, 'causal': True, 'group': 4, 'sq_class': 4096, 'skv_class': 4096, 'bh_class': 32}
    """
    pow2 = autotune.pow2
    key = {"dtype": dtype, "d": d, "causal": bool(causal), "group": h // hkv}
    key |= {"sq_class": pow2(sq), "skv_class": pow2(skv), "bh_class": pow2(b * h)}
    if 0 < window < skv:
        key["window_class"] = pow2(window)
    return key


def check_sizes(b: int, h: int, hkv: int, sq: int, skv: int, d: int) -> None:
    """attention's size checks (kernels/attention/op.py check_sizes), naming this kernel."""
    forward.check_sizes(b, h, hkv, sq, skv, d, kernel="attention_backward")


def query_tiles(nt: int, bm: int, bn: int, sq: int, diag: int, window: int = -1) -> tuple[int, int, int, int]:
    """The query tiles of bm rows that see key tile `nt` of bn keys, as kernel.rs's query_tiles
    counts them (query i sees key j iff j <= i + diag and, with a window w > 0, j > i + diag - w):
    (lo, full_lo, full_hi, hi), [full_lo, full_hi) unmasked, [lo, full_lo) and [full_hi, hi)
    masked. Pure: tests.py checks it against every (query, key) pair.

    Llama-like 4096 tokens causal, 128-key tiles walking 64-row query tiles: key tile 10 is seen
    from query tile 20 on (masked there and at 21), and with a 1024-key window up to tile 37:

    >>> query_tiles(10, 64, 128, 4096, 0), query_tiles(10, 64, 128, 4096, 0, 1024)
    ((20, 22, 64, 64), (20, 22, 36, 38))
    """
    tiles = -(-sq // bm)
    lo = min(max(0, nt * bn - diag) // bm, tiles)
    hi = tiles
    if window > 0:
        last = (nt + 1) * bn - 2 - diag + window
        hi = min(max(last // bm + 1 if last >= 0 else 0, lo), tiles)
    full_first = (nt + 1) * bn - 1 - diag
    full_lo = min(max(-(-full_first // bm) if full_first > 0 else 0, lo), hi)
    full_hi = hi
    if window > 0:
        x = nt * bn - diag + window
        full_hi = max(min(x // bm if x > 0 else 0, hi), full_lo)
    return lo, full_lo, full_hi, hi


@port.entry(
    layouts={
        "dout": "(b, h, s_q, d)",
        "q": "(b, h, s_q, d)",
        "k": "(b, h_kv, s_kv, d)",
        "v": "(b, h_kv, s_kv, d)",
        "o": "(b, h, s_q, d)",
        "lse": "(b, h, s_q)",
    }
)
def attention_backward(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    lse: Tensor,
    causal: bool = False,
    scale: float | None = None,
    window: int | None = None,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """The rows of dQ, dK, dV (the module docstring); ValueError/TypeError on bad input, ffi.KernelError
    on a failed call."""
    checks.dtypes("attention_backward", DTYPES, dout=dout, q=q, k=k, v=v, o=o)
    for name, t in (("o", o), ("dout", dout)):
        if t.shape != q.shape or t.dtype != q.dtype:
            raise ValueError(
                f"attention_backward: {name} must have q's shape {tuple(q.shape)} and dtype {q.dtype}, got "
                f"{tuple(t.shape)} {t.dtype}"
            )
    checks.contiguous_last_dim("attention_backward", dout=dout, o=o)
    if lse.shape != q.shape[:3] or lse.dtype != torch.float32:
        raise ValueError(
            f"attention_backward: lse must be the forward's f32 {tuple(q.shape[:3])} (attention_lse), got "
            f"{tuple(lse.shape)} {lse.dtype}"
        )
    q, k, v, _, causal, scale, window = forward._checked(
        q, k, v, None, causal, scale, window, None, kernel="attention_backward"
    )
    b, h, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    checks.cuda("attention_backward", q=q, o=o, dout=dout, lse=lse)
    rows = out_rows(b, h, hkv, sq, skv)
    checks.out_matches("attention_backward", out, (rows, d), q)
    g = out if out is not None else torch.empty((rows, d), dtype=q.dtype, device=q.device)
    if skv == 0 or sq == 0:
        return g.zero_()  # no key or no query: no gradient flows
    lse = lse.contiguous()

    def key():
        return tune_key(str(q.dtype)[6:], b, h, hkv, sq, skv, d, causal=bool(causal), window=window)

    args = (dout, q, k, v, o, lse, causal, scale, window)
    port.run(__name__, variant, (b, h, hkv, sq, skv, d), g, *args, key=key)
    return g


def out_rows(b: int, h: int, hkv: int, sq: int, skv: int) -> int:
    """Rows of the one output: dQ's b·h·s_q, then dK's and dV's b·h_kv·s_kv each.

    >>> out_rows(1, 4, 2, 8, 8)
    64
    """
    return b * h * sq + 2 * b * hkv * skv


def split(g: Tensor, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """attention_backward's rows as (dQ (b, h, s_q, d), dK, dV (b, h_kv, s_kv, d)), contiguous views.

    >>> g = torch.arange(2 * 3 + 2 * 2 * 5, dtype=torch.float32)[:, None].expand(-1, 2).contiguous()
    >>> [tuple(t.shape) for t in split(g, torch.empty(1, 2, 3, 2), torch.empty(1, 2, 5, 2))]
    [(1, 2, 3, 2), (1, 2, 5, 2), (1, 2, 5, 2)]
    """
    nq, nk = q.shape[0] * q.shape[1] * q.shape[2], k.shape[0] * k.shape[1] * k.shape[2]
    return g[:nq].view(q.shape), g[nq : nq + nk].view(k.shape), g[nq + nk :].view(k.shape)


def sink_gradient(sinks: Tensor, dout: Tensor, o: Tensor, lse: Tensor) -> Tensor:
    """d loss / d sinks: a sink is one more score of each of its head's rows with a zero value row,
    whose probability is exp2(sink · log2(e) - lse); its gradient is -Σ over the rows of that
    probability times Δ = rowsum(dO ⊙ O). Torch ops on (b, h, s_q) f32 (the kernels keep Δ in a
    workspace of their own); in sinks' dtype.

    >>> o = torch.ones(1, 2, 3, 4); lse = torch.zeros(1, 2, 3)
    >>> sink_gradient(torch.zeros(2), torch.ones(1, 2, 3, 4), o, lse).tolist()
    [-12.0, -12.0]
    """
    delta = (dout.float() * o.float()).sum(-1)
    p = torch.exp2(sinks.float()[None, :, None] * LOG2E - lse)
    return -(p * delta).sum((0, 2)).to(sinks.dtype)


def gradients(dout, q, k, v, sinks, o, lse, causal, scale, window, needs) -> tuple:
    """attention's gradients for its 7 arguments (q, k, v, sinks, causal, scale, window) from the
    forward's o and lse; None where not needed."""
    dout = dout.contiguous() if dout.stride(-1) != 1 else dout
    dq = dk = dv = ds = None
    if any(needs[:3]):
        dq, dk, dv = split(attention_backward.op(dout, q, k, v, o, lse, bool(causal), scale, window), q, k)
    if sinks is not None and needs[3]:
        ds = sink_gradient(sinks, dout, o, lse)
    return (dq if needs[0] else None, dk if needs[1] else None, dv if needs[2] else None, ds, None, None, None)


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple, output: Tensor) -> tuple:
    """attention's autograd formula as torch.ops.tilekit.attention's own (tilekit.runtime.ops registers
    it): that op returns o only, so lse is remade by one more forward (attention_lse). A call of the
    Python entry with grad runs `training_call` instead, which keeps the forward's lse."""
    q, k, v, sinks, causal, scale, window = inputs
    _, lse = forward.attention_lse(q, k, v, sinks, causal=causal, scale=scale, window=window)
    return gradients(grad, q, k, v, sinks, output, lse, causal, scale, window, needs)


# -- the training op: the forward that saves lse, with its gradient ----------------------------------

TRAIN_SCHEMA = (
    "(Tensor q, Tensor k, Tensor v, Tensor? sinks=None, bool causal=False, float? scale=None, int? window=None)"
    " -> (Tensor, Tensor)"
)


def _train_forward(q, k, v, sinks=None, causal=False, scale=None, window=None):
    return forward.attention_lse(q, k, v, sinks, causal=causal, scale=scale, window=window)


def _setup_context(ctx, inputs, output):
    q, k, v, sinks, causal, scale, window = inputs
    o, lse = output
    ctx.others = (causal, scale, window)
    ctx.has_sinks = sinks is not None
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, o, lse, *((sinks,) if sinks is not None else ()))


def _train_backward(ctx, dout, _dlse):
    q, k, v, o, lse, *rest = ctx.saved_tensors
    sinks = rest[0] if ctx.has_sinks else None
    causal, scale, window = ctx.others
    needs = (*ctx.needs_input_grad, *(False,) * 7)[:7]  # the dispatcher may drop trailing defaults' flags
    return gradients(dout, q, k, v, sinks, o, lse, causal, scale, window, needs)


_TRAIN_OP = torch.library.custom_op("tilekit::attention_train", _train_forward, mutates_args=(), schema=TRAIN_SCHEMA)
_TRAIN_OP.register_fake(_train_forward)
torch.library.register_autograd("tilekit::attention_train", _train_backward, setup_context=_setup_context)


def training_call(q, k, v, sinks=None, causal=False, scale=None, window=None) -> Tensor:
    """attention with an input that requires grad (tilekit.runtime.port calls it): o of
    torch.ops.tilekit.attention_train, whose gradient uses the lse its forward saved."""
    return torch.ops.tilekit.attention_train(q, k, v, sinks, causal, scale, window)[0]
