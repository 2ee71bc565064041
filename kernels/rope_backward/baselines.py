"""rope_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dx1 = dy1 c + dy2 s;  dx2 = dy2 c - dy1 s      (per head of dq and dk: the rotation back)

Entries (dq, dk, cos, sin, position_ids, heads_first), the port's arguments: ours, rope's Triton and
cuTile Python kernels with the sign of the rotation flipped (kernels/rope/baselines.py), each returning
the port's one output; ``torch_rope_backward`` (the ops autograd runs for Hugging Face's formula:
dy * cos + rotate_halfᵀ(dy * sin), eager) and ``torch_compile_rope_backward`` (that formula under
torch.compile); Liger's Triton `rope_backward` and its cuTile one (called with the arguments its
forward would save, derived from the shapes as its forward derives them); TileGym 1.5.1's cuTile
RopeCuTileFunction through autograd (its backward reads what its forward saved: the forward is
recorded once per input, outside the timed calls, and each call is the autograd backward of it,
`RECORDED`). The libraries write into dq and dk where those are contiguous in (b, s, h, d) memory;
the harness checks each output against the reference of the inputs as they were before the call.
"""

import torch

from kernels.rope import baselines as rope
from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = rope.triton, rope.tl, rope._TRITON_ERROR
ct, _CUTILE_ERROR = rope.ct, rope._CUTILE_ERROR

KERNEL = "rope_backward"
VARIANTS = ("auto",)
config = rope.config  # BASELINE_CASES' plans
_check_inputs = rope._check_inputs
SAVED = rope.SAVED  # the per-token tables, and TileGym's recorded forwards (tests/kit/test_providers.py)
RECORDED = ("tilegym",)
if triton is not None:
    _triton_kernel = rope._triton_kernel  # BASELINE_CASES' compiled kernels
if ct is not None:
    _cutile_kernel = rope._cutile_kernel  # entries timed as the autograd backward of a forward recorded once per input


def triton_rope_backward(dq, dk, cos, sin, position_ids=None, heads_first=False, *, variant="auto"):
    """Our Triton kernel rotating back: one output, dq's heads then dk's, in dq's layout."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require(triton, unavailable_reason, "triton")
    launch = rope._triton if triton is not None else None
    return rope.rotate("triton", launch, dq, dk, cos, sin, position_ids, heads_first, -1.0)


def cutile_rope_backward(dq, dk, cos, sin, position_ids=None, heads_first=False, *, variant="auto"):
    """Our cuTile Python kernel rotating back: one output, dq's heads then dk's, in dq's layout."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require(ct, unavailable_reason, "cutile")
    bs.require_cuda(KERNEL, "dq", dq)
    launch = rope._cutile if ct is not None else None
    return rope.rotate("cutile", launch, dq, dk, cos, sin, position_ids, heads_first, -1.0)


def _rotate_half_t(x):
    """rotate_half's adjoint: (x1, x2) -> (x2, -x1)."""
    half = x.shape[-1] // 2
    return torch.cat((x[..., half:], -x[..., :half]), -1)


def _formula(dq, dk, c, s_, head_dim: int):
    c, s_ = c.unsqueeze(head_dim), s_.unsqueeze(head_dim)
    return dq * c + _rotate_half_t(dq * s_), dk * c + _rotate_half_t(dk * s_)


def torch_rope_backward(dq, dk, cos, sin, position_ids=None, heads_first=False):
    """What autograd of Hugging Face's q * cos + rotate_half(q) * sin runs for the gradients (the
    tables in the gradients' dtype, as its rotary module casts them): (dq rotated back, dk rotated back)."""
    c, s_ = rope.per_token(cos, sin, position_ids, dq.shape[-1], dq.dtype)
    return _formula(dq, dk, c, s_, 1 if heads_first else 2)


_compiled = None


def torch_compile_rope_backward(dq, dk, cos, sin, position_ids=None, heads_first=False):
    """torch_rope_backward's formula under torch.compile (default mode, static shapes; a recompile
    limit of 64 so no shape falls back to eager)."""
    global _compiled
    if _compiled is None:
        bs.raise_recompile_limit(64)
        _compiled = torch.compile(_formula, dynamic=False)
    c, s_ = rope.per_token(cos, sin, position_ids, dq.shape[-1], dq.dtype)
    return _compiled(dq, dk, c, s_, 1 if heads_first else 2)


def _liger(ops, dq, dk, cos, sin, position_ids=None, heads_first=False):
    """Liger's Triton `rope_backward(dq, dk, cos, sin)` on (b, h, s, d) views with the per-token tables."""
    backward = providers.submodule(ops, "rope").rope_backward
    return rope.library(backward, dq, dk, cos, sin, position_ids, heads_first)


def _liger_cutile(ops, dq, dk, cos, sin, position_ids=None, heads_first=False):
    """Liger's cuTile `rope_backward` on (b, h, s, d) views with the per-token tables and the state its
    forward saves (the tables' batch, whether its aligned kernel applies, the tiles, the sizes),
    derived from the shapes as its forward derives them."""
    module = providers.submodule(ops, "rope")

    def backward(dq_h, dk_h, c, s_):
        b, hq, s, d = dq_h.shape
        hk = dk_h.shape[1]
        tiles = [bs.next_pow2(v) for v in (hq, hk, d // 2)]
        state = (c.shape[0], tiles == [hq, hk, d // 2], *tiles, dq.dtype, b, s, hq, hk, d)
        return module.rope_backward(dq_h, dk_h, c, s_, *state)

    return rope.library(backward, dq, dk, cos, sin, position_ids, heads_first)


class _Recorded:
    """A library's forward, recorded once with autograd on leaves of the gradients' shapes."""

    def __init__(self, outputs, leaves):
        self.outputs, self.leaves = outputs, leaves


def _tilegym(ops, dq, dk, cos, sin, position_ids=None, heads_first=False):
    """TileGym's cuTile rope (its Liger suite) backward: autograd of its forward, recorded once per
    input (keyed by dq) on leaves laid out as dq and dk, with the gradients given."""

    def backward(dq_h, dk_h, c, s_):
        def make():
            leaves = tuple(torch.empty_like(t).requires_grad_() for t in (dq_h, dk_h))
            with torch.enable_grad():
                outputs = providers.package_module(ops, "suites.liger").rope(*leaves, c, s_)
            return _Recorded(outputs, leaves)

        recorded = SAVED.get(dq, make, key=("tilegym", dk.data_ptr(), c.data_ptr()))
        with torch.enable_grad():
            return torch.autograd.grad(recorded.outputs, recorded.leaves, (dq_h, dk_h), retain_graph=True)

    return rope.library(backward, dq, dk, cos, sin, position_ids, heads_first)


BACKENDS = {
    "cutile": cutile_rope_backward,
    "triton": triton_rope_backward,
    "torch": torch_rope_backward,
    "torch_compile": torch_compile_rope_backward,
    **providers.backends(tilegym=_tilegym, liger=_liger, liger_cutile=_liger_cutile),
}
unavailable_reason = bs.reason_for(__name__)
