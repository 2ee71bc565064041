"""fused_add_rms_norm_backward, the cuTile Rust port of fused_add_rms_norm's gradients (its autograd formula):

    from kernels.fused_add_rms_norm_backward.op import fused_add_rms_norm_backward
    g = fused_add_rms_norm_backward(dy, dresidual, s, weight, eps=1e-6)   # (m, n) = s's rows; g: (m + 1, n)
    dx, dw = g[:-1].view(s.shape), g[-1]                                  # dresidual_in = dx

For the forward s = x + residual, y = ŝ * w with r = rsqrt(mean(s^2, -1) + eps) and ŝ = s * r, the
gradient dy of y and dresidual of s (the residual stream's): dx = r * (w * dy - ŝ * mean(w * dy * ŝ, -1))
+ dresidual, which is also residual's gradient, and dw = the sum over rows of dy * ŝ; f32 inside, r
recomputed from s. One output (rows [0, m) dx, row m dw): `cutile_fused_add_rms_norm_backward`
(kernels/fused_add_rms_norm_backward/ffi.rs), RMSNorm's gradient kernels with the residual's gradient added
in the same pass (cutile_kernels/src/norm_backward.rs). `variant="auto"` autotunes as rms_norm_backward
(the norms' gradient candidates: tilekit.runtime.norm_backward).
"""

from __future__ import annotations

from torch import Tensor

from tilekit.runtime import norm_backward
from tilekit.runtime.norm_backward import DEFAULT_VARIANT, DTYPES, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_fused_add_rms_norm_backward(const TensorDesc* out, const TensorDesc* dy,
                                           const TensorDesc* dresidual, const TensorDesc* s,
                                           const TensorDesc* weight, float eps, int32_t block,
                                           int32_t rows, int32_t occupancy, int32_t programs,
                                           int32_t warps, int32_t device_id, uint64_t stream);
"""

fused_add_rms_norm_backward = norm_backward.entry(
    __name__, "fused_add_rms_norm_backward", sums=1, eps=1e-6, added=True
)  # (dy, dresidual, s, weight, eps, *, variant, out)


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple, output: Tensor) -> tuple:
    """fused_add_rms_norm's autograd formula: its output is (2, ..., n), y then s, and so is `grad`
    (dy, then the residual stream's gradient of s); dx (x's and residual's gradient, one tensor) and
    dw as views of this port's one (m + 1, n) output; none for eps. tilekit.runtime.ops registers it
    when fused_add_rms_norm's op is defined (and saves the forward's output for it: s is its second plane)."""
    x, _residual, weight, eps = inputs
    if not (needs[0] or needs[1] or needs[2]):
        return None, None, None, None
    grad = grad.contiguous()  # autograd's is; an expanded one (stride 0) the port would refuse
    g = fused_add_rms_norm_backward.op(grad[0], grad[1], output[1], weight, eps)
    dx = g[:-1].view(x.shape)
    return dx if needs[0] else None, dx if needs[1] else None, g[-1] if needs[2] else None, None
