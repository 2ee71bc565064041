"""rms_norm_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dx = r * (w * dy - x̂ * mean(w * dy * x̂, -1)),  dw = sum over rows of dy * x̂,  x̂ = x * r,
    r = rsqrt(mean(x^2, -1) + eps)                                         (f32 inside)

Entries (dy, x, w, eps): ``triton`` and ``cutile`` (ours, the norms' nb.entries: the port's
algorithm, a persistent grid whose programs each hold whole rows, store dx and one row of f32 partial
sums of dw; torch sums those) write the port's one (m + 1, n) output. The others return (dx, dw)
apart, as their libraries make them (the kit checks them stacked: tilekit.runtime.kernel.stacked), and
start from the per-row rstd their forward saved for the backward, as a training step has it:
``torch_rms_norm_backward`` (PyTorch's fused kernel, aten._fused_rms_norm_backward), TileGym's cuTile
backward and Liger's (Triton, cuTile). That rstd (f32, as each forward saves it) is made once per
input tensor (`saved_rstd`: at the first, untimed call) and reused, so no baseline is timed with a
forward in it. Our kernels and the saved statistics are the norms' (tilekit.runtime.norm_backward_baselines:
one kernel per language for RMSNorm and LayerNorm).
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import norm_backward_baselines as nb
from tilekit.runtime import providers
from tilekit.runtime.norm_backward_baselines import config  # noqa: F401 (BASELINE_CASES' plans)

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "rms_norm_backward"
VARIANTS = ("auto",)


def _check_inputs(dy, x, w) -> None:
    nb.check_inputs(KERNEL, dy, x, w)


# -- the libraries, from the rstd their forward saved -----------------------------------------------

GEMMA_CASTING = 1  # Liger's casting modes: -1 none, 0 llama, 1 gemma (liger_kernel.ops.rms_norm)
SAVED = nb.SAVED  # the norms' saved statistics (tests/kit/test_providers.py allows them as arguments)


def saved_rstd(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The f32 rstd = rsqrt(mean(x^2, -1) + eps) per row of x, as PyTorch's, TileGym's and Liger's
    forwards (Llama casting) save it (shape (m,)); made once per x and eps (nb.saved_stats)."""
    return nb.saved_stats(x, eps, centered=False)[1]


def torch_rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, eps: float):
    """PyTorch's fused RMSNorm backward, what autograd of F.rms_norm runs on a GPU
    (aten._fused_rms_norm_backward; elsewhere its decomposition), from the forward's rstd: (dx, dw)."""
    _check_inputs(dy, x, w)
    op = torch.ops.aten._fused_rms_norm_backward
    if not x.is_cuda:  # the fused op has CUDA and meta kernels only: its reference decomposition
        op = torch._decomp.decomposition_table[op.default]
    rstd = saved_rstd(x, eps)[:, None]  # as _fused_rms_norm returns it: (m, 1)
    return tuple(op(dy, x, [x.shape[-1]], rstd, w, [True, True]))


def _liger(ops, dy, x, w, eps):
    """Liger's rms_norm_backward (Gemma casting at offset 0, not in place) from the forward's rstd, with
    the block and warps its forward would pass (liger_kernel.ops.utils.calculate_settings' rule in
    0.8.5: the power of two >= n; 4 warps, 8 from 2048 lanes, 16 from 8192): (dx, dw). Gemma casting
    at offset 0 is the kit's RMSNorm, f32 throughout (y = x̂ * w); Llama casting, its default, is
    another function (x̂ rounded to the input dtype before the weight), whose dw sums that rounding
    over the rows: 0.26 off the f32 formula's at bf16 4096 x 4096 on the H100 (2026-12-05)."""
    block = bs.next_pow2(x.shape[-1])
    warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    rstd = saved_rstd(x, eps)  # of the caller's x, before a copy
    dy, x = (t if t.is_contiguous() else t.contiguous() for t in (dy, x))  # it views them as rows (padded: a copy)
    return ops.rms_norm.rms_norm_backward(dy, x, w, rstd, 0.0, GEMMA_CASTING, block, warps, False, False)


def _tilegym(ops, dy, x, w, eps):
    """TileGym 1.5.1's cuTile RMSNorm backward (tilegym.ops.cutile.rms_norm.rms_norm_backward, its
    standalone entry; the autograd function of its rms_norm calls it) from the forward's rstd: (dx, dw)."""
    return providers.submodule(ops, "cutile.rms_norm").rms_norm_backward(x, dy, w, saved_rstd(x, eps))


BACKENDS = {
    **nb.entries(__name__, False, torch_rms_norm_backward),
    **providers.backends(tilegym=_tilegym, liger=_liger, liger_cutile=_liger),
}
cutile_rms_norm_backward, triton_rms_norm_backward = BACKENDS["cutile"], BACKENDS["triton"]  # the contract's names
unavailable_reason = bs.reason_for(__name__)
