"""rms_norm_backward, the cuTile Rust port of RMSNorm's gradients (rms_norm's autograd formula):

    from kernels.rms_norm_backward.op import rms_norm_backward
    g = rms_norm_backward(dy, x, weight, eps=1e-6)   # (m, n) = x's rows; g: (m + 1, n)
    dx, dw = g[:-1].view(x.shape), g[-1]

With r = rsqrt(mean(x^2, -1) + eps) per row and x̂ = x * r: dx = r * (w * dy - x̂ * mean(w * dy * x̂, -1)),
dw = the sum over rows of dy * x̂; f32 inside, r recomputed from x. One output holding both (rows
[0, m) dx, row m dw), as every export of the kit writes one `out`: `cutile_rms_norm_backward`
(kernels/rms_norm_backward/ffi.rs) through tilekit.runtime.port. `variant="auto"` autotunes (block,
rows, occupancy, programs, warps) over `variants` per dtype and shape class (the norms' gradient
candidates: tilekit.runtime.norm).
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import norm, port
from tilekit.runtime.autotune import row_tune_key as tune_key  # noqa: F401 (op.py's contract name)
from tilekit.runtime.norm import BACKWARD_DEFAULT_VARIANT as DEFAULT_VARIANT  # noqa: F401 (the contract's)
from tilekit.runtime.norm import DTYPES  # noqa: F401 (the contract's)
from tilekit.runtime.norm import backward_export_args as export_args  # noqa: F401 (the contract's)
from tilekit.runtime.norm import backward_variants as variants  # noqa: F401 (the contract's)

CDEF = """
int32_t cutile_rms_norm_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
                                 const TensorDesc* weight, float eps, int32_t block, int32_t rows,
                                 int32_t occupancy, int32_t programs, int32_t warps,
                                 int32_t device_id, uint64_t stream);
"""


def check_size(n: int) -> None:
    """ValueError for rows the kernel cannot hold whole (ffi.rs refuses them alike)."""
    norm.check_backward_size("rms_norm_backward", n)


@port.entry(layouts={"dy": "(..., n)", "x": "(..., n)", "weight": "(n,)"})
def rms_norm_backward(
    dy: Tensor, x: Tensor, weight: Tensor, eps: float = 1e-6, *, variant: str | dict = "auto", out: Tensor | None = None
) -> Tensor:
    """dx and dw of rms_norm(x, weight, eps) for the output gradient dy, as one (m + 1, n) tensor (the
    module docstring); ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    dy2, x2 = norm.backward_rows("rms_norm_backward", dy, x, weight, out, sums=1)
    (m, n), g = x2.shape, out
    if g is None:
        g = torch.empty((m + 1, n), dtype=x.dtype, device=x.device)
    port.run(__name__, variant, (m, n), g, dy2, x2, weight, float(eps))
    return g


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
