"""cross_entropy, the cuTile Rust port of the cross-entropy loss over a vocabulary's logits:

    from kernels.cross_entropy.op import cross_entropy, cross_entropy_loss
    losses = cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0)   # (m,) float32
    loss = cross_entropy_loss(logits, target, reduction="mean")    # torch.nn.functional.cross_entropy's

logits (m, n) CUDA f16/bf16/f32 (the last dim contiguous, any row stride), target (m,) int32/int64
class ids. Per row, with lse = log(sum(exp(logits))) and ε the label smoothing:

    loss = lse - (1 - ε) logits[t] - (ε / n) sum(logits)       (0 where t == ignore_index)

`cross_entropy` is the kit's entry (the op torch.ops.tilekit.cross_entropy): each row's loss in
float32 (the sum over a vocabulary is f32 inside; a bf16 loss per row would round it again). A
target outside [0, n) that is not ignore_index fails a device-side assertion, as PyTorch's does.
`cross_entropy_loss` is torch.nn.functional.cross_entropy's form for (m, n) logits: the reductions
"mean" (over the rows not ignored), "sum" and "none", in the logits' dtype. With grad it runs the
training op of kernels/cross_entropy_backward, which writes the gradient in the loss's own pass
(Liger's scheme: the logits read for the loss are not read again by a later backward).

`cutile_cross_entropy` (kernels/cross_entropy/ffi.rs): a tile block per row tile, column tiles read
once for the online max/sum-of-exp, the row's sum and its target's logit; `variant="auto"`
autotunes (block, rows, occupancy, warps, form) over `variants` per dtype and shape class (`form`
= 2: version 2's entry, one row a tile block, fewer instructions an element; NOTES.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import autotune, checks, port
from tilekit.runtime.autotune import row_tune_key as tune_key  # noqa: F401 (op.py's contract name)

CDEF = """
int32_t cutile_cross_entropy(const TensorDesc* out, const TensorDesc* logits, const TensorDesc* target,
                             int32_t ignore_index, float smoothing, int32_t block, int32_t rows,
                             int32_t occupancy, int32_t warps, int32_t form, int32_t device_id,
                             uint64_t stream);
"""

KERNEL = "cross_entropy"
DTYPES = ("bfloat16", "float16", "float32")
# ffi.rs (and the compiler) pick; form: 1 (-1) row tiles (`cross_entropy_rows`), 2 one row a tile block
# (`cross_entropy_row`, version 2), 3 the row split into chunks that exchange partials
# (`cross_entropy_split`, version 3: kernels/cross_entropy_backward's candidates; NOTES.md), 4 the same
# chunks lagged (`cross_entropy_lagged`, version 4: each tile block sums one chunk, stores an earlier row's)
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1, "warps": -1, "form": -1}
MAX_TILE_ELEMS = 8192  # ffi.rs: four f32 running tiles and the loaded one in registers
SPLIT_CHUNK, MAX_SPLIT_PARTS = 8192, 128  # ffi.rs: version 3's chunk (columns) and most chunks a row
HINTS = ((-1, -1), (2, 8), (4, 4), (4, 8))  # (occupancy, warps) of every candidate tile
REDUCTIONS = ("mean", "sum", "none")
I32 = (-(2**31), 2**31 - 1)


def export_args(block: int, rows: int, occupancy: int, warps: int = -1, form: int = -1) -> tuple:
    """A variant's arguments of the export: (block, rows, occupancy, warps, form)."""
    return int(block), int(rows), int(occupancy), int(warps), int(form)


def fits_form_2(m: int, n: int, stride: int | None = None) -> bool:
    """Whether version 2's entry serves every call of m's tune class (up to pow2(m) rows) of n logits
    at row `stride` (None: n, contiguous): ffi.rs's bound, every logit's offset inside i32. Decided
    per class, so that a pick made for one m of a class is valid for every other (32768 x 128256 and
    8192 x 262144 are past it; 8000 x 262144 is too, as 8192's class). Pure:

    >>> fits_form_2(4096, 128256), fits_form_2(8192, 262144), fits_form_2(8000, 262144), fits_form_2(4096, 128256, 600000)
    (True, False, False, False)
    """
    return (autotune.pow2(m) - 1) * (n if stride is None else stride) + n <= I32[1]


def fits_form_3(m: int, n: int, stride: int | None = None) -> bool:
    """Whether version 3's entry (form 3, the row split into SPLIT_CHUNK-column chunks) serves every
    call of m's tune class at row `stride` (None: n, contiguous): version 2's bound (`fits_form_2`)
    and at most MAX_SPLIT_PARTS chunks a row. Pure:

    >>> fits_form_3(4096, 128256), fits_form_3(4, 2**20), fits_form_3(4, 2**20 + 1), fits_form_3(32768, 128256)
    (True, True, False, False)
    """
    return fits_form_2(m, n, stride) and -(-n // SPLIT_CHUNK) <= MAX_SPLIT_PARTS


def variants(m: int, n: int) -> list[dict]:
    """Rows of one column tile or less: whole rows in tiles of ~4 K elements at HINTS. Vocabulary
    rows (one row a tile block): version 1's column tiles of 2048, 4096 and 8192 over 8 warps at
    occupancy 2 and 4 (the H200's picks were 8 warps everywhere: NOTES.md), and where its i32
    offsets reach version 2's entry (form 2, NOTES.md) in tiles of 4096 and 8192 at those and the
    compiler's default hints. Twelve at most (the contract's bound on a class's tuning). Pure:

    >>> [(v["block"], v["occupancy"], v["form"]) for v in variants(4096, 128256)][::2]
    [(2048, 2, 1), (4096, 2, 1), (8192, 2, 1), (4096, -1, 2), (4096, 4, 2), (8192, 2, 2)]
    >>> len(variants(32768, 128256)), len(variants(4096, 128256))
    (6, 12)
    >>> [(v["block"], v["rows"], v["occupancy"], v["warps"]) for v in variants(64, 100)][:2], len(variants(64, 100))
    ([(128, 32, -1, -1), (128, 32, 2, 8)], 4)
    """
    if n <= 4096:
        whole = autotune.pow2(max(n, 16))
        rows = autotune.tile_rows(whole, 4096, min(64, autotune.pow2(m)))
        return [{"block": whole, "rows": rows, "occupancy": o, "warps": w, "form": 1} for o, w in HINTS]
    out = [{"block": b, "rows": 1, "occupancy": o, "warps": 8, "form": 1} for b in (2048, 4096, 8192) for o in (2, 4)]
    if fits_form_2(m, n):
        hints = ((-1, -1), (2, 8), (4, 8))
        out += [{"block": b, "rows": 1, "occupancy": o, "warps": w, "form": 2} for b in (4096, 8192) for o, w in hints]
    return out


def check_args(kernel: str, logits: Tensor, target: Tensor, ignore_index: int, label_smoothing: float) -> None:
    """The checks cross_entropy and its gradient share (the device check is the caller's, last):
    ValueError/TypeError naming the argument."""
    checks.dtypes(kernel, DTYPES, logits=logits)
    if target.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{kernel}: target must be int32 or int64 class ids, got {target.dtype}")
    if tuple(target.shape) != (logits.shape[0],):
        raise ValueError(
            f"{kernel}: target must be ({logits.shape[0]},), a class id per row of logits {tuple(logits.shape)}, "
            f"got {tuple(target.shape)}"
        )
    if not I32[0] <= int(ignore_index) <= I32[1]:
        raise ValueError(f"{kernel}: ignore_index={ignore_index} must fit in int32")
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"{kernel}: label_smoothing={label_smoothing} must lie in [0, 1]")
    checks.contiguous_last_dim(kernel, logits=logits)


def launch_key(logits: Tensor) -> dict:
    """The tune key of a call on logits (m, n): its dtype, n, m's class; and "form_2": False where its
    row stride puts version 2 out of reach though contiguous rows of the class would not be (a class
    of its own: its picks are version 1's, which contiguous calls must not reuse, nor it theirs)."""
    m, n = logits.shape
    key = tune_key(str(logits.dtype).removeprefix("torch."), m, n)
    if fits_form_2(m, n) and not fits_form_2(m, n, logits.stride(0)):
        key["form_2"] = False
    return key


@port.entry(layouts={"logits": "(m, n)", "target": "(m,)"})
def cross_entropy(
    logits: Tensor,
    target: Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """Each row's loss, (m,) float32 (the module docstring); ValueError/TypeError on bad input,
    ffi.KernelError on a failed call."""
    check_args(KERNEL, logits, target, ignore_index, label_smoothing)
    checks.cuda(KERNEL, logits=logits, target=target)
    m = logits.shape[0]
    like = torch.empty(0, dtype=torch.float32, device=logits.device)
    checks.out_matches(KERNEL, out, (m,), like)
    if out is not None and m > 1 and out.stride(0) != 1:
        raise ValueError(f"{KERNEL}: out must be contiguous, got strides {out.stride()}")
    losses = out if out is not None else torch.empty(m, dtype=torch.float32, device=logits.device)
    if logits.shape[1] == 0:  # no classes: no defined loss
        return losses.fill_(float("nan"))
    key = launch_key(logits)
    port.run(
        __name__, variant, (m, logits.shape[1]), losses, logits, target, int(ignore_index), float(label_smoothing),
        key=lambda: key,
    )  # fmt: skip
    return losses


def reduce(losses: Tensor, target: Tensor, ignore_index: int, reduction: str, dtype) -> Tensor:
    """torch.nn.functional.cross_entropy's reduction of per-row losses (f32): "mean" over the rows
    whose target is not ignore_index (NaN where none is), "sum", "none"; in `dtype`."""
    if reduction == "none":
        return losses.to(dtype)
    total = losses.sum()
    if reduction == "sum":
        return total.to(dtype)
    return (total / (target != ignore_index).sum()).to(dtype)


def cross_entropy_loss(
    logits: Tensor, target: Tensor, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """torch.nn.functional.cross_entropy(logits, target, ignore_index=..., label_smoothing=...,
    reduction=...) for (m, n) logits, made of the port: the loss in the logits' dtype. With logits
    that require grad, the training op torch.ops.tilekit.cross_entropy_train (kernels/cross_entropy_backward,
    defined with this module's op) writes the gradient in the loss's pass."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{KERNEL}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if torch.is_grad_enabled() and logits.requires_grad:  # defined by kernels/cross_entropy_backward/op.py
        return torch.ops.tilekit.cross_entropy_train(
            logits, target, int(ignore_index), float(label_smoothing), reduction
        )[0]
    losses = cross_entropy(logits, target, ignore_index, label_smoothing)
    return reduce(losses, target, ignore_index, reduction, logits.dtype)
