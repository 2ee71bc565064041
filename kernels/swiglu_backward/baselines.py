"""swiglu_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    da = dy * b * s * (1 + a * (1 - s)),  db = dy * a * s,  s = sigmoid(a)      (f32 inside)

Entries (dy, a, b), each writing one (2m, H) output (da's rows, then db's) as the port does: ours,
``triton_swiglu_backward`` and ``cutile_swiglu_backward`` (one elementwise pass), and
``torch_swiglu_backward`` (the kernels autograd of ``F.silu(a) * b`` runs): the gated family's
(tilekit.runtime.gated_backward_baselines). TileGym's cuTile backward returns (da, db) apart (checked
stacked: tilekit.runtime.kernel.stacked).
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated_backward_baselines
from tilekit.runtime import providers
from tilekit.runtime.gated_backward_baselines import config  # noqa: F401 (BASELINE_CASES' plans)
from tilekit.runtime.norm_baselines import DTYPES

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "swiglu_backward"
VARIANTS = ("auto",)


def _check_inputs(dy, a, b) -> None:
    for name, t in (("a", a), ("b", b), ("dy", dy)):
        bs.check_matrix(KERNEL, name, t, DTYPES, "(m, H)")
    if not (a.shape == b.shape == dy.shape) or not (a.dtype == b.dtype == dy.dtype):
        raise ValueError(
            f"{KERNEL} baseline: dy, a and b must share one shape and dtype, got {tuple(dy.shape)} {dy.dtype}, "
            f"{tuple(a.shape)} {a.dtype}, {tuple(b.shape)} {b.dtype}"
        )


def _into_rows(run, dy, a, b):
    """(2m, H) = [da; db] from run(dy, a, b, da, db)."""
    _check_inputs(dy, a, b)
    out = torch.empty((2 * a.shape[0], a.shape[1]), dtype=a.dtype, device=a.device)
    run(dy, a, b, out[: a.shape[0]], out[a.shape[0] :])
    return out


def triton_swiglu_backward(dy: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, variant="auto") -> torch.Tensor:
    """swiglu's gradient with our Triton kernel: (2m, H)."""
    bs.require(triton, unavailable_reason, "triton")
    bs.check_variant(KERNEL, variant, VARIANTS)
    return _into_rows(lambda *views: gated_backward_baselines.launch("triton", *views), dy, a, b)


def cutile_swiglu_backward(dy: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, variant="auto") -> torch.Tensor:
    """swiglu's gradient with our cuTile Python kernel: (2m, H)."""
    bs.require(ct, unavailable_reason, "cutile")
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require_cuda(KERNEL, "a", a)
    return _into_rows(lambda *views: gated_backward_baselines.launch("cutile", *views), dy, a, b)


def torch_swiglu_backward(dy: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The kernels autograd of F.silu(a) * b runs, into the two row blocks of one (2m, H) output."""
    return _into_rows(
        lambda dy, a, b, da, db: gated_backward_baselines.torch_kernels(dy, a, b, da, db, a, act="silu"), dy, a, b
    )


def _tilegym(ops, dy, a, b):
    """TileGym 1.5.1's cuTile swiglu backward (what its autograd function runs): (da, db)."""
    return providers.submodule(ops, "cutile.swiglu")._swiglu_backward(dy, a, b)


ours = {"cutile": cutile_swiglu_backward, "triton": triton_swiglu_backward, "torch": torch_swiglu_backward}
LIGER = gated_backward_baselines.LIGER_REASON
BACKENDS = {
    **gated_backward_baselines.entries(ours),
    **providers.backends(tilegym=_tilegym, liger=LIGER, liger_cutile=LIGER),
}
unavailable_reason = bs.reason_for(__name__)
