"""fused_add_rms_norm_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dx = r * (w * dy - ŝ * mean(w * dy * ŝ, -1)) + dresidual,  dw = sum over rows of dy * ŝ,
    ŝ = s * r,  r = rsqrt(mean(s^2, -1) + eps)                            (f32 inside)

Entries (dy, dresidual, s, w, eps): ``triton`` and ``cutile`` (ours, the norms' nb.entries with the
residual's gradient added in the same pass: the port's algorithm) write the port's one (m + 1, n)
output. The others return (dx, dw) apart (the kit checks them stacked) and start from the per-row
rstd their forward saved, as a training step has it (made once per s at the first, untimed call):
``torch_fused_add_rms_norm_backward`` (what autograd of the eager pair runs: PyTorch's fused RMSNorm
backward, then the add of the residual stream's gradient), Liger's Triton and cuTile backwards
(Gemma casting at offset 0, as rms_norm_backward's: the kit's f32 formula) and TileGym's cuTile one
(1.5.1's Liger suite).
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import norm_backward_baselines as nb
from tilekit.runtime import providers
from tilekit.runtime.norm_backward_baselines import config  # noqa: F401 (BASELINE_CASES' plans)

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "fused_add_rms_norm_backward"
VARIANTS = ("auto",)
GEMMA_CASTING = 1  # Liger's casting modes: -1 none, 0 llama, 1 gemma
SAVED = nb.SAVED  # the norms' saved statistics (tests/kit/test_providers.py allows them as arguments)


def _check_inputs(dy, dr, s, w) -> None:
    nb.check_inputs(KERNEL, dy, s, w, dr)


def saved_rstd(s: torch.Tensor, eps: float) -> torch.Tensor:
    """The f32 rstd = rsqrt(mean(s^2, -1) + eps) per row of s, as the forwards save it; made once per s."""
    return nb.saved_stats(s, eps, centered=False)[1]


def torch_fused_add_rms_norm_backward(dy, dr, s, w, eps: float):
    """What autograd of `s = x + residual; F.rms_norm(s, ...)` runs: PyTorch's fused RMSNorm backward
    (aten._fused_rms_norm_backward; off a GPU its decomposition) from the forward's rstd, then the
    residual stream's gradient added to ds: (dx, dw)."""
    _check_inputs(dy, dr, s, w)
    op = torch.ops.aten._fused_rms_norm_backward
    if not s.is_cuda:  # the fused op has CUDA and meta kernels only: its reference decomposition
        op = torch._decomp.decomposition_table[op.default]
    ds, dw = op(dy, s, [s.shape[-1]], saved_rstd(s, eps)[:, None], w, [True, True])
    return ds + dr, dw


def _dx_dw(grads):
    """(dx, dw) of a library's (dX, dR, dW), whose dR is dX itself (a slice: no GPU work)."""
    return grads[::2]


def _contiguous(*ts):
    return (t if t.is_contiguous() else t.contiguous() for t in ts)  # they view them as rows (padded: a copy)


def _liger(ops, dy, dr, s, w, eps):
    """Liger's Triton fused_add_rms_norm_backward (Gemma casting at offset 0, not in place: its in-place
    form writes dx over dy) with the block and warps its forward would pass (calculate_settings' rule in
    0.8.5: the power of two >= n; 4 warps, 8 from 2048 lanes, 16 from 8192): (dx, dw)."""
    block = bs.next_pow2(s.shape[-1])
    warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    rstd = saved_rstd(s, eps)  # of the caller's s, before a copy
    dy, dr, s = _contiguous(dy, dr, s)
    module = providers.submodule(ops, "fused_add_rms_norm")
    return _dx_dw(module.fused_add_rms_norm_backward(dy, dr, s, w, rstd, 0.0, GEMMA_CASTING, block, warps, 2, False))


def _liger_cutile(ops, dy, dr, s, w, eps):
    """Liger's cuTile fused add + RMSNorm backward (its autograd function's), Gemma casting at offset 0: (dx, dw)."""
    rstd = saved_rstd(s, eps)
    dy, dr, s = _contiguous(dy, dr, s)
    module = providers.submodule(ops, "fused_add_rms_norm")
    return _dx_dw(
        module._fused_add_rms_norm_backward_ct(dy, dr, s, w, rstd, 0.0, GEMMA_CASTING, bs.next_pow2(s.shape[-1]))
    )


def _tilegym(ops, dy, dr, s, w, eps):
    """TileGym 1.5.1's cuTile fused add + RMSNorm backward (its Liger suite's, what its autograd function
    calls), Gemma casting at offset 0: (dx, dw)."""
    rstd = saved_rstd(s, eps)
    dy, dr, s = _contiguous(dy, dr, s)
    module = providers.package_module(ops, "suites.liger.cutile.fused_add_rms_norm")
    return _dx_dw(
        module._fused_add_rms_norm_backward_ct(dy, dr, s, w, rstd, 0.0, GEMMA_CASTING, bs.next_pow2(s.shape[-1]))
    )


BACKENDS = {
    **nb.entries(__name__, False, torch_fused_add_rms_norm_backward, added=True),
    **providers.backends(tilegym=_tilegym, liger=_liger, liger_cutile=_liger_cutile),
}
cutile_fused_add_rms_norm_backward, triton_fused_add_rms_norm_backward = BACKENDS["cutile"], BACKENDS["triton"]
unavailable_reason = bs.reason_for(__name__)
