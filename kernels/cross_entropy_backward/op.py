"""cross_entropy_backward, the cuTile Rust port of cross-entropy's gradient, and the training op that
writes it in the loss's own pass:

    from kernels.cross_entropy_backward.op import cross_entropy_backward
    dx = cross_entropy_backward(logits, target, dloss, ignore_index=-100, label_smoothing=0.0)
    loss = cross_entropy_loss(logits.requires_grad_(), target)    # kernels/cross_entropy/op.py: the
    loss.backward()                                                # training op; backward reads no logits

The gradient of cross_entropy's per-row losses (kernels/cross_entropy/op.py) for their gradient
dloss, float32 (m,) (one a row) or (1,) (one for every row): per row, dx = dloss (softmax(x) - ε / n
- (1 - ε) onehot(t)), 0 where t == ignore_index; (m, n) in the logits' dtype (`out` may be the
logits themselves: the gradient written over them, Liger's memory saving). `cutile_cross_entropy_backward`
(kernels/cross_entropy_backward/ffi.rs): cross_entropy's entry with its gradient pass, the row read
twice (the second mostly from L2).

Autograd: `forward_gradients` is torch.ops.tilekit.cross_entropy's (the per-row losses' gradient, a
second read of the logits). kernels/cross_entropy/op.py's cross_entropy_loss (F.cross_entropy's
form) with logits that require grad runs the op torch.ops.tilekit.cross_entropy_train, which writes
the losses and the gradient in one launch (`cutile_cross_entropy_train`), the gradient already
scaled for the reduction; its backward only scales it by the loss's gradient, and not at all when that is 1 (checked eagerly, one host sync, as
Liger does; under torch.compile it multiplies).
"""

from __future__ import annotations

import torch
from torch import Tensor

from kernels.cross_entropy import op as forward
from tilekit.runtime import checks, ops, port
from tilekit.runtime.autotune import row_tune_key as tune_key  # noqa: F401 (op.py's contract name)

CDEF = """
int32_t cutile_cross_entropy_backward(const TensorDesc* out, const TensorDesc* logits,
                                      const TensorDesc* target, const TensorDesc* dloss,
                                      int32_t ignore_index, float smoothing, int32_t block,
                                      int32_t rows, int32_t occupancy, int32_t warps, int32_t form,
                                      int32_t device_id, uint64_t stream);
int32_t cutile_cross_entropy_train(const TensorDesc* out, const TensorDesc* losses,
                                   const TensorDesc* logits, const TensorDesc* target,
                                   const TensorDesc* scale, int32_t ignore_index, float smoothing,
                                   int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                                   int32_t form, int32_t device_id, uint64_t stream);
"""

KERNEL = "cross_entropy_backward"
DTYPES = forward.DTYPES
DEFAULT_VARIANT = forward.DEFAULT_VARIANT
export_args = forward.export_args  # the same knobs: (block, rows, occupancy, warps, form)


def variants(m: int, n: int) -> list[dict]:
    """cross_entropy's candidates for rows of one column tile or less. Vocabulary rows, twelve at most:
    version 1's 4096 tiles at occupancy 2 and 4 over 8 warps (the H200's picks for it: NOTES.md);
    where the i32 offsets reach (`forward.fits_form_2`), version 2's (form 2) tiles of 4096 and 8192
    at occupancy 1, 2 and 4, and version 3's (form 3: the row split into 8192-column chunks that
    exchange their max and sum, each read once from DRAM) where its chunks are few enough
    (`forward.fits_form_3`): 4096 and 2048 tiles at occupancy 8 over 4 warps (64 registers, as
    softmax's fastest split), 4096 tiles at occupancy 4 over 8 warps and 2048 over 4; there also
    version 4 (form 4: version 3's chunks, each tile block summing one and storing an earlier row's)
    at version 3's two H200 picks (4096 tiles at occupancy 8 over 4 warps, picked in bf16, and at 4
    over 8, picked in f32; both offered for every dtype), in place of version 2's occupancy 1, which
    never won. Where neither reaches, version 1's five
    (4096 tiles also at occupancy 1, 8192 at 2 and 4). Pure:

    >>> [(v["block"], v["occupancy"], v["form"]) for v in variants(4096, 128256)][:3], len(variants(4096, 128256))
    ([(4096, 2, 1), (4096, 4, 1), (4096, 2, 2)], 12)
    >>> [(v["block"], v["occupancy"], v["warps"], v["form"]) for v in variants(4096, 128256) if v["form"] >= 3]
    [(4096, 8, 4, 3), (2048, 8, 4, 3), (4096, 4, 8, 3), (2048, 4, 4, 3), (4096, 8, 4, 4), (4096, 4, 8, 4)]
    >>> len(variants(32768, 128256)), variants(64, 100) == forward.variants(64, 100)
    (5, True)
    """
    if n <= 4096:
        return forward.variants(m, n)
    tiles = [(4096, 2, 8, 1), (4096, 4, 8, 1)]
    split = forward.fits_form_3(m, n)
    if not forward.fits_form_2(m, n):
        tiles += [(4096, 1, 8, 1), (8192, 2, 8, 1), (8192, 4, 8, 1)]
    else:
        tiles += [(b, o, 8, 2) for b in (4096, 8192) for o in ((2, 4) if split else (1, 2, 4))]
    if split:
        tiles += [(4096, 8, 4, 3), (2048, 8, 4, 3), (4096, 4, 8, 3), (2048, 4, 4, 3)]
        tiles += [(4096, 8, 4, 4), (4096, 4, 8, 4)]
    return [{"block": b, "rows": 1, "occupancy": o, "warps": w, "form": f} for b, o, w, f in tiles]


def _check_scale(kernel: str, name: str, t: Tensor, m: int) -> None:
    if t.dtype != torch.float32 or tuple(t.shape) not in ((m,), (1,)):
        raise ValueError(
            f"{kernel}: {name} must be float32 of shape ({m},) (one a row) or (1,) (one for every row), "
            f"got {tuple(t.shape)} {t.dtype}"
        )


@port.entry(
    layouts={"logits": "(m, n)", "target": "(m,)", "dloss": "(m,); or (1,), one for every row"}, in_place=("logits",)
)
def cross_entropy_backward(
    logits: Tensor,
    target: Tensor,
    dloss: Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """d loss / d logits of cross_entropy's per-row losses for their gradient dloss (the module
    docstring); ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    forward.check_args(KERNEL, logits, target, ignore_index, label_smoothing)
    m, n = logits.shape
    _check_scale(KERNEL, "dloss", dloss, m)
    checks.out_matches(KERNEL, out, (m, n), logits)
    if out is not None:
        checks.contiguous_last_dim(KERNEL, out=out)
    checks.cuda(KERNEL, logits=logits, target=target, dloss=dloss)
    dx = out if out is not None else torch.empty((m, n), dtype=logits.dtype, device=logits.device)
    key = forward.launch_key(logits)
    if forward.fits_form_3(m, n) and not forward.fits_form_3(m, n, dx.stride(0)):
        key["form_3"] = False  # version 3 addresses out's rows too (ffi.rs split_rows): not from this class
    port.run(
        __name__, variant, (m, n), dx, logits, target, dloss, int(ignore_index), float(label_smoothing), key=lambda: key
    )
    return dx


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple) -> tuple:
    """cross_entropy's autograd formula (tilekit.runtime.ops registers it for torch.ops.tilekit.cross_entropy):
    the logits' gradient from the per-row losses' gradient; none for the targets and scalars."""
    # the dispatcher drops trailing arguments equal to their defaults
    logits, target, ignore_index, label_smoothing = (*inputs, *(None, None, -100, 0.0)[len(inputs) :])
    if not needs[0]:
        return (None, None, None, None)
    dloss = grad.float().contiguous()  # an expanded one (stride 0) is fine too, but autograd's is not that
    return (cross_entropy_backward.op(logits, target, dloss, ignore_index, label_smoothing), None, None, None)


# -- the training op: the losses and the gradient in one launch ---------------------------------------

TRAIN_SCHEMA = (
    "(Tensor logits, Tensor target, int ignore_index, float label_smoothing, str reduction) -> (Tensor, Tensor)"
)


def _train_forward(logits, target, ignore_index, label_smoothing, reduction):
    """(the reduced loss, the gradient of it for a loss gradient of 1)."""
    forward.check_args("cross_entropy_train", logits, target, ignore_index, label_smoothing)
    checks.cuda("cross_entropy_train", logits=logits, target=target)
    m, n = logits.shape
    losses = torch.empty(m, dtype=torch.float32, device=logits.device)
    grad = torch.empty((m, n), dtype=logits.dtype, device=logits.device)
    if reduction == "mean":  # 1 / the rows counted, on the GPU (no sync); no row counted: no row read it
        scale = (1.0 / (target != ignore_index).sum().float()).reshape(1)
    else:
        scale = torch.ones(1, dtype=torch.float32, device=logits.device)
    if not n:  # no classes: no defined loss (cross_entropy's NaN)
        losses.fill_(float("nan"))
    else:
        key = forward.launch_key(logits)
        port.run(
            __name__, "auto", (m, n), grad, losses, logits, target, scale, int(ignore_index), float(label_smoothing),
            key=lambda: key, export="cutile_cross_entropy_train", mutated=(losses,),
        )  # fmt: skip
    return forward.reduce(losses, target, ignore_index, reduction, logits.dtype), grad


def _setup_context(ctx, inputs, output):
    ctx.reduction = inputs[4]
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(output[1])


def _train_backward(ctx, dloss, _dgrad):
    (grad,) = ctx.saved_tensors
    if ctx.reduction == "none":
        return grad * dloss[:, None].to(grad.dtype), None, None, None, None
    return (*ops.scaled_by_loss_gradient(dloss, grad), None, None, None, None)


_TRAIN_OP = torch.library.custom_op(
    "tilekit::cross_entropy_train", _train_forward, mutates_args=(), schema=TRAIN_SCHEMA
)
_TRAIN_OP.register_fake(_train_forward)
torch.library.register_autograd("tilekit::cross_entropy_train", _train_backward, setup_context=_setup_context)
