"""cross_entropy_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dx = dloss (softmax(x) - ε / n - (1 - ε) onehot(t))     per row; 0 where t == ignore_index

Entries (logits, target, dloss, ignore_index, label_smoothing), the port's arguments, each returning
the gradient (m, n): ours, ``triton_cross_entropy_backward`` and ``cutile_cross_entropy_backward``
(cross_entropy's kernels with their gradient pass: the row's max and sum of exp, then the gradient
from a second read of the row; kernels/cross_entropy/baselines.py); ``torch_cross_entropy_backward``
(autograd of F.cross_entropy, reduction "none", with dloss as the losses' gradient: the forward
included, as PyTorch has no gradient without it) and its torch.compile; Liger's Triton and cuTile
LigerCrossEntropyFunction and TileGym's cuTile cross entropy (1.5.1's Liger suite), each as a
training step runs it: the loss and the gradient in one forward launch (written over the logits),
then `.backward()`. For one dloss for every row (a mean's gradient: 1 / the rows counted) they run
reduction "mean" with a loss gradient of 1 (so they skip their rescaling pass, as loss.backward() of
a mean does; dloss x rows counted is 1 up to float32 rounding); for one dloss a row, reduction "none"
and that gradient (their extra multiply included).
"""

import torch
import torch.nn.functional as F

from kernels.cross_entropy import baselines as forward
from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, ct = forward.triton, forward.ct
_TRITON_ERROR, _CUTILE_ERROR = forward._TRITON_ERROR, forward._CUTILE_ERROR
_triton_kernel = getattr(forward, "_triton_kernel", None)  # tests.py compiles them from here
_cutile_kernel = getattr(forward, "_cutile_kernel", None)

KERNEL = "cross_entropy_backward"
# the libraries whose gradient comes from their loss's forward with autograd on (tests/kit/test_providers.py)
TRAINING_STEP = ("liger", "liger_cutile", "tilegym")
VARIANTS = forward.VARIANTS
config = forward.config


def _check_inputs(logits, target, dloss) -> None:
    forward.check_inputs(KERNEL, logits, target)
    m = logits.shape[0]
    if not isinstance(dloss, torch.Tensor) or dloss.dtype != torch.float32 or tuple(dloss.shape) not in ((m,), (1,)):
        raise ValueError(f"{KERNEL} baseline: dloss must be float32 ({m},) or (1,), got {dloss!r:.60}")


def _ours(kernel_of, logits, target, dloss, ignore_index, label_smoothing):
    _check_inputs(logits, target, dloss)
    grad = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
    forward.rows(kernel_of, logits, target, ignore_index, label_smoothing, grad=grad, scale=dloss)
    return grad


def triton_cross_entropy_backward(logits, target, dloss, ignore_index=-100, label_smoothing=0.0, *, variant="auto"):
    """The gradient with our Triton kernel (and the losses, which its launch writes too)."""
    bs.require(triton, unavailable_reason, "triton")
    bs.check_variant(KERNEL, variant, VARIANTS)
    return _ours(getattr(forward, "triton_rows", None), logits, target, dloss, ignore_index, label_smoothing)


def cutile_cross_entropy_backward(logits, target, dloss, ignore_index=-100, label_smoothing=0.0, *, variant="auto"):
    """The gradient with our cuTile Python kernel (and the losses)."""
    bs.require(ct, unavailable_reason, "cutile")
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require_cuda(KERNEL, "logits", logits)
    return _ours(getattr(forward, "cutile_rows", None), logits, target, dloss, ignore_index, label_smoothing)


def _autograd(loss_fn, logits, target, dloss, ignore_index, label_smoothing):
    _check_inputs(logits, target, dloss)
    x = logits.detach().requires_grad_()
    losses = loss_fn(x, target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none")
    return torch.autograd.grad(losses, x, dloss.expand(logits.shape[0]).to(losses.dtype))[0]


def torch_cross_entropy_backward(logits, target, dloss, ignore_index=-100, label_smoothing=0.0):
    """Autograd of PyTorch's loss per row: its forward and backward kernels."""
    return _autograd(F.cross_entropy, logits, target, dloss, ignore_index, label_smoothing)


_compiled = None


def torch_compile_cross_entropy_backward(logits, target, dloss, ignore_index=-100, label_smoothing=0.0):
    """torch_cross_entropy_backward with F.cross_entropy under torch.compile (its forward and backward
    graphs compiled; default mode, static shapes, a recompile limit of 64)."""
    global _compiled
    if _compiled is None:
        bs.raise_recompile_limit(64)
        _compiled = torch.compile(F.cross_entropy, dynamic=False)
    return _autograd(_compiled, logits, target, dloss, ignore_index, label_smoothing)


def _training_step(loss_fn, logits, target, dloss, ignore_index, label_smoothing):
    """A library's fused loss (`loss_fn(x, target, ignore_index, label_smoothing, reduction)`) and its
    backward, as the module docstring says; the gradient (the library writes it over the logits)."""
    _check_inputs(logits, target, dloss)
    with torch.enable_grad():  # the harness times under no_grad; a library's gradient needs autograd
        return _step(loss_fn, logits, target, dloss, ignore_index, label_smoothing)


def _step(loss_fn, logits, target, dloss, ignore_index, label_smoothing):
    x = logits.detach().requires_grad_()
    if dloss.numel() == 1:
        counted = int((target != ignore_index).sum())
        if abs(float(dloss) * counted - 1.0) > 1e-6:
            raise bs.NotServed(
                f"one dloss for every row is timed as a mean's gradient, 1 / {counted}; got {float(dloss)}"
            )
        loss, grad_out = loss_fn(x, target, ignore_index, label_smoothing, "mean"), None
    else:
        loss, grad_out = loss_fn(x, target, ignore_index, label_smoothing, "none"), dloss.to(logits.dtype)
    loss.backward(grad_out)
    return x.grad


def _liger(ops, logits, target, dloss, ignore_index=-100, label_smoothing=0.0):
    """Liger's LigerCrossEntropyFunction (Triton or cuTile: `ops`): loss and gradient in its forward."""
    function = providers.submodule(ops, "cross_entropy").LigerCrossEntropyFunction

    def loss_fn(x, t, ii, eps, reduction):
        return function.apply(x, t, None, ii, 0.0, eps, reduction)[0]

    return _training_step(loss_fn, logits, target, dloss, ignore_index, label_smoothing)


def _tilegym(ops, logits, target, dloss, ignore_index=-100, label_smoothing=0.0):
    """TileGym 1.5.1's cuTile cross entropy (its Liger suite): loss and gradient in its forward."""
    suite = providers.package_module(ops, "suites.liger")
    return _training_step(suite.cross_entropy, logits, target, dloss, ignore_index, label_smoothing)


BACKENDS = {
    "cutile": cutile_cross_entropy_backward,
    "triton": triton_cross_entropy_backward,
    "torch": torch_cross_entropy_backward,
    "torch_compile": torch_compile_cross_entropy_backward,
    **providers.backends(tilegym=_tilegym, liger=_liger, liger_cutile=_liger),
}
unavailable_reason = bs.reason_for(__name__)
