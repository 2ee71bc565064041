"""layer_norm_backward, the cuTile Rust port of LayerNorm's gradients (layer_norm's autograd formula):

    from kernels.layer_norm_backward.op import layer_norm_backward
    g = layer_norm_backward(dy, x, weight, eps=1e-5)   # (m, n) = x's rows; g: (m + 2, n)
    dx, dw, db = g[:-2].view(x.shape), g[-2], g[-1]

With x̄ = mean(x, -1), r = rsqrt(mean((x - x̄)^2, -1) + eps) per row, x̂ = (x - x̄) * r and g = w * dy:
dx = r * (g - x̂ * mean(g * x̂, -1) - mean(g, -1)), dw = the sum over rows of dy * x̂, db = that of dy;
f32 inside, x̄ and r recomputed from x. The bias does not enter them; a LayerNorm without a weight
passes ones (w = 1). One output holding the three (rows [0, m) dx, row m dw, row m + 1 db), as every
export of the kit writes one `out`: `cutile_layer_norm_backward` (kernels/layer_norm_backward/ffi.rs)
through tilekit.runtime.port. `variant="auto"` autotunes (block, rows, occupancy, programs, warps)
over `variants` per dtype and shape class (the norms' gradient candidates: tilekit.runtime.norm_backward).
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import norm_backward
from tilekit.runtime.norm_backward import DEFAULT_VARIANT, DTYPES, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_layer_norm_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x, const TensorDesc* weight,
    float eps, int32_t block, int32_t rows, int32_t occupancy, int32_t programs, int32_t warps, int32_t device_id, uint64_t stream);
"""

layer_norm_backward = norm_backward.entry(
    __name__, "layer_norm_backward", sums=2, eps=1e-5
)  # (dy, x, weight, eps, *, variant, out)


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple) -> tuple:
    """layer_norm's autograd formula: dx, dw and db as views of this port's one (m + 2, n) output
    (rows [0, m) dx, m dw, m + 1 db); none for eps, nor for an absent weight or bias (a weight of
    None is ones here). tilekit.runtime.ops registers it as the gradient of torch.ops.tilekit.layer_norm
    when that op is defined (the op of kernels/<k>_backward gives <k>'s)."""
    x, weight, bias, eps = inputs
    if not any(needs[:3]):
        return None, None, None, None
    w = weight if weight is not None else torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
    dy = grad.contiguous()  # autograd's is; an expanded one (row stride 0) the port would refuse
    g = layer_norm_backward.op(dy, x, w, eps)
    dx = g[:-2].view(x.shape) if needs[0] else None
    return (
        dx,
        g[-2] if needs[1] and weight is not None else None,
        g[-1] if needs[2] and bias is not None else None,
        None,
    )
