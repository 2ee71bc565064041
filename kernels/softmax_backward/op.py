"""softmax_backward, the cuTile Rust port of softmax's gradient (its autograd formula):

    from kernels.softmax_backward.op import softmax_backward
    dx = softmax_backward(dy, y)     # y = softmax(x) over the last dim, dy: its gradient; (..., n)

dx = y * (dy - sum(y * dy, -1)), f32 inside, from the forward's output y (as PyTorch's softmax
backward takes it). `cutile_softmax_backward` (kernels/softmax_backward/ffi.rs) through
tilekit.runtime.port; `variant="auto"` autotunes (block, rows, occupancy) over `variants` per dtype
and shape class: whole rows held in registers, or for wide rows column tiles read twice.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import autotune, checks, port
from tilekit.runtime.autotune import row_tune_key as tune_key  # noqa: F401 (op.py's contract name)

CDEF = """
int32_t cutile_softmax_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* y,
                                int32_t block, int32_t rows, int32_t occupancy,
                                int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1}  # ffi.rs picks
MAX_TILE_ELEMS = 16384  # ffi.rs: two f32 tiles in registers


def export_args(block: int, rows: int, occupancy: int) -> tuple[int, int, int]:
    """A variant's arguments of the export: (block, rows, occupancy)."""
    return int(block), int(rows), int(occupancy)


def variants(m: int, n: int) -> list[dict]:
    """Whole rows (block the power of two >= n, up to 16384) in tiles of 2 K-8 K elements, and for
    rows past 4096 column tiles of 2048 and 4096 read twice (ffi.rs's default past 8192):

    >>> [(v["block"], v["rows"]) for v in variants(16384, 4096)]
    [(4096, 1), (4096, 2)]
    >>> [(v["block"], v["rows"]) for v in variants(4096, 128256)], len(variants(64, 100))
    ([(4096, 1), (2048, 1)], 3)
    """
    whole = autotune.pow2(max(n, 16))
    max_rows = min(64, autotune.pow2(m))
    picks = []
    if whole <= MAX_TILE_ELEMS:
        picks += sorted({(whole, autotune.tile_rows(whole, elems, max_rows)) for elems in (2048, 4096, 8192)})
    if n > 4096:
        picks += [(4096, 1), (2048, 1)]
    seen = list(dict.fromkeys(p for p in picks if p[0] * p[1] <= MAX_TILE_ELEMS))
    return [{"block": b, "rows": r, "occupancy": -1} for b, r in seen]


@port.entry(layouts={"dy": "(..., n)", "y": "(..., n)"})
def softmax_backward(dy: Tensor, y: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """dx of softmax for its output y and output gradient dy (the module docstring); ValueError/TypeError
    on bad input, ffi.KernelError on a failed call."""
    if dy.shape != y.shape:
        raise ValueError(f"softmax_backward: dy must have y's shape {tuple(y.shape)}, got {tuple(dy.shape)}")
    checks.dtypes("softmax_backward", DTYPES, dy=dy, y=y)
    checks.contiguous_last_dim("softmax_backward", dy=dy, y=y)
    checks.out_matches("softmax_backward", out, y.shape, y)
    checks.cuda("softmax_backward", dy=dy, y=y)
    n = y.shape[-1]
    y2, dy2 = y.reshape(-1, n), dy.reshape(-1, n)
    dx = out if out is not None else torch.empty(y.shape, dtype=y.dtype, device=y.device)
    dx2 = dx if dx.dim() == 2 else dx.view(-1, n)
    port.run(__name__, variant, (y2.shape[0], n), dx2, dy2, y2)
    return dx


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple, output: Tensor) -> tuple:
    """softmax's autograd formula: dx from this port and the forward's output y (tilekit.runtime.ops
    saves it for backward, as this function asks for `output`). tilekit.runtime.ops registers it as
    the gradient of torch.ops.tilekit.softmax when that op is defined (the op of kernels/<k>_backward
    gives <k>'s)."""
    if not needs[0]:
        return (None,)
    dy = grad.contiguous()  # autograd's is; an expanded one (row stride 0) the port would refuse
    return (softmax_backward.op(dy, output),)
