"""fused_linear_cross_entropy, the cuTile Rust port of the cross-entropy loss of hidden states through
the vocabulary projection, with its gradients, without the (m, V) logits ever existing:

    from kernels.fused_linear_cross_entropy.op import fused_linear_cross_entropy_loss
    loss = fused_linear_cross_entropy_loss(h, lm_head.weight, target)      # F.cross_entropy(h @ W.t(), t)
    loss.backward()                                                        # dh, dW: written by the forward

h (m, H) (or (..., H)) and the weight W (V, H) as nn.Linear stores it, CUDA f16/bf16, each row-major;
target (m,) int32/int64 class ids. Per row, with the logits x = h Wᵀ and ε the label smoothing:
loss = lse(x) - (1 - ε) x[t] - (ε / V) sum(x), 0 where t == ignore_index, and with G = scale
(softmax(x) - ε / V - (1 - ε) onehot(t)) (scale 1 / the rows counted for a mean, 1 for a sum):
dh = G W, dW = Gᵀ h. Liger-Kernel's LigerFusedLinearCrossEntropyFunction (its headline memory
saving), made of the kit's own kernels.

`fused_linear_cross_entropy` is the kit's entry (the op torch.ops.tilekit.fused_linear_cross_entropy):
the gradients for a given scale (1,) float32, stacked into one (m + V, H) tensor, dh's rows then
dW's. `cutile_fused_linear_cross_entropy` (kernels/fused_linear_cross_entropy/ffi.rs) runs, per chunk
of `chunk` rows, matmul's kernel for the chunk's logits into a chunk × V workspace, cross_entropy's
training launch over them in place (the losses and G), then matmul's kernel for dh_c = G_c W and
its accumulating form for dW += G_cᵀ h_c (kernels/matmul: matmul_acc_). `variant="auto"` autotunes
the chunk and the products' tile over `variants` per dtype and shape class (NOTES.md).

`fused_linear_cross_entropy_loss` is the training form (the op
torch.ops.tilekit.fused_linear_cross_entropy_train, `cutile_fused_linear_cross_entropy_train`): the
reduced loss, with dh and dW written by the same launches and returned by autograd (scaled by the
loss's gradient, not at all when that is 1), as Liger's does. Reductions "mean" and "sum".
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from kernels.cross_entropy import op as rows_op
from tilekit.runtime import autotune, checks, mma, ops, port

CDEF = """
int32_t cutile_fused_linear_cross_entropy(const TensorDesc* out, const TensorDesc* h,
    const TensorDesc* weight, const TensorDesc* target, const TensorDesc* scale,
    int32_t ignore_index, float smoothing, int32_t chunk, int32_t block, int32_t rows,
    int32_t occupancy, int32_t warps, int32_t form, int32_t bm, int32_t bn, int32_t bk,
    int32_t group, int32_t programs, int32_t mma_occupancy, int32_t num_cta_in_cga,
    int32_t dw_bm, int32_t dw_bn, int32_t dw_bk, int32_t dw_group, int32_t dw_programs,
    int32_t dw_occupancy, int32_t dw_num_cta_in_cga, int32_t device_id, uint64_t stream);
int32_t cutile_fused_linear_cross_entropy_train(const TensorDesc* dh, const TensorDesc* dw,
    const TensorDesc* losses, const TensorDesc* h, const TensorDesc* weight, const TensorDesc* target,
    const TensorDesc* scale, int32_t ignore_index, float smoothing, int32_t chunk, int32_t block,
    int32_t rows, int32_t occupancy, int32_t warps, int32_t form, int32_t bm, int32_t bn,
    int32_t bk, int32_t group, int32_t programs, int32_t mma_occupancy, int32_t num_cta_in_cga,
    int32_t dw_bm, int32_t dw_bn, int32_t dw_bk, int32_t dw_group, int32_t dw_programs,
    int32_t dw_occupancy, int32_t dw_num_cta_in_cga, int32_t device_id, uint64_t stream);
"""

KERNEL = "fused_linear_cross_entropy"
DTYPES = mma.DTYPES
REDUCTIONS = ("mean", "sum")
# ffi.rs's defaults: 1024-row chunks, cross_entropy's and matmul's own defaults (mma_: the logits' and
# dh's products, dw_: dW's)
DEFAULT_VARIANT = (
    {"chunk": -1}
    | rows_op.DEFAULT_VARIANT
    | {f"{p}_{k}": v for p in ("mma", "dw") for k, v in mma.DEFAULT_VARIANT.items()}
)
CHUNKS = (1024, 2048, 4096)  # rows a chunk: the candidates (NOTES.md, "The chunk")


def export_args(
    chunk, block, rows, occupancy, warps, form, mma_bm, mma_bn, mma_bk, mma_group, mma_persistent, mma_occupancy,
    mma_cga, dw_bm, dw_bn, dw_bk, dw_group, dw_persistent, dw_occupancy, dw_cga, *, sms: int
) -> tuple[int, ...]:  # fmt: skip
    """A variant's arguments of the export: chunk, cross_entropy's five knobs, matmul's seven for the
    logits' and dh's products, seven more for dW's (each persistent grid's size from `sms`). Pure."""
    gemm = mma.export_args(mma_bm, mma_bn, mma_bk, mma_group, mma_persistent, mma_occupancy, mma_cga, sms=sms)
    dw = mma.export_args(dw_bm, dw_bn, dw_bk, dw_group, dw_persistent, dw_occupancy, dw_cga, sms=sms)
    return (int(chunk), *rows_op.export_args(block, rows, occupancy, warps, form), *gemm, *dw)


def tune_key(dtype: str, m: int, vocab: int, hidden: int) -> dict:
    """The problem class: exact V and H, m rounded up to a power of two.

    >>> tune_key("bfloat16", 4000, 128256, 4096)
    {'dtype': 'bfloat16', 'vocab': 128256, 'hidden': 4096, 'm_class': 4096}
    """
    return {"dtype": dtype, "vocab": vocab, "hidden": hidden, "m_class": autotune.pow2(m)}


SPLIT_ROW_CHUNKS = 64  # version 3's chunks a row at most here: vocabularies to 524288 on GPUs of 64 SMs or more


def _rows_variant(chunk: int, vocab: int) -> dict:
    """cross_entropy's knobs over one chunk's logits: whole rows in tiles where V is short, else
    version 3's row split (each row's logits read once from DRAM) in 4096-column tiles at occupancy 8
    over 4 warps where it serves (`fits_form_3`): the training launch's pick on the H200 for every
    bf16 vocabulary shape (results/h200/cross_entropy_backward/, bundle 8614aa3: 0.664 ms at 4096 x
    128256, where this op's version 2 took 0.90 in the same run) with at most SPLIT_ROW_CHUNKS
    chunks a row (version 3 needs every chunk of a row resident at once: launch_split refuses more
    chunks than the GPU has SMs, and this op offers no other loss pass to fall back on); else version
    2's 4096-column tiles at occupancy 4 over 8 warps where its offsets fit i32, version 1's
    otherwise."""
    if vocab <= 4096:
        return rows_op.variants(chunk, vocab)[1]
    if rows_op.fits_form_3(chunk, vocab) and -(-vocab // rows_op.SPLIT_CHUNK) <= SPLIT_ROW_CHUNKS:
        return {"block": 4096, "rows": 1, "occupancy": 8, "warps": 4, "form": 3}
    form = 2 if rows_op.fits_form_2(chunk, vocab) else 1
    return {"block": 4096, "rows": 1, "occupancy": 4, "warps": 8, "form": form}


def variants(m: int, vocab: int, hidden: int) -> list[dict]:
    """Chunks of CHUNKS up to m's class (one chunk of the whole class below 1024 rows; each chunk's
    logits inside i32 indexing) times four pairs of tiles, (logits and dh, dW): 128 x 128 for all,
    128 x 256 (cluster of 2) for all, 128 x 128 with dW in 128 x 256 (matmul's own picks on the
    H200: 128 x 128 for the LM head's logits and dx, 128 x 256 for its dW, A read column-major), and
    128 x 256 in one CTA for all (on 8 worker warps: ffi_util::MmaVariant::warps, not yet timed);
    persistent at occupancy 1. Pure:

    >>> [(v["chunk"], v["mma_bn"], v["dw_bn"], v["mma_cga"], v["form"]) for v in variants(4096, 128256, 4096)][:4]
    [(1024, 128, 128, 1, 3), (1024, 128, 256, 1, 3), (1024, 256, 256, 2, 3), (1024, 256, 256, 1, 3)]
    >>> [v["chunk"] for v in variants(300, 1000, 64)], variants(300, 1000, 64)[0]["block"]
    ([512, 512, 512, 512], 1024)
    >>> sorted({v["chunk"] for v in variants(65536, 262144, 4096)})
    [1024, 2048, 4096]
    """
    cap = min(autotune.pow2(m), mma.INDEX_LIMIT // max(vocab, 1))
    chunks = [c for c in CHUNKS if c <= cap] or [min(autotune.pow2(m), cap)]
    small, wide = mma.variant(128, 128, 64, persistent=True), mma.variant(128, 256, 64, persistent=True, cga=2)
    eight = mma.variant(128, 256, 64, persistent=True)
    return [
        {"chunk": c}
        | _rows_variant(c, vocab)
        | {f"mma_{k}": v for k, v in t.items()}
        | {f"dw_{k}": v for k, v in d.items()}
        for c in chunks
        for t, d in ((small, small), (small, wide), (wide, wide), (eight, eight))
    ]


def check_args(kernel: str, h: Tensor, weight: Tensor, target: Tensor, ignore_index: int, smoothing: float):
    """The checks of the entry and of the training op, on real and fake tensors: ValueError/TypeError
    naming the argument; (m, V, H)."""
    for name, t in (("h", h), ("weight", weight)):
        if not isinstance(t, Tensor) or t.dim() != 2:
            raise ValueError(f"{kernel}: {name} must be a 2-D tensor, got {getattr(t, 'shape', type(t).__name__)}")
    (m, hidden), vocab = h.shape, weight.shape[0]
    if weight.shape[1] != hidden:
        raise ValueError(
            f"{kernel}: weight must be (V, H) with H = {hidden} (h's last dim; nn.Linear's layout), "
            f"got {tuple(weight.shape)}"
        )
    if vocab == 0:
        raise ValueError(f"{kernel}: weight has no rows: no classes, no defined loss")
    checks.dtypes(kernel, DTYPES, h=h, weight=weight)
    rows_op.check_args(kernel, torch.empty((m, vocab), device="meta", dtype=h.dtype), target, ignore_index, smoothing)
    checks.contiguous_last_dim(kernel, h=h, weight=weight)
    check_sizes(kernel, m, vocab, hidden, h=h, weight=weight)
    return m, vocab, hidden


def check_sizes(kernel: str, m: int, vocab: int, hidden: int, **tensors) -> None:
    """ValueError unless h, dh (m, H) and weight, dW (V, H) each span at most i32's elements, as ffi.rs
    (matmul's plans) enforces: the tensors given their spans, the others a contiguous one's. Pure:

    >>> check_sizes("fused_linear_cross_entropy", 4096, 262144, 8192)
    Traceback (most recent call last):
    ValueError: fused_linear_cross_entropy: weight spans 2147483648 elements for m=4096, V=262144, H=8192; the kernel indexes each operand with i32 (at most 2147483647 elements)
    """
    spans = {"h": m * hidden, "weight": vocab * hidden}
    for name, elems in (spans | {name: checks.span(t) for name, t in tensors.items() if t is not None}).items():
        if elems > mma.INDEX_LIMIT:
            raise ValueError(
                f"{kernel}: {name} spans {elems} elements for m={m}, V={vocab}, H={hidden}; the kernel indexes "
                f"each operand with i32 (at most {mma.INDEX_LIMIT} elements)"
            )


def _scale_of(kernel: str, scale: Tensor) -> None:
    if not isinstance(scale, Tensor) or scale.dtype != torch.float32 or tuple(scale.shape) != (1,):
        raise ValueError(
            f"{kernel}: scale must be float32 of shape (1,), each row's share of the loss, got {scale!r:.60}"
        )


def _key(h: Tensor, m: int, vocab: int, hidden: int) -> dict:
    return tune_key(str(h.dtype).removeprefix("torch."), m, vocab, hidden)


@port.entry(layouts={"h": "(m, H)", "weight": "(V, H)", "target": "(m,)", "scale": "(1,)"})
def fused_linear_cross_entropy(
    h: Tensor,
    weight: Tensor,
    target: Tensor,
    scale: Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """The gradients [dh; dW] ((m + V, H), h's dtype) of the loss whose rows each count `scale`
    (the module docstring); ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    m, vocab, hidden = check_args(KERNEL, h, weight, target, ignore_index, label_smoothing)
    _scale_of(KERNEL, scale)
    checks.out_matches(KERNEL, out, (m + vocab, hidden), h)
    if out is not None:
        checks.contiguous_last_dim(KERNEL, out=out)
        check_sizes(KERNEL, m, vocab, hidden, dh=out[:m], dw=out[m:])
    checks.cuda(KERNEL, h=h, weight=weight, target=target, scale=scale)
    grads = out if out is not None else torch.empty((m + vocab, hidden), dtype=h.dtype, device=h.device)
    if m == 0:  # no rows: dW is an empty sum
        return grads.zero_()
    key = _key(h, m, vocab, hidden)
    port.run(
        __name__, variant, (m, vocab, hidden), grads, h, weight, target, scale, int(ignore_index),
        float(label_smoothing), key=lambda: key,
    )  # fmt: skip
    return grads


# -- the training op: the loss, with dh and dW from the same launches ------------------------------------

TRAIN_SCHEMA = (
    "(Tensor h, Tensor weight, Tensor target, int ignore_index, float label_smoothing, str reduction) "
    "-> (Tensor, Tensor, Tensor)"
)


def _train_forward(h, weight, target, ignore_index, label_smoothing, reduction):
    """(the reduced loss, dh and dW for a loss gradient of 1)."""
    kernel = "fused_linear_cross_entropy_train"
    if reduction not in REDUCTIONS:
        raise ValueError(f"{kernel}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    m, vocab, hidden = check_args(kernel, h, weight, target, ignore_index, label_smoothing)
    checks.cuda(kernel, h=h, weight=weight, target=target)
    losses = torch.empty(m, dtype=torch.float32, device=h.device)
    dh, dw = torch.empty_like(h, memory_format=torch.contiguous_format), torch.empty_like(weight)
    if reduction == "mean":  # 1 / the rows counted, on the GPU (no sync)
        scale = (1.0 / (target != ignore_index).sum().float()).reshape(1)
    else:
        scale = torch.ones(1, dtype=torch.float32, device=h.device)
    if m == 0:
        dw.zero_()
    elif hidden:
        key = _key(h, m, vocab, hidden) | {"train": True}
        port.run(
            __name__,
            "auto",
            (m, vocab, hidden),
            dh,
            dw,
            losses,
            h,
            weight,
            target,
            scale,
            int(ignore_index),
            float(label_smoothing),
            key=lambda: key,
            export="cutile_fused_linear_cross_entropy_train",
        )  # fmt: skip (no `mutated`: the export writes dW, the losses and dh without reading them first)
    else:  # H = 0: every logit 0, the loss log V (less the target's share: none)
        losses.fill_(math.log(vocab)).masked_fill_(target == ignore_index, 0.0)
    return rows_op.reduce(losses, target, ignore_index, reduction, h.dtype), dh, dw


def _setup_context(ctx, inputs, output):
    ctx.mark_non_differentiable(output[1], output[2])
    ctx.save_for_backward(output[1], output[2])


def _train_backward(ctx, dloss, _ddh, _ddw):
    return (*ops.scaled_by_loss_gradient(dloss, *ctx.saved_tensors), None, None, None, None)


_TRAIN_OP = torch.library.custom_op(
    "tilekit::fused_linear_cross_entropy_train", _train_forward, mutates_args=(), schema=TRAIN_SCHEMA
)
_TRAIN_OP.register_fake(_train_forward)
torch.library.register_autograd(
    "tilekit::fused_linear_cross_entropy_train", _train_backward, setup_context=_setup_context
)


def fused_linear_cross_entropy_loss(
    h: Tensor,
    weight: Tensor,
    target: Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> Tensor:
    """torch.nn.functional.cross_entropy(h @ weight.t(), target, ...) for h (..., H) and target (...),
    made of the port, in h's dtype: the training op, whose launches write dh and dW while the loss
    is computed (so a call without grad does that work too). Reductions "mean" and "sum"."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{KERNEL}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    h2, t1 = h.reshape(-1, h.shape[-1]), target.reshape(-1)
    op = torch.ops.tilekit.fused_linear_cross_entropy_train
    return op(h2, weight, t1, int(ignore_index), float(label_smoothing), reduction)[0]
