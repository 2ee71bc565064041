"""silu_and_mul_backward, the cuTile Rust port of silu_and_mul's gradient (its autograd formula):

    from kernels.silu_and_mul_backward.op import silu_and_mul_backward
    dx = silu_and_mul_backward(dy, x)     # x: (..., 2H) = [gate | up], dy: (..., H) -> dx: (..., 2H)

With s = sigmoid(gate): dgate = dy * up * s * (1 + gate * (1 - s)), dup = dy * gate * s, f32 inside,
written as the halves of dx in x's layout. `cutile_silu_and_mul_backward`
(kernels/silu_and_mul_backward/ffi.rs) through tilekit.runtime.port; `variant="auto"` autotunes (block,
rows, occupancy) over `variants` per dtype and shape class.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import checks, port

# op.py's contract names (tilekit.runtime.kernel): the gated family's gradient's (swiglu_backward's too)
from tilekit.runtime.gated import BACKWARD_DEFAULT_VARIANT as DEFAULT_VARIANT  # noqa: F401
from tilekit.runtime.gated import DTYPES, tune_key  # noqa: F401
from tilekit.runtime.gated import backward_export_args as export_args  # noqa: F401
from tilekit.runtime.gated import backward_variants as variants  # noqa: F401

CDEF = """
int32_t cutile_silu_and_mul_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
                                     int32_t block, int32_t rows, int32_t occupancy,
                                     int32_t device_id, uint64_t stream);
"""


@port.entry(layouts={"dy": "(..., H)", "x": "(..., 2H)"})
def silu_and_mul_backward(dy: Tensor, x: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """dx = (dgate | dup) of silu_and_mul(x) for the output gradient dy (the module docstring);
    ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if x.shape[-1] % 2 or tuple(dy.shape) != (*x.shape[:-1], x.shape[-1] // 2):
        raise ValueError(
            f"silu_and_mul_backward: x must be (..., 2H) and dy (..., H), got x {tuple(x.shape)} and dy {tuple(dy.shape)}"
        )
    checks.dtypes("silu_and_mul_backward", DTYPES, dy=dy, x=x)
    checks.contiguous_last_dim("silu_and_mul_backward", dy=dy, x=x)
    checks.out_matches("silu_and_mul_backward", out, x.shape, x)
    checks.cuda("silu_and_mul_backward", dy=dy, x=x)
    h = dy.shape[-1]
    x2, dy2 = x.reshape(-1, 2 * h), dy.reshape(-1, h)
    dx = out if out is not None else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    dx2 = dx if dx.dim() == 2 else dx.view(-1, 2 * h)
    port.run(__name__, variant, (x2.shape[0], h), dx2, dy2, x2)
    return dx


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple) -> tuple:
    """silu_and_mul's autograd formula: dx from this port. tilekit.runtime.ops registers it as the
    gradient of torch.ops.tilekit.silu_and_mul when that op is defined (the op of kernels/<k>_backward
    gives <k>'s)."""
    (x,) = inputs
    if not needs[0]:
        return (None,)
    dy = grad.contiguous()  # autograd's is; an expanded one (row stride 0) the port would refuse
    return (silu_and_mul_backward.op(dy, x),)
