"""swiglu_backward, the cuTile Rust port of swiglu's gradient (its autograd formula):

    from kernels.swiglu_backward.op import swiglu_backward
    g = swiglu_backward(dy, a, b)     # a, b, dy: (..., H) -> g: (2m, H), m = a's rows
    da, db = g[:m].view(a.shape), g[m:].view(b.shape)

With s = sigmoid(a): da = dy * b * s * (1 + a * (1 - s)), db = dy * a * s, f32 inside, one pass
(the gated family's gradient entry, cutile_kernels/src/gated_backward.rs). One output holding both (rows
[0, m) da, rows [m, 2m) db), as every export of the kit writes one `out`: `cutile_swiglu_backward`
through tilekit.runtime.port; `variant="auto"` autotunes (block, rows, occupancy) over
the gated family's gradient candidates (tilekit.runtime.gated.backward_variants: silu_and_mul_backward's,
the same tiles over the same bytes).
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import checks, port

from tilekit.runtime.gated_backward import DEFAULT_VARIANT, DTYPES, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_swiglu_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* a,
                               const TensorDesc* b, int32_t block, int32_t rows, int32_t occupancy,
                               int32_t device_id, uint64_t stream);
"""


@port.entry(layouts={"dy": "(..., H)", "a": "(..., H)", "b": "(..., H)"})
def swiglu_backward(
    dy: Tensor, a: Tensor, b: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None
) -> Tensor:
    """da and db of swiglu(a, b) for the output gradient dy, as one (2m, H) tensor (the module
    docstring); ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if not (a.shape == b.shape == dy.shape):
        raise ValueError(
            f"swiglu_backward: dy, a and b must have one shape (..., H), got {tuple(dy.shape)}, "
            f"{tuple(a.shape)} and {tuple(b.shape)}"
        )
    checks.dtypes("swiglu_backward", DTYPES, dy=dy, a=a, b=b)
    checks.contiguous_last_dim("swiglu_backward", dy=dy, a=a, b=b)
    h = a.shape[-1]
    a2, b2, dy2 = (t.reshape(-1, h) for t in (a, b, dy))
    checks.out_matches("swiglu_backward", out, (2 * a2.shape[0], h), a)
    checks.cuda("swiglu_backward", dy=dy, a=a, b=b)
    g = out if out is not None else torch.empty((2 * a2.shape[0], h), dtype=a.dtype, device=a.device)
    port.run(__name__, variant, (a2.shape[0], h), g, dy2, a2, b2)
    return g


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple) -> tuple:
    """swiglu's autograd formula: da and db as two views of this port's one (2m, H) output.
    tilekit.runtime.ops registers it as the gradient of torch.ops.tilekit.swiglu when that op is
    defined (the op of kernels/<k>_backward gives <k>'s)."""
    a, b = inputs
    if not (needs[0] or needs[1]):
        return None, None
    dy = grad.contiguous()  # autograd's is; an expanded one (row stride 0) the port would refuse
    g = swiglu_backward.op(dy, a, b)
    m = g.shape[0] // 2
    return g[:m].view(a.shape) if needs[0] else None, g[m:].view(b.shape) if needs[1] else None
