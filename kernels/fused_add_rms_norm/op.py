"""fused_add_rms_norm, the cuTile Rust port of the residual add + RMSNorm between decoder blocks:

    from kernels.fused_add_rms_norm.op import fused_add_rms_norm, fused_add_rms_norm_
    y, s = fused_add_rms_norm(x, residual, weight, eps=1e-6)   # s = x + residual, y = rms_norm(s) * weight
    fused_add_rms_norm_(x, residual, weight, eps=1e-6)         # in place: residual <- s, x <- y

x and residual (..., n) CUDA f16/bf16/f32 of one shape, weight (n,), n <= 16384 (the row is held
whole). s is x + residual rounded to the dtype, as stored, and y is the RMSNorm of that stored s
(what rms_norm(s, weight) gives). Both calls run `cutile_fused_add_rms_norm` (kernels/fused_add_rms_norm/ffi.rs),
one pass over the rows reading x, residual and weight and writing y and s:

- `fused_add_rms_norm` is functional (Liger's form, the kit's one output): a (2, ..., n) tensor
  holding y then s, so `y, s = ...` unpacks it into two views. It is the op
  torch.ops.tilekit.fused_add_rms_norm, with its gradient (kernels/fused_add_rms_norm_backward:
  dx = dresidual, one pass; dw).
- `fused_add_rms_norm_` is the in-place form a serving engine calls between layers (vLLM's and
  FlashInfer's): s into residual, y into x; nothing allocated. Inference only (it refuses inputs that
  require grad: use the functional form to train). It is the op torch.ops.tilekit.fused_add_rms_norm_
  (mutating x and residual), so a compiled model keeps it whole.

`variant="auto"` autotunes (block, rows, occupancy, warps, tail) over `variants` per dtype and shape class
(both forms share the picks of a shape class).
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import autotune, checks, ops, port
from tilekit.runtime.autotune import row_tune_key as tune_key  # noqa: F401 (op.py's contract name)

CDEF = """
int32_t cutile_fused_add_rms_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* residual,
                                  const TensorDesc* weight, float eps, int32_t block, int32_t rows,
                                  int32_t occupancy, int32_t warps, int32_t tail, int32_t device_id,
                                  uint64_t stream);
"""

KERNEL = "fused_add_rms_norm"
DTYPES = ("float16", "bfloat16", "float32")
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1, "warps": -1}  # ffi.rs picks (no tail)
MAX_BLOCK = 16384  # ffi.rs: the row is held whole


def export_args(block: int, rows: int, occupancy: int = -1, warps: int = -1, tail: int = -1) -> tuple[int, ...]:
    """A variant's arguments of the export, (block, rows, occupancy, warps, tail). Pure."""
    return int(block), int(rows), int(occupancy), int(warps), int(tail)


def variants(m: int, n: int) -> list[dict]:
    """Whole-row tiles (block the power of two >= n) of 4 K, 8 K and 16 K elements per tile block at
    occupancy 4 and 2 (rms_norm's space, NOTES.md), and for decode batches (m <= 512) one-row tiles at
    occupancy 2 and two-row ones at 4, whose first loads issue at once; rows held in a tile of 4096
    or more (n > 2048) also one-row tiles over 8 warps at occupancy 2 (half the values a thread of
    the compiler's 4 warps: twice the loads in flight an SM where a decode batch leaves SMs idle,
    NOTES.md). Rows a power of two holds with a quarter or more of its lanes idle
    (`autotune.body_and_tail`: 5120 in 8192) also get a body and a tail tile (4096 + 1024), one row
    a tile block (ffi.rs refuses more: NOTES.md, "The three losers"), at occupancy 4 and 2 and over
    8 warps at 2:

    >>> [(v["rows"], v["occupancy"], v["warps"]) for v in variants(16384, 4096)]
    [(1, 4, -1), (2, 4, -1), (2, 2, -1), (4, 2, -1), (1, 2, 8)]
    >>> [(v["rows"], v["occupancy"]) for v in variants(256, 2048)], variants(8, 32768)
    ([(2, 4), (4, 4), (4, 2), (8, 2), (1, 2)], [{'block': -1, 'rows': -1, 'occupancy': -1, 'warps': -1}])
    >>> [(v["block"], v.get("tail"), v["rows"], v["occupancy"]) for v in variants(19, 8195)][:3]  # no 2 x 16384 tile
    [(16384, None, 1, 4), (16384, None, 1, 2), (16384, None, 1, 2)]
    >>> [(v["block"], v.get("tail"), v["rows"], v["occupancy"], v["warps"]) for v in variants(19, 8195)][3:]
    [(8192, 16, 1, 4, -1), (8192, 16, 1, 2, -1), (8192, 16, 1, 2, 8)]
    >>> [(v["block"], v.get("tail"), v["rows"], v["occupancy"], v["warps"]) for v in variants(16384, 5120)][-3:]
    [(4096, 1024, 1, 4, -1), (4096, 1024, 1, 2, -1), (4096, 1024, 1, 2, 8)]
    """
    block = max(16, autotune.pow2(n))
    if block > MAX_BLOCK:
        return [dict(DEFAULT_VARIANT)]  # the entry refuses it first (check_size)
    max_rows = min(64, autotune.pow2(m))
    shapes = [
        (autotune.tile_rows(block, elems, max_rows), o, -1)
        for elems, o in ((4096, 4), (8192, 4), (8192, 2), (16384, 2))
    ]
    shapes += [(1, 2, -1), (min(2, max_rows), 4, -1)] if m <= 512 else []
    shapes += [(1, 2, 8)] if block >= 4096 else []
    out = [{"block": block, "rows": r, "occupancy": o, "warps": w} for r, o, w in shapes if r * block <= MAX_BLOCK]
    split = autotune.body_and_tail(n)
    if split:
        body, tail = split
        out += [
            {"block": body, "tail": tail, "rows": 1, "occupancy": o, "warps": w} for o, w in ((4, -1), (2, -1), (2, 8))
        ]
    return autotune.unique(out)


I32_MAX = 2**31 - 1


def check_size(m: int, n: int) -> None:
    """ValueError for rows the kernel cannot hold whole, and for more rows than its i32 offsets reach
    (up to the last lane of a padded 64-row tile of contiguous rows; ffi.rs refuses them alike)."""
    if n > MAX_BLOCK:
        raise ValueError(f"{KERNEL}: rows of at most {MAX_BLOCK} elements (the row is held whole), got n = {n}")
    if (-(-m // 64) * 64 - 1) * n + autotune.pow2(n) > I32_MAX:
        raise ValueError(
            f"{KERNEL}: {m} rows of {n} reach past 2^31 elements (the kernel's offsets are i32); "
            f"split the rows into calls of at most {(I32_MAX - autotune.pow2(n)) // n // 64 * 64} rows"
        )


def _check(x: Tensor, residual: Tensor, weight: Tensor) -> None:
    if residual.shape != x.shape:
        raise ValueError(f"{KERNEL}: residual must have x's shape {tuple(x.shape)}, got {tuple(residual.shape)}")
    if weight.shape[0] != x.shape[-1]:
        raise ValueError(
            f"{KERNEL}: weight must be ({x.shape[-1]},) for x of shape {tuple(x.shape)}, got {tuple(weight.shape)}"
        )
    check_size(x.numel() // max(1, x.shape[-1]), x.shape[-1])
    checks.dtypes(KERNEL, DTYPES, x=x, residual=residual, weight=weight)
    checks.contiguous_last_dim(KERNEL, x=x, residual=residual)


def _view(t: Tensor, what: str, shape: tuple, desc: str) -> Tensor:
    """t viewed as `shape` (written through, never a copy): ValueError naming `desc` where t's strides
    allow no such view."""
    try:
        return t.view(shape)
    except RuntimeError:
        raise ValueError(
            f"{KERNEL}: {what} of shape {tuple(t.shape)} and strides {t.stride()} cannot be viewed as {desc}; "
            f"pass a contiguous {what}"
        ) from None


@port.entry(layouts={"x": "(..., n)", "residual": "(..., n)", "weight": "(n,)"})
def fused_add_rms_norm(
    x: Tensor,
    residual: Tensor,
    weight: Tensor,
    eps: float = 1e-6,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """(2, ..., n): y = rms_norm(x + residual) * weight, then s = x + residual; ValueError/TypeError on
    bad input, ffi.KernelError on a failed call."""
    _check(x, residual, weight)
    checks.out_matches(KERNEL, out, (2, *x.shape), x)
    checks.cuda(KERNEL, x=x, residual=residual, weight=weight)
    n = x.shape[-1]
    y = out if out is not None else torch.empty((2, *x.shape), dtype=x.dtype, device=x.device)
    planes = _view(y, "out", (2, -1, n), f"(2, rows, {n})")
    x2, r2 = x.reshape(-1, n), residual.reshape(-1, n)
    port.run(__name__, variant, (x2.shape[0], n), planes, x2, r2, weight, float(eps))
    return y


def _in_place(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6) -> None:
    """The in-place op's implementation (fused_add_rms_norm_ without the grad check)."""
    _check(x, residual, weight)
    pairs = (("x", x, "residual", residual), ("x", x, "weight", weight), ("residual", residual, "weight", weight))
    for a, ta, b, tb in pairs:
        if checks.overlap(ta, tb) != "none":
            raise ValueError(f"{KERNEL}_: {a} and {b} share memory; in place, x and residual are both written")
    n = x.shape[-1]
    x2, r2 = _view(x, "x", (-1, n), "rows"), _view(residual, "residual", (-1, n), "rows")
    if port.is_fake(x):
        return
    checks.cuda(KERNEL, x=x, residual=residual, weight=weight)
    port.run(__name__, "auto", (x2.shape[0], n), x2, x2, r2, weight, float(eps), mutated=(r2,))


ops.define_in_place(
    f"{KERNEL}_",
    _in_place,
    lambda x, residual, weight, eps=1e-6: _check(x, residual, weight),
    "(Tensor(a!) x, Tensor(b!) residual, Tensor weight, float eps=1e-06) -> ()",
    ("x", "residual"),
)


def fused_add_rms_norm_(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6) -> tuple[Tensor, Tensor]:
    """In place: residual <- x + residual, x <- rms_norm(x + residual) * weight; returns (x, residual).
    The op torch.ops.tilekit.fused_add_rms_norm_ (which torch.compile keeps whole); for inference:
    ValueError where an input requires grad (the functional fused_add_rms_norm has the gradient)."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, residual, weight)):
        raise ValueError(
            f"{KERNEL}_: in place, for inference; an input requires grad: use {KERNEL}(x, residual, weight), "
            "which returns (y, x + residual) with their gradient"
        )
    if torch.compiler.is_compiling():
        torch.ops.tilekit.fused_add_rms_norm_(x, residual, weight, eps)
    else:
        _in_place(x, residual, weight, eps)
    return x, residual
