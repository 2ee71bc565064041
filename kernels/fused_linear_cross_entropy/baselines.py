"""fused_linear_cross_entropy baselines: the implementations the cuTile Rust port (op.py) is timed against.

    G = scale (softmax(h Wᵀ) - ε / V - (1 - ε) onehot(t))    per row; 0 where t == ignore_index
    dh = G W,  dW = Gᵀ h

Entries (h, weight, target, scale, ignore_index, label_smoothing), the port's arguments. Ours return
[dh; dW] ((m + V, H)) as the port does, the others (dh, dW) apart as autograd makes them (the kit
checks them stacked: tilekit.runtime.kernel.stacked). Ours,
``triton_fused_linear_cross_entropy`` and ``cutile_fused_linear_cross_entropy``: the port's chunk loop
in PyTorch, chunks of CHUNK rows, each logits_c = h_c Wᵀ (cuBLAS, into one reused buffer), our
Triton / cuTile Python cross-entropy kernel writing the losses and G over the logits
(kernels/cross_entropy/baselines.py), dh_c = G_c W and dW += G_cᵀ h_c (cuBLAS, `addmm_`): Liger's
scheme with our row kernel. ``torch_fused_linear_cross_entropy``: autograd of F.linear then
F.cross_entropy (the (m, V) logits and their gradient materialized), and its torch.compile. Liger's
LigerFusedLinearCrossEntropyFunction (Triton: chunked, gradients in its forward; cuTile: the whole
logits at once, bf16 and no smoothing only), TileGym 1.5.1's cuTile one (its Liger suite), each as a
training step runs it: the loss, then `.backward()`. `scale` is timed as a reduction: 1 / the rows
counted as "mean", 1 as "sum" (any other: not served), so each library runs its own scaling.
"""

import torch
import torch.nn.functional as F

from kernels.cross_entropy import baselines as rows
from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, ct = rows.triton, rows.ct
_TRITON_ERROR, _CUTILE_ERROR = rows._TRITON_ERROR, rows._CUTILE_ERROR

KERNEL = "fused_linear_cross_entropy"
# the libraries whose gradients come from their loss's forward with autograd on (tests/kit/test_providers.py)
TRAINING_STEP = ("liger", "liger_cutile", "tilegym")
VARIANTS = ("auto",)
CHUNK = 1024  # rows a chunk of our chunk loop: the port's default (ffi.rs DEFAULT_CHUNK)


def _check_inputs(h, weight, target, scale) -> None:
    for name, t in (("h", h), ("weight", weight)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError(f"{KERNEL} baseline: {name} must be a 2-D f16/bf16 tensor, got {t!r:.60}")
    if weight.shape[1] != h.shape[1] or h.dtype != weight.dtype:
        raise ValueError(f"{KERNEL} baseline: weight must be (V, {h.shape[1]}) of h's dtype, got {tuple(weight.shape)}")
    if not isinstance(target, torch.Tensor) or tuple(target.shape) != (h.shape[0],):
        raise ValueError(f"{KERNEL} baseline: target must be ({h.shape[0]},), got {target!r:.60}")
    if not isinstance(scale, torch.Tensor) or scale.dtype != torch.float32 or tuple(scale.shape) != (1,):
        raise ValueError(f"{KERNEL} baseline: scale must be float32 (1,), got {scale!r:.60}")


def reduction_of(target, scale, ignore_index) -> str:
    """ "mean" where scale is 1 / the rows counted, "sum" where it is 1; else NotServed (one host sync).

    >>> t = torch.tensor([1, -100, 2, 0])
    >>> reduction_of(t, torch.tensor([1 / 3]), -100), reduction_of(t, torch.ones(1), -100)
    ('mean', 'sum')
    """
    s, counted = float(scale), int((target != ignore_index).sum())
    if s == 1.0:
        return "sum"
    if abs(s * counted - 1.0) <= 1e-6:
        return "mean"
    raise bs.NotServed(f"scale {s} is neither a mean's (1 / {counted}) nor a sum's (1)")


def _ours(kernel_of, h, weight, target, scale, ignore_index, label_smoothing):
    """The chunk loop over our row kernel `kernel_of` and cuBLAS's products: [dh; dW] ((m + V, H), the
    port's layout: the products write into its two row blocks)."""
    _check_inputs(h, weight, target, scale)
    m = h.shape[0]
    grads = torch.empty((m + weight.shape[0], h.shape[1]), dtype=h.dtype, device=h.device)
    dh, dw = grads[:m], grads[m:].zero_()
    logits = torch.empty((min(CHUNK, m), weight.shape[0]), dtype=h.dtype, device=h.device)
    for r in range(0, m, CHUNK):
        h_c, x = h[r : r + CHUNK], logits[: min(CHUNK, m - r)]
        torch.mm(h_c, weight.t(), out=x)
        rows.rows(kernel_of, x, target[r : r + CHUNK], ignore_index, label_smoothing, grad=x, scale=scale)
        torch.mm(x, weight, out=dh[r : r + CHUNK])
        dw.addmm_(x.t(), h_c)
    return grads


def triton_fused_linear_cross_entropy(h, weight, target, scale, ignore_index=-100, label_smoothing=0.0, *, variant="auto"):  # fmt: skip
    """(dh, dW) with our Triton cross-entropy kernel between cuBLAS's products."""
    bs.require(triton, unavailable_reason, "triton")
    bs.check_variant(KERNEL, variant, VARIANTS)
    return _ours(getattr(rows, "triton_rows", None), h, weight, target, scale, ignore_index, label_smoothing)


def cutile_fused_linear_cross_entropy(h, weight, target, scale, ignore_index=-100, label_smoothing=0.0, *, variant="auto"):  # fmt: skip
    """(dh, dW) with our cuTile Python cross-entropy kernel between cuBLAS's products."""
    bs.require(ct, unavailable_reason, "cutile")
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require_cuda(KERNEL, "h", h)
    return _ours(getattr(rows, "cutile_rows", None), h, weight, target, scale, ignore_index, label_smoothing)


def _step(loss_fn, h, weight, target, scale, ignore_index, label_smoothing):
    """A training step of `loss_fn(h, weight, target, ignore_index, label_smoothing, reduction)`: the loss,
    then its backward; (dh, dW)."""
    _check_inputs(h, weight, target, scale)
    reduction = reduction_of(target, scale, ignore_index)
    with torch.enable_grad():  # the harness times under no_grad; the gradients need autograd
        x, w = h.detach().requires_grad_(), weight.detach().requires_grad_()
        loss_fn(x, w, target, ignore_index, label_smoothing, reduction).backward()
    return x.grad, w.grad


def _torch_loss(h, weight, target, ignore_index, label_smoothing, reduction):
    return F.cross_entropy(
        F.linear(h, weight), target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction
    )


def torch_fused_linear_cross_entropy(h, weight, target, scale, ignore_index=-100, label_smoothing=0.0):
    """Autograd of PyTorch's F.linear then F.cross_entropy: the logits and their gradient in memory."""
    return _step(_torch_loss, h, weight, target, scale, ignore_index, label_smoothing)


_compiled = None


def torch_compile_fused_linear_cross_entropy(h, weight, target, scale, ignore_index=-100, label_smoothing=0.0):
    """torch_fused_linear_cross_entropy's formula under torch.compile (its forward and backward graphs;
    default mode, static shapes, a recompile limit of 64)."""
    global _compiled
    if _compiled is None:
        bs.raise_recompile_limit(64)
        _compiled = torch.compile(_torch_loss, dynamic=False)
    return _step(_compiled, h, weight, target, scale, ignore_index, label_smoothing)


def _liger(ops, h, weight, target, scale, ignore_index=-100, label_smoothing=0.0):
    """Liger's LigerFusedLinearCrossEntropyFunction (Triton or cuTile: `ops`)."""
    function = providers.submodule(ops, "fused_linear_cross_entropy").LigerFusedLinearCrossEntropyFunction

    def loss_fn(x, w, t, ii, eps, reduction):
        # (input, weight, target, bias, ce_weight, ignore_index, lse_square_scale, label_smoothing, reduction)
        return function.apply(x, w, t, None, None, ii, 0.0, eps, reduction)[0]

    return _step(loss_fn, h, weight, target, scale, ignore_index, label_smoothing)


def _liger_cutile(ops, h, weight, target, scale, ignore_index=-100, label_smoothing=0.0):
    """Liger's cuTile LigerFusedLinearCrossEntropyFunction, which serves bf16 without label smoothing only
    (it raises NotImplementedError otherwise)."""
    if h.dtype != torch.bfloat16 or label_smoothing:
        raise bs.NotServed("Liger's cuTile fused linear cross-entropy takes bf16 without label smoothing only")
    return _liger(ops, h, weight, target, scale, ignore_index, label_smoothing)


def _tilegym(ops, h, weight, target, scale, ignore_index=-100, label_smoothing=0.0):
    """TileGym 1.5.1's cuTile fused linear cross-entropy (its Liger suite, with a backward)."""
    suite = providers.package_module(ops, "suites.liger")

    def loss_fn(x, w, t, ii, eps, reduction):
        return suite.fused_linear_cross_entropy(x, w, t, None, None, ii, 0.0, eps, reduction)

    return _step(loss_fn, h, weight, target, scale, ignore_index, label_smoothing)


BACKENDS = {
    "cutile": cutile_fused_linear_cross_entropy,
    "triton": triton_fused_linear_cross_entropy,
    "torch": torch_fused_linear_cross_entropy,
    "torch_compile": torch_compile_fused_linear_cross_entropy,
    **providers.backends(tilegym=_tilegym, liger=_liger, liger_cutile=_liger_cutile),
}
unavailable_reason = bs.reason_for(__name__)
