"""Every port as a PyTorch op, `torch.ops.tilekit.<kernel>` (torch.library.custom_op), defined when
the kernel's op.py is imported (tilekit.runtime.port.entry calls `define`):

    import kernels.rms_norm.op                   # or tilekit.runtime.modules, which imports every kernel
    y = torch.ops.tilekit.rms_norm(x, weight, 1e-6)

So a model made of ports compiles with torch.compile(fullgraph=True) without a graph break (the op
is opaque to dynamo), and its calls show in profiles under the kernel's name.

- The schema is the entry's arguments before `*`, typed from their annotations (`schema`): the op
  has no `variant` (it always autotunes, inside the op: a call never makes a new graph) and no
  `out` (it is functional; the entry under torch.compile copies into a caller's out).
- Its implementation is the entry, checks included. Its fake implementation is the entry too, on
  fake tensors: the same checks (a bad input fails at trace time with op.py's message) and the
  same output allocation (shape, dtype, strides); tilekit.runtime.port launches nothing for fake tensors.
- Its gradient, where the kernel has one (`register_backward`, issue 43), computed with ports; an
  op without one raises at `.backward()` ("no autograd formula was registered") instead of giving
  no gradient. The Python entry calls the op whenever an input requires grad (tilekit.runtime.port).
  A kernel whose backward is a kernel of its own, kernels/<name>_backward, gets the gradient that
  kernel's op.py gives as `forward_gradients`, registered when <name>'s op is defined; where that
  op.py also has a `training_call`, the entry calls it with grad instead of the op (`training_call`:
  attention's, whose forward also returns the log-sum-exp its gradient reads).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable

NAMESPACE = "tilekit"

# the annotations an entry's arguments may have -> their type in a torch.library schema
SCHEMA_TYPES = {
    "Tensor": "Tensor",
    "Tensor | None": "Tensor?",
    "float": "float",
    "float | None": "float?",
    "int": "int",
    "int | None": "int?",
    "bool": "bool",
}

_CALLS: dict[str, Callable] = {}  # kernel -> the entry's checked call (the op's implementation)
_BACKWARDS: dict[str, Callable] = {}  # kernel -> its gradient (register_backward)
_WITH_OUTPUT: set[str] = set()  # the kernels whose gradient takes the op's output (an `output` parameter)
# kernel -> the call its entry makes with grad (kernels/<k>_backward's training_call)
_TRAINING: dict[str, Callable] = {}
# name -> (implementation, fake) of the in-place ops (define_in_place)
_IN_PLACE: dict[str, tuple[Callable, Callable]] = {}


def schema(fn: Callable) -> str:
    """The op's schema from an entry's signature: its positional-or-keyword arguments, typed by
    their annotations (SCHEMA_TYPES), with their defaults; the keyword-only ones (variant, out) left
    out. TypeError names an argument whose type a schema cannot carry.

    >>> def rms_norm(x: "Tensor", weight: "Tensor", eps: "float" = 1e-6, *, variant="auto", out=None): ...
    >>> schema(rms_norm)
    '(Tensor x, Tensor weight, float eps=1e-06) -> Tensor'
    >>> def attention(q: "Tensor", sinks: "Tensor | None" = None, causal: "bool" = False, window: "int | None" = None): ...
    >>> schema(attention)
    '(Tensor q, Tensor? sinks=None, bool causal=False, int? window=None) -> Tensor'
    """
    args = []
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind is not p.POSITIONAL_OR_KEYWORD:
            continue
        annotation = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
        if annotation not in SCHEMA_TYPES:
            raise TypeError(
                f"{fn.__name__}: argument {name} is annotated {p.annotation!r}; a torch op takes {list(SCHEMA_TYPES)}"
            )
        default = "" if p.default is p.empty else f"={p.default!r}"
        args.append(f"{SCHEMA_TYPES[annotation]} {name}{default}")
    return f"({', '.join(args)}) -> Tensor"


def define(fn: Callable, call: Callable):
    """Define torch.ops.tilekit.<fn's name> (schema(fn)) running `call(*args)` (the entry with its
    checks, variant "auto") for real and fake tensors alike; once per process (a later definition of
    the same kernel replaces the call). Returns the op (its OpOverloadPacket)."""
    import torch

    name = fn.__name__
    if name not in _CALLS:

        def run(*args):
            return _CALLS[name](*args)

        op = torch.library.custom_op(f"{NAMESPACE}::{name}", run, mutates_args=(), schema=schema(fn))
        op.register_fake(run)
    _CALLS[name] = call
    backward_kernel = f"{fn.__module__.rpartition('.op')[0]}_backward.op"  # kernels.<name>_backward.op
    if fn.__module__.endswith(".op") and importlib.util.find_spec(backward_kernel.rpartition(".")[0]) is not None:
        backward = importlib.import_module(backward_kernel)
        register_backward(name, backward.forward_gradients)
        if hasattr(backward, "training_call"):
            _TRAINING[name] = backward.training_call
    return getattr(getattr(torch.ops, NAMESPACE), name)


def define_in_place(name: str, call: Callable, fake: Callable, schema: str, mutates: tuple[str, ...]):
    """Define torch.ops.tilekit.<name>, an op that writes its inputs `mutates` in place and returns
    nothing (a kernel's in-place form beside its functional entry: fused_add_rms_norm_), running
    `call(*args)`, with `fake(*args)` (the checks, on fake tensors) for tracing; `schema` marks the
    written arguments (`Tensor(a!) x`). torch.compile functionalizes it; it has no gradient (an
    in-place form is for inference). Once per process (a later definition replaces the calls).
    Returns the op."""
    import torch

    if name not in _IN_PLACE:
        op = torch.library.custom_op(
            f"{NAMESPACE}::{name}", lambda *a: _IN_PLACE[name][0](*a), mutates_args=mutates, schema=schema
        )
        op.register_fake(lambda *a: _IN_PLACE[name][1](*a))
    _IN_PLACE[name] = (call, fake)
    return getattr(getattr(torch.ops, NAMESPACE), name)


def scaled_by_loss_gradient(dloss, *grads) -> tuple:
    """The backward of a training op whose forward wrote the gradients of its loss for a loss gradient
    of 1 (cross_entropy_train, fused_linear_cross_entropy_train): `grads` as they are where the
    scalar dloss is 1 (loss.backward(); checked eagerly, one host sync, as Liger does), else each
    times dloss; under tracing (torch.compile's backward graph, a fake dloss) always the product, as
    a traced backward cannot branch on a value."""
    import torch
    from torch._subclasses.fake_tensor import is_fake  # tilekit.runtime.port's test (port imports this module)

    if not is_fake(dloss) and not torch.compiler.is_compiling() and bool(dloss == 1):
        return grads
    return tuple(g * dloss.to(g.dtype) for g in grads)


def defined() -> list[str]:
    """The kernels defined as ops in this process."""
    return sorted(_CALLS)


def register_backward(name: str, backward: Callable) -> None:
    """Give torch.ops.tilekit.<name> (defined already) its gradient, torch.library.register_autograd:
    `backward(inputs, grad, needs)` gets the op's arguments as they were given (a tuple in schema
    order), the output's gradient and, per argument, whether its gradient is needed, and the op's
    output as `output=` when it has a parameter of that name (softmax's gradient is made from y: the
    output is then saved for backward too); it returns one gradient per argument (None for a
    non-tensor or one not needed). Registered once per process
    (a later call, an op.py imported again, replaces the function)."""
    import torch

    if name not in _CALLS:
        raise ValueError(f"register_backward: torch.ops.{NAMESPACE}.{name} is not defined; import its op.py first")
    if name not in _BACKWARDS:

        def setup_context(ctx, inputs, output):
            tensors = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)]
            ctx.tensor_at, ctx.others = tensors, [None if i in tensors else t for i, t in enumerate(inputs)]
            ctx.with_output = name in _WITH_OUTPUT
            ctx.save_for_backward(*(inputs[i] for i in tensors), *((output,) if ctx.with_output else ()))

        def grads(ctx, grad):
            inputs, saved = list(ctx.others), list(ctx.saved_tensors)
            output = {"output": saved.pop()} if ctx.with_output else {}
            for i, t in zip(ctx.tensor_at, saved):
                inputs[i] = t
            # one flag per argument: the dispatcher drops trailing arguments equal to their defaults
            # (layer_norm(x) without weight, bias or eps), and torch gives flags for the rest only
            needs = (*ctx.needs_input_grad, *(False,) * (len(inputs) - len(ctx.needs_input_grad)))
            return tuple(_BACKWARDS[name](tuple(inputs), grad, needs, **output))

        torch.library.register_autograd(f"{NAMESPACE}::{name}", grads, setup_context=setup_context)
    _BACKWARDS[name] = backward
    if "output" in inspect.signature(backward).parameters:  # read here, not at every call of the op
        _WITH_OUTPUT.add(name)
    else:
        _WITH_OUTPUT.discard(name)


def training_call(name: str) -> Callable | None:
    """What the entry of <name> calls when an input requires grad, in place of its op: kernels/<name>_backward's
    `training_call` where it has one (attention's, an op whose forward also returns what its gradient
    needs: the log-sum-exp), else None (the op, with its registered gradient)."""
    return _TRAINING.get(name)


def has_backward(name: str) -> bool:
    """Whether torch.ops.tilekit.<name> has a gradient (register_backward)."""
    return name in _BACKWARDS


def backward_of(name: str) -> Callable:
    """The gradient function register_backward gave torch.ops.tilekit.<name> (KeyError if none)."""
    return _BACKWARDS[name]
