"""gelu_and_mul_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dgate = dy * up * (s + gate * s * (1 - s) * z'),  dup = dy * gate * s,            (f32 inside)
    s = sigmoid(z),  z = k (gate + 0.044715 gate^3),  k = 2 sqrt(2/pi)   (gelu(g) = g s, the tanh form)

Entries (dy, x) with x = [gate | up] (m, 2H), each writing one (m, 2H) dx = [dgate | dup] as the port
does: ours, ``triton`` and ``cutile`` (one elementwise pass over (m, H) tiles), and ``torch`` (the
kernels autograd of ``F.gelu(gate, approximate="tanh") * up`` runs: dy * up, then aten.gelu_backward
into dgate, and dy * gelu(gate) into dup from the gelu its forward saved): the gated family's fused
entries (tilekit.runtime.gated_backward_baselines). Liger's GEGLU backward writes its gradients into
its inputs (as its swiglu's); TileGym 1.5.1's GEGLU gates the other half (another function of x).
"""

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated_backward_baselines, providers
from tilekit.runtime.gated_backward_baselines import config  # noqa: F401 (BASELINE_CASES' plans)

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "gelu_and_mul_backward"
VARIANTS = ("auto",)
LIGER = (
    "Liger's geglu_backward(a, b, dc) takes gate and up as two tensors and writes their gradients into them "
    "in place: a repeated timed call would run on its own previous gradients"
)
TILEGYM = (
    "TileGym 1.5.1's GEGLU and its backward apply the GELU to the other half, x[:, :H] * gelu(x[:, H:]): "
    "another function of x"
)


def _check_inputs(dy, x) -> None:
    gated_backward_baselines.check_fused(KERNEL, dy, x)


BACKENDS = {
    **gated_backward_baselines.fused_entries(__name__, "gelu_tanh"),
    **providers.backends(tilegym=TILEGYM, liger=LIGER, liger_cutile=LIGER),
}
# the contract's names
cutile_gelu_and_mul_backward, triton_gelu_and_mul_backward, torch_gelu_and_mul_backward = list(BACKENDS.values())[:3]
unavailable_reason = bs.reason_for(__name__)
