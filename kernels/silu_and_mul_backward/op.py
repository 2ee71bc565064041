"""silu_and_mul_backward, the cuTile Rust port of silu_and_mul's gradient (its autograd formula):

    from kernels.silu_and_mul_backward.op import silu_and_mul_backward
    dx = silu_and_mul_backward(dy, x)     # x: (..., 2H) = [gate | up], dy: (..., H) -> dx: (..., 2H)

With s = sigmoid(gate): dgate = dy * up * s * (1 + gate * (1 - s)), dup = dy * gate * s, f32 inside,
written as the halves of dx in x's layout. `cutile_silu_and_mul_backward` (kernels/silu_and_mul_backward/ffi.rs) through
tilekit.runtime.port; `variant="auto"` autotunes (block, rows, occupancy) over `variants` per dtype and
shape class (the gated family's gradient's: tilekit.runtime.gated).
"""

from __future__ import annotations

from tilekit.runtime import gated
from tilekit.runtime.gated_backward import DEFAULT_VARIANT, DTYPES, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_silu_and_mul_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
                                     int32_t block, int32_t rows, int32_t occupancy,
                                     int32_t device_id, uint64_t stream);
"""

# the entry silu_and_mul_backward(dy, x, *, variant="auto", out=None), and silu_and_mul's autograd formula, which
# tilekit.runtime.ops registers as the gradient of torch.ops.tilekit.silu_and_mul
silu_and_mul_backward = gated.fused_backward_entry(__name__, "silu_and_mul_backward", "silu")
forward_gradients = gated.fused_backward_gradients(silu_and_mul_backward)
