"""layer_norm_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dx = r * (g - x̂ * mean(g * x̂, -1) - mean(g, -1)),  dw = sum over rows of dy * x̂,  db = that of dy,
    g = w * dy,  x̂ = (x - mean(x, -1)) * r,  r = rsqrt(var(x, -1) + eps)          (f32 inside)

Entries (dy, x, w, eps): ``triton`` and ``cutile`` (ours, the norms' nb.entries: the port's
algorithm, a persistent grid whose programs each hold whole rows, store dx and a row each of
f32 partial sums of dw and db; torch sums those) write the port's one (m + 2, n) output. The others
return (dx, dw, db) apart, as their libraries make them (the kit checks them stacked:
tilekit.runtime.kernel.stacked), and start from the per-row mean and rstd their forward saved for the
backward, as a training step has them: ``torch_layer_norm_backward`` (aten.native_layer_norm_backward,
what autograd of F.layer_norm runs) and Liger's (Triton, cuTile). Those statistics (f32, as each
forward saves them) are made once per input tensor (at the first, untimed call) and reused, so no
baseline is timed with a forward in it. TileGym 1.5.1's cuTile LayerNorm has no backward (its
autograd function raises NotImplementedError). Our kernels and the saved statistics are the norms'
(tilekit.runtime.norm_backward_baselines: one kernel per language for RMSNorm and LayerNorm).
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import norm_backward_baselines as nb
from tilekit.runtime import providers
from tilekit.runtime.norm_backward_baselines import config  # noqa: F401 (BASELINE_CASES' plans)

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "layer_norm_backward"
VARIANTS = ("auto",)
SAVED = nb.SAVED  # the norms' saved statistics (tests/kit/test_providers.py allows them as arguments)
TILEGYM_REASON = "TileGym 1.5.1's cuTile layer_norm has no backward (its autograd function raises NotImplementedError)"


def _check_inputs(dy, x, w) -> None:
    nb.check_inputs(KERNEL, dy, x, w)


def torch_layer_norm_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, eps: float):
    """PyTorch's LayerNorm backward, what autograd of F.layer_norm runs (aten.native_layer_norm_backward;
    its CPU kernel off a GPU), from the forward's mean and rstd: (dx, dw, db). The bias only gives db's
    dtype and shape: w stands for it."""
    _check_inputs(dy, x, w)
    mean, rstd = nb.saved_stats(x, eps, centered=True)
    op = torch.ops.aten.native_layer_norm_backward
    return tuple(op(dy, x, [x.shape[-1]], mean[:, None], rstd[:, None], w, w, [True, True, True]))


def _liger(ops, dy, x, w, eps):
    """Liger's layer_norm_backward (Triton, or cuTile) from the forward's mean and rstd: (dx, dw, db).
    Its bias argument only gives db's dtype (w stands for it)."""
    mean, rstd = nb.saved_stats(x, eps, centered=True)  # of the caller's x, before a copy
    dy, x = (t if t.is_contiguous() else t.contiguous() for t in (dy, x))  # it views them as rows (padded: a copy)
    return ops.layer_norm.layer_norm_backward(dy, x, w, w, mean, rstd)


BACKENDS = {
    **nb.entries(__name__, True, torch_layer_norm_backward),
    **providers.backends(tilegym=TILEGYM_REASON, liger=_liger, liger_cutile=_liger),
}
cutile_layer_norm_backward, triton_layer_norm_backward = BACKENDS["cutile"], BACKENDS["triton"]  # the contract's names
unavailable_reason = bs.reason_for(__name__)
