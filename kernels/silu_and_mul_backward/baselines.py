"""silu_and_mul_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dgate = dy * up * s * (1 + gate * (1 - s)),  dup = dy * gate * s,  s = sigmoid(gate)   (f32 inside)

Entries (dy, x) with x = [gate | up] (m, 2H), each writing one (m, 2H) dx = [dgate | dup] as the port
does: ours, ``triton`` and ``cutile`` (one elementwise pass over (m, H) tiles), and ``torch`` (the
kernels autograd of ``F.silu(gate) * up`` runs: dy * up, then aten.silu_backward into dgate, and
dy * silu(gate) into dup from the silu its forward saved): the gated family's fused entries
(tilekit.runtime.gated_backward_baselines). TileGym's cuTile backward returns (dgate, dup) apart
(checked side by side: tilekit.runtime.kernel.stacked).
"""

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated_backward_baselines, providers
from tilekit.runtime.gated_backward_baselines import config  # noqa: F401 (BASELINE_CASES' plans)

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "silu_and_mul_backward"
VARIANTS = ("auto",)


def _check_inputs(dy, x) -> None:
    gated_backward_baselines.check_fused(KERNEL, dy, x)


def _tilegym(ops, dy, x):
    """TileGym 1.5.1's cuTile silu_and_mul backward (what its autograd function runs, recomputing the
    activation from x): (dgate, dup)."""
    return providers.submodule(ops, "cutile.silu_and_mul")._silu_and_mul_backward(dy, x)


LIGER = gated_backward_baselines.LIGER_REASON
BACKENDS = {
    **gated_backward_baselines.fused_entries(__name__, "silu"),
    **providers.backends(tilegym=_tilegym, liger=LIGER, liger_cutile=LIGER),
}
# the contract's names
cutile_silu_and_mul_backward, triton_silu_and_mul_backward, torch_silu_and_mul_backward = list(BACKENDS.values())[:3]
unavailable_reason = bs.reason_for(__name__)
