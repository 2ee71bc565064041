"""gelu_and_mul_backward, the cuTile Rust port of gelu_and_mul's gradient (its autograd formula):

    from kernels.gelu_and_mul_backward.op import gelu_and_mul_backward
    dx = gelu_and_mul_backward(dy, x)     # x: (..., 2H) = [gate | up], dy: (..., H) -> dx: (..., 2H)

With gelu(g) = g * s, s = sigmoid(z), z = k (g + 0.044715 g^3), k = 2 sqrt(2/pi) (the tanh form):
dgate = dy * up * (s + gate * s * (1 - s) * z'(gate)), dup = dy * gelu(gate), f32 inside, written as the
halves of dx in x's layout. `cutile_gelu_and_mul_backward` (kernels/gelu_and_mul_backward/ffi.rs) through
tilekit.runtime.port; `variant="auto"` autotunes (block, rows, occupancy) over `variants` per dtype and
shape class (the gated family's gradient's: tilekit.runtime.gated).
"""

from __future__ import annotations

from tilekit.runtime import gated
from tilekit.runtime.gated_backward import DEFAULT_VARIANT, DTYPES, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_gelu_and_mul_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x, int32_t block,
    int32_t rows, int32_t occupancy, int32_t device_id, uint64_t stream);
"""

# the entry gelu_and_mul_backward(dy, x, *, variant="auto", out=None), and gelu_and_mul's autograd formula, which
# tilekit.runtime.ops registers as the gradient of torch.ops.tilekit.gelu_and_mul
gelu_and_mul_backward = gated.fused_backward_entry(__name__, "gelu_and_mul_backward", "gelu_tanh")
forward_gradients = gated.fused_backward_gradients(gelu_and_mul_backward)
