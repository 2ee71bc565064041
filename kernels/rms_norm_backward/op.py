"""rms_norm_backward, the cuTile Rust port of RMSNorm's gradients (rms_norm's autograd formula):

    from kernels.rms_norm_backward.op import rms_norm_backward
    g = rms_norm_backward(dy, x, weight, eps=1e-6)   # (m, n) = x's rows; g: (m + 1, n)
    dx, dw = g[:-1].view(x.shape), g[-1]

With r = rsqrt(mean(x^2, -1) + eps) per row and x̂ = x * r: dx = r * (w * dy - x̂ * mean(w * dy * x̂, -1)),
dw = the sum over rows of dy * x̂; f32 inside, r recomputed from x. One output holding both (rows
[0, m) dx, row m dw), as every export of the kit writes one `out`: `cutile_rms_norm_backward`
(kernels/rms_norm_backward/ffi.rs) through tilekit.runtime.port. `variant="auto"` autotunes (block,
rows, occupancy, programs, warps) over `variants` per dtype and shape class.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import autotune, checks, port
from tilekit.runtime.autotune import row_tune_key as tune_key  # noqa: F401 (op.py's contract name)

CDEF = """
int32_t cutile_rms_norm_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
                                 const TensorDesc* weight, float eps, int32_t block, int32_t rows,
                                 int32_t occupancy, int32_t programs, int32_t warps,
                                 int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1, "programs_per_sm": 0, "warps": -1}  # ffi.rs picks
MAX_BLOCK = 16384  # ffi.rs: the rows are held whole


def export_args(block: int, rows: int, occupancy: int, programs_per_sm: int, warps: int, *, sms: int) -> tuple:
    """(block, rows, occupancy, programs, warps): programs_per_sm > 0 is a grid of that many tile blocks
    an SM, 0 ffi.rs's default (2 an SM).

    >>> export_args(4096, 1, 2, 2, 8, sms=132), export_args(-1, -1, -1, 0, -1, sms=132)
    ((4096, 1, 2, 264, 8), (-1, -1, -1, -1, -1))
    """
    programs = programs_per_sm * sms if programs_per_sm > 0 else -1
    return int(block), int(rows), int(occupancy), int(programs), int(warps)


def check_size(n: int) -> None:
    """ValueError for rows the kernel cannot hold whole (ffi.rs refuses them alike)."""
    if n > MAX_BLOCK:
        raise ValueError(
            f"rms_norm_backward: rows of at most {MAX_BLOCK} elements (the backward holds a row whole), got n = {n}"
        )


def variants(m: int, n: int) -> list[dict]:
    """Whole rows (block the power of two >= n) of 1 K-4 K elements per tile, over 4 and 8 warps, at 1
    and 2 tile blocks an SM (each tile block adds a row of partial dw sums to the second pass):

    >>> [(v["rows"], v["warps"], v["programs_per_sm"]) for v in variants(16384, 4096)]
    [(1, 4, 1), (1, 4, 2), (1, 8, 1), (1, 8, 2)]
    >>> sorted({v["rows"] for v in variants(16384, 1024)}), len(variants(8, 1024))
    ([1, 2, 4], 8)
    """
    block = 1 << max(4, (n - 1).bit_length())
    if block > MAX_BLOCK:
        return [dict(DEFAULT_VARIANT)]  # the entry refuses it first (check_size)
    rows_each = sorted({autotune.tile_rows(block, elems, min(64, autotune.pow2(m))) for elems in (1024, 2048, 4096)})
    return [
        {"block": block, "rows": r, "occupancy": -1, "programs_per_sm": p, "warps": w}
        for r in rows_each
        for w in (4, 8)
        for p in (1, 2)
        if r * block <= MAX_BLOCK and (r == 1 or w == 4)  # several rows: the 4-warp tile only
    ]


@port.entry(layouts={"dy": "(..., n)", "x": "(..., n)", "weight": "(n,)"})
def rms_norm_backward(
    dy: Tensor, x: Tensor, weight: Tensor, eps: float = 1e-6, *, variant: str | dict = "auto", out: Tensor | None = None
) -> Tensor:
    """dx and dw of rms_norm(x, weight, eps) for the output gradient dy, as one (m + 1, n) tensor (the
    module docstring); ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    n = x.shape[-1]
    if dy.shape != x.shape:
        raise ValueError(f"rms_norm_backward: dy must have x's shape {tuple(x.shape)}, got {tuple(dy.shape)}")
    if weight.shape[0] != n:
        raise ValueError(
            f"rms_norm_backward: weight must be ({n},) for x of shape {tuple(x.shape)}, got {tuple(weight.shape)}"
        )
    check_size(n)
    checks.dtypes("rms_norm_backward", DTYPES, dy=dy, x=x, weight=weight)
    checks.contiguous_last_dim("rms_norm_backward", dy=dy, x=x)
    x2, dy2 = x.reshape(-1, n), dy.reshape(-1, n)
    m = x2.shape[0]
    checks.out_matches("rms_norm_backward", out, (m + 1, n), x)
    checks.cuda("rms_norm_backward", dy=dy, x=x, weight=weight)
    g = out if out is not None else torch.empty((m + 1, n), dtype=x.dtype, device=x.device)
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
