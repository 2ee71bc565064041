"""rope_backward, the cuTile Rust port of rope's gradient (its autograd formula):

    from kernels.rope_backward.op import rope_backward
    g = rope_backward(dq, dk, cos, sin, position_ids=None, heads_first=False)   # (b, s, hq + hk, d)

The rotation is orthogonal, so the gradient of y = R(θ) x is R(-θ) dy: per token and head, with
(c, s) the token's table row, dx = (dy1 c + dy2 s, dy2 c - dy1 s). dq (b, s, hq, d) and dk (b, s, hk,
d) (or (b, h, s, d) with heads_first), the tables and position ids as rope takes them (kernels/rope/op.py);
one output in dq's layout, q's gradient in its first hq heads and k's after them. `cutile_rope_backward`
(kernels/rope_backward/ffi.rs) is rope's launch with the sign of the rotation flipped; `variant="auto"`
autotunes rope's hints. No gradient reaches cos and sin (a model's tables are constants, made under
no_grad): asking for one is a ValueError.
"""

from __future__ import annotations

from torch import Tensor

from kernels.rope import op as rope_op
from kernels.rope.op import DEFAULT_VARIANT, DTYPES, export_args, tune_key, variants  # noqa: F401
from tilekit.runtime import port

CDEF = """
int32_t cutile_rope_backward(const TensorDesc* out, const TensorDesc* dq, const TensorDesc* dk,
                             const TensorDesc* cos, const TensorDesc* sin, const TensorDesc* positions,
                             int32_t heads_first, int32_t occupancy, int32_t warps, int32_t heads,
                             int32_t device_id, uint64_t stream);
"""

KERNEL = "rope_backward"


@port.entry(layouts={"dq": "(b, s, hq, d)", "dk": "(b, s, hk, d)", "cos": "(..., rows, w)", "sin": "(..., rows, w)"})
def rope_backward(
    dq: Tensor,
    dk: Tensor,
    cos: Tensor,
    sin: Tensor,
    position_ids: Tensor | None = None,
    heads_first: bool = False,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """rope's gradient of q and k as one (b, s, hq + hk, d) tensor ((b, hq + hk, s, d) with
    heads_first); ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    return rope_op.rotated(__name__, KERNEL, ("dq", "dk"), dq, dk, cos, sin, position_ids, heads_first, variant, out)


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple) -> tuple:
    """rope's autograd formula: the gradient of its one output split into q's and k's heads, rotated
    back in one launch; dq and dk are views of this port's one output. None for the position ids and
    heads_first; a ValueError where cos or sin needs a gradient."""
    q, _k, cos, sin, position_ids, heads_first = inputs
    if needs[2] or needs[3]:
        raise ValueError(
            "rope: no gradient for cos and sin (a model's rotary tables are constants); pass them detached"
        )
    if not (needs[0] or needs[1]):
        return None, None, None, None, None, None
    if grad.stride(-1) != 1:  # an expanded gradient (of a sum): the port needs the last dim contiguous
        grad = grad.contiguous()
    head = 1 if heads_first else 2
    hq = q.shape[head]
    g = rope_backward.op(
        grad.narrow(head, 0, hq), grad.narrow(head, hq, grad.shape[head] - hq), cos, sin, position_ids, heads_first
    )
    dq, dk = g.narrow(head, 0, hq), g.narrow(head, hq, g.shape[head] - hq)
    return dq if needs[0] else None, dk if needs[1] else None, None, None, None, None
