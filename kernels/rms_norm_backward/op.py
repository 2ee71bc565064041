"""rms_norm_backward, the cuTile Rust port of RMSNorm's gradients (rms_norm's autograd formula):

    from kernels.rms_norm_backward.op import rms_norm_backward
    g = rms_norm_backward(dy, x, weight, eps=1e-6)   # (m, n) = x's rows; g: (m + 1, n)
    dx, dw = g[:-1].view(x.shape), g[-1]

With r = rsqrt(mean(x^2, -1) + eps) per row and x̂ = x * r: dx = r * (w * dy - x̂ * mean(w * dy * x̂, -1)),
dw = the sum over rows of dy * x̂; f32 inside, r recomputed from x. One output holding both (rows
[0, m) dx, row m dw), as every export of the kit writes one `out`: `cutile_rms_norm_backward`
(kernels/rms_norm_backward/ffi.rs) through tilekit.runtime.port. `variant="auto"` autotunes (block,
rows, occupancy, programs, warps) over `variants` per dtype and shape class (the norms' gradient
candidates: tilekit.runtime.norm_backward).
"""

from __future__ import annotations

from torch import Tensor

from tilekit.runtime import norm_backward
from tilekit.runtime.norm_backward import DEFAULT_VARIANT, DTYPES, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_rms_norm_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
                                 const TensorDesc* weight, float eps, int32_t block, int32_t rows,
                                 int32_t occupancy, int32_t programs, int32_t warps,
                                 int32_t device_id, uint64_t stream);
"""

rms_norm_backward = norm_backward.entry(
    __name__, "rms_norm_backward", sums=1, eps=1e-6
)  # (dy, x, weight, eps, *, variant, out)


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple) -> tuple:
    """rms_norm's autograd formula: dx and dw as two views of this port's one (m + 1, n) output (rows
    [0, m) dx, row m dw); none for eps. tilekit.runtime.ops registers it as the gradient of
    torch.ops.tilekit.rms_norm when that op is defined (the op of kernels/<k>_backward gives <k>'s)."""
    x, weight, eps = inputs
    if not (needs[0] or needs[1]):
        return None, None, None
    dy = grad.contiguous()  # autograd's is; an expanded one (row stride 0) the port would refuse
    g = rms_norm_backward.op(dy, x, weight, eps)
    return g[:-1].view(x.shape) if needs[0] else None, g[-1] if needs[1] else None, None
