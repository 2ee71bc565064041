"""silu_and_mul_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dgate = dy * up * s * (1 + gate * (1 - s)),  dup = dy * gate * s,  s = sigmoid(gate)   (f32 inside)

Entries (dy, x) with x = [gate | up] (m, 2H), each writing one (m, 2H) dx = [dgate | dup] as the port
does: ours, ``triton_silu_and_mul_backward`` and ``cutile_silu_and_mul_backward`` (one elementwise
pass over (m, H) tiles), and ``torch_silu_and_mul_backward`` (the kernels autograd of
``F.silu(gate) * up`` runs: dy * up, then aten.silu_backward into dgate, and dy * silu(gate) into dup
from the silu its forward saved): the gated family's (tilekit.runtime.gated_backward_baselines).
TileGym's cuTile backward returns (dgate, dup) apart (checked side by side:
tilekit.runtime.kernel.stacked).
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated_backward_baselines, providers
from tilekit.runtime.gated_backward_baselines import config  # noqa: F401 (BASELINE_CASES' plans)
from tilekit.runtime.norm_baselines import DTYPES

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "silu_and_mul_backward"
VARIANTS = ("auto",)


def _check_inputs(dy, x) -> None:
    bs.check_matrix(KERNEL, "x", x, DTYPES, "(m, 2H)")
    bs.check_matrix(KERNEL, "dy", dy, DTYPES, "(m, H)")
    if x.shape[1] % 2 or tuple(dy.shape) != (x.shape[0], x.shape[1] // 2) or dy.dtype != x.dtype:
        raise ValueError(
            f"{KERNEL} baseline: x must be (m, 2H) and dy (m, H) of its dtype, got x {tuple(x.shape)} {x.dtype}, "
            f"dy {tuple(dy.shape)} {dy.dtype}"
        )


def _into_halves(run, dy, x):
    """dx (m, 2H) = [dgate | dup] from run(dy, gate, up, dgate, dup)."""
    _check_inputs(dy, x)
    h = dy.shape[1]
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    run(dy, x[:, :h], x[:, h:], dx[:, :h], dx[:, h:])
    return dx


def triton_silu_and_mul_backward(dy: torch.Tensor, x: torch.Tensor, *, variant="auto") -> torch.Tensor:
    """silu_and_mul's gradient with our Triton kernel: dx (m, 2H)."""
    bs.require(triton, unavailable_reason, "triton")
    bs.check_variant(KERNEL, variant, VARIANTS)
    return _into_halves(lambda *views: gated_backward_baselines.launch("triton", *views), dy, x)


def cutile_silu_and_mul_backward(dy: torch.Tensor, x: torch.Tensor, *, variant="auto") -> torch.Tensor:
    """silu_and_mul's gradient with our cuTile Python kernel: dx (m, 2H)."""
    bs.require(ct, unavailable_reason, "cutile")
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require_cuda(KERNEL, "x", x)
    return _into_halves(lambda *views: gated_backward_baselines.launch("cutile", *views), dy, x)


def torch_silu_and_mul_backward(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The kernels autograd of F.silu(gate) * up runs, each into its half of one dx (m, 2H)."""
    return _into_halves(lambda *views: gated_backward_baselines.torch_kernels(*views, x), dy, x)


def _tilegym(ops, dy, x):
    """TileGym 1.5.1's cuTile silu_and_mul backward (what its autograd function runs, recomputing the
    activation from x): (dgate, dup)."""
    return providers.submodule(ops, "cutile.silu_and_mul")._silu_and_mul_backward(dy, x)


ours = {
    "cutile": cutile_silu_and_mul_backward,
    "triton": triton_silu_and_mul_backward,
    "torch": torch_silu_and_mul_backward,
}
LIGER = gated_backward_baselines.LIGER_REASON
BACKENDS = {
    **gated_backward_baselines.entries(ours),
    **providers.backends(tilegym=_tilegym, liger=LIGER, liger_cutile=LIGER),
}
unavailable_reason = gated_backward_baselines.reason_for(__name__)
