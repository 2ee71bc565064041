"""The runtime every kernels/<name>/op.py shares: after its own argument checks (tilekit.runtime.checks), an
entry hands its output and arguments here, which picks the variant (tilekit.runtime.autotune) and calls the
export `cutile_<name>` (tilekit.runtime.ffi) on the output's device and that device's current torch stream.

    return port.rows(__name__, x, out, x.shape[-1], weight, float(eps), variant=variant)  # a row kernel
    port.run(__name__, variant, (m, n, k), c, a, b)                                       # any kernel

`op` is the kernel's op module, or its __name__ ("kernels.<name>.op"). The export takes the output's
descriptor, the arguments (tensors as descriptors, scalars as they are), op.export_args(**variant)
(with `sms=` the GPU's SM count where it takes one), device_id and stream (tilekit/runtime/kernel.py).

Every entry is declared with the decorator `entry`: its tensor arguments' layouts and the inputs
`out` may be in place of (tilekit.runtime.checks: the rules all ports share), and it becomes the op
torch.ops.tilekit.<name> (tilekit.runtime.ops), which torch.compile traces instead of the entry. Inside
CUDA-graph capture a call must repeat one made before capture (`CaptureNotWarm`): JIT and autotune
happen then, never while capturing.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from types import ModuleType

from tilekit.runtime import autotune, checks, ffi, ops


def module(op: ModuleType | str) -> ModuleType:
    return sys.modules[op] if isinstance(op, str) else op


def name(op: ModuleType | str) -> str:
    """The kernel's name: its folder, kernels/<name>/op.py."""
    return module(op).__name__.split(".")[-2]


def export_args(op: ModuleType | str, variant: dict, sms: int) -> tuple:
    """The variant's arguments of the export, op.export_args(**variant) (pure), on a GPU with `sms` SMs."""
    op = module(op)
    signature = inspect.signature(op.export_args).parameters
    params = {p: v for p, v in signature.items() if p != "sms"}
    missing = sorted(p for p, v in params.items() if v.default is inspect.Parameter.empty and p not in variant)
    unknown = sorted(set(variant) - set(params))
    if missing or unknown:
        raise TypeError(
            f"{name(op)} variant {variant}: "
            + "; ".join(
                f"{what} knob(s) {', '.join(ks)}" for what, ks in (("missing", missing), ("unknown", unknown)) if ks
            )
            + f" (the export's knobs: {', '.join(params)}; -1 keeps ffi.rs's default)"
        )
    return op.export_args(**variant, **({"sms": sms} if "sms" in signature else {}))


@functools.lru_cache(maxsize=None)
def sm_count(device_id: int) -> int:
    import torch

    return torch.cuda.get_device_properties(device_id).multi_processor_count


def launch(op: ModuleType | str, out, *args, export: str | None = None, **variant) -> None:
    """One call of the export (`cutile_<name>`, or `export`, another the CDEF declares) with one
    variant; raises ffi.KernelError on a non-zero code."""
    import torch

    op = module(op)
    device_id, stream = ffi.stream_args(out)
    sms = sm_count(device_id) if "sms" in inspect.signature(op.export_args).parameters else 0
    lib = ffi.library()
    descs = [lib.pack(a) if isinstance(a, torch.Tensor) else a for a in (out, *args)]  # alive until the call returns
    symbol = export or f"cutile_{name(op)}"
    lib.call(name(op), symbol, *descs, *export_args(op, variant, sms), device_id, stream)


def with_alignment(key: dict, tensors) -> dict:
    """The tune key, told apart where the tensors' 16-byte alignment differs from what the key's
    sizes imply, because the launcher's entries and the fastest tile differ there (a 4096 tile at n =
    4097 needs the aligned entry, which needs x's and out's rows to share their heads):

    - `bases: "off16"` where some tensor's base is not 16-byte aligned (a slice at an odd offset);
    - `rows: "<phase>,..."` where some tensor of rows (two rows or more, its last dim contiguous:
      a transposed GEMM operand is not one) has a row stride whose bytes mod 16 (its rows' phase)
      differ from those of its contiguous row length: padded or sliced rows that start off 16
      bytes where contiguous ones would not, or the reverse. The value lists the phase of every
      tensor of rows, in order, so x and out with different heads tune apart from a pair with the
      same ones.

    Keys of contiguous calls on aligned bases are unchanged. Non-tensors (scalars, None) are skipped.

    >>> from types import SimpleNamespace as T
    >>> with_alignment({"n": 8}, [T(data_ptr=lambda: 256), 1e-6, None])
    {'n': 8}
    >>> with_alignment({"n": 8}, [T(data_ptr=lambda: 258)])
    {'n': 8, 'bases': 'off16'}
    >>> rows = lambda stride, n: T(data_ptr=lambda: 256, shape=(4, n), stride=lambda: (stride, 1), element_size=lambda: 2)
    >>> with_alignment({"n": 4097}, [rows(4097, 4097), rows(4097, 4097)])  # contiguous: n tells
    {'n': 4097}
    >>> with_alignment({"n": 4096}, [rows(4096, 4096), rows(4097, 4096)])  # x sliced from 4097-wide rows
    {'n': 4096, 'rows': '0,2'}
    """
    out = dict(key)
    if any(hasattr(t, "data_ptr") and t.data_ptr() % 16 for t in tensors):
        out["bases"] = "off16"
    phases = [
        ((t.stride()[-2] * t.element_size()) % 16, (t.shape[-1] * t.element_size()) % 16)
        for t in tensors
        if hasattr(t, "stride") and len(t.shape) >= 2 and t.shape[-2] > 1 and t.stride()[-1] == 1
    ]
    if any(phase != contiguous for phase, contiguous in phases):
        out["rows"] = ",".join(str(phase) for phase, _ in phases)
    return out if out != key else key


def scratch_like(t):
    """A copy of t in new memory with t's shape, strides and offset from a 256-byte boundary (so the
    tune key's alignment, `with_alignment`, and the launcher's entries are those of t)."""
    import torch

    lead = t.data_ptr() % 256 // t.element_size()
    buffer = torch.empty(lead + checks.span(t), dtype=t.dtype, device=t.device)
    return buffer.as_strided(t.shape, t.stride(), lead).copy_(t)


def tuning_tensors(out, args: tuple, mutated: tuple = ()) -> tuple:
    """What autotune's candidates run on: (out, *args) themselves, unless out shares memory with an
    argument (an in-place call, the only overlap tilekit.runtime.checks lets through), an argument
    is one the export writes too (`mutated`, by identity: fused_add_rms_norm_'s residual), or
    `mutated` names out itself (the export reads out before writing it: matmul_acc_'s C += A B):
    then a scratch copy of out (scratch_like) in out's place and in that argument's, and of each
    mutated one in its place, so no candidate changes what a later one reads and the caller's
    tensors are written once, by the pick. Made at the first candidate's call: a cached pick
    allocates nothing."""
    import torch

    aliased = [isinstance(a, torch.Tensor) and checks.overlap(out, a) != "none" for a in args]
    written = [any(a is t for t in mutated) for a in args]
    reads_out = any(t is out for t in mutated)
    if not any(aliased) and not any(written) and not reads_out:
        return (out, *args)
    scratch = scratch_like(out) if any(aliased) or reads_out else out
    return (scratch, *(scratch if same else scratch_like(a) if w else a for a, same, w in zip(args, aliased, written)))


class CaptureNotWarm(RuntimeError):
    """A port's first call of these shapes made inside CUDA-graph capture."""


_WARM: set[tuple] = set()  # the calls this process has launched outside capture (call_signature)


def call_signature(kernel: str, variant, tensors: tuple, export: str | None = None) -> tuple:
    """What decides whether a launch may JIT or tune: the kernel, the variant asked for, each
    tensor's shape, strides, dtype, device and address alignment (to 256 bytes: the JIT specializes
    on divisibility), the scalars, and the export when it is not the kernel's own (matmul_acc_'s
    `cutile_matmul_acc` takes matmul's very tensors, and compiles and tunes apart)."""
    import torch

    def part(t):
        if isinstance(t, torch.Tensor):
            address = t.data_ptr()
            return (tuple(t.shape), t.stride(), t.dtype, t.device.index, address & -address & 255 if address else 0)
        return t

    asked = variant if isinstance(variant, str) else repr(sorted(variant.items()))
    return (kernel, asked, *map(part, tensors), *((export,) if export else ()))


def forget_warm(kernel: str, variant) -> None:
    """Forget that this process ran `kernel` with `variant` (any tensors): its next call inside
    CUDA-graph capture is refused as a first one (the suite's CaptureNotWarm test)."""
    asked = call_signature(kernel, variant, ())[1]
    _WARM.difference_update({s for s in _WARM if s[:2] == (kernel, asked)})


def is_fake(t) -> bool:
    """A tensor without memory, as torch.compile traces with (the ops' fake implementation)."""
    from torch._subclasses.fake_tensor import is_fake as fake

    return fake(t)


def run(
    op: ModuleType | str,
    variant,
    sizes: tuple,
    out,
    *args,
    key: Callable[[], dict] | None = None,
    export: str | None = None,
    mutated: tuple = (),
    candidates: list[dict] | None = None,
) -> None:
    """Launch the export (`export`, else cutile_<name>) on (out, *args) for the problem `sizes` (op.variants(*sizes), or
    `candidates` for an export whose space is not the entry's, and
    op.tune_key(dtype, *sizes), or the entry's own `key()`, told apart by `with_alignment`) with what
    `variant` names (autotune.pick; tuning on `tuning_tensors`); nothing for an empty out, or for
    fake tensors (torch.compile's tracing: the entry ran its checks and allocated its output).
    `mutated`: the arguments the export writes besides out, and out itself where the export reads it
    too (tuning_tensors copies them for autotune).
    Inside CUDA-graph capture, CaptureNotWarm unless the same call (call_signature) ran before."""
    import torch

    op = module(op)
    if out.numel() == 0 or is_fake(out):
        return
    signature = call_signature(name(op), variant, (out, *args), export)
    if signature not in _WARM and out.is_cuda and torch.cuda.is_current_stream_capturing():
        raise CaptureNotWarm(
            f"{name(op)}: called for the first time with these shapes, strides and dtypes inside CUDA-graph "
            f"capture, where it cannot JIT-compile or autotune; call it once with the same tensors before "
            f"capturing (the warm-up torch.cuda.graphs asks for)"
        )
    scratch = []  # tuning_tensors, made at the first candidate's call (a cached pick makes none)

    def tensors():
        if not scratch:
            scratch.append(tuning_tensors(out, args, mutated))
        return scratch[0]

    variant = autotune.pick(
        name(op),
        variant,
        default=op.DEFAULT_VARIANT,
        key=with_alignment(key() if key else op.tune_key(str(out.dtype).removeprefix("torch."), *sizes), (out, *args)),
        candidates=op.variants(*sizes) if candidates is None else candidates,
        make_call=lambda v: lambda: launch(op, *tensors(), export=export, **v),
    )
    launch(op, out, *args, export=export, **variant)
    _WARM.add(signature)


def rows(op: ModuleType | str, x, out, cols: int, *args, variant):
    """A row kernel's entry after its checks: x (..., n) as (m, n) rows, the output (..., cols) (the
    caller's `out` or a fresh torch.empty) as (m, cols); run on (x2, *args) for sizes (m, cols).
    Returns the output in x's leading shape."""
    import torch

    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    y = out if out is not None else torch.empty((*x.shape[:-1], cols), dtype=x.dtype, device=x.device)
    y2 = y if y.dim() == 2 else y.view(-1, cols)
    run(op, variant, (x2.shape[0], cols), y2, x2, *args)
    return y


# -- the entry's declaration ------------------------------------------------------------------------


def entry(*, layouts: dict[str, str], in_place: tuple[str, ...] = ()):
    """Declare a kernel's entry (op.py), `<name>(inputs..., *, variant="auto", out=None)`:

    - each argument in `layouts` ({name: "(..., n)"}) must be a tensor of that rank (None where the
      parameter defaults to None): tilekit.runtime.checks.rank;
    - `out` is checked by the aliasing rule, in place only of the inputs in `in_place`:
      tilekit.runtime.checks.out_aliasing;
    - the entry becomes the op torch.ops.tilekit.<name> (tilekit.runtime.ops.define), and under torch.compile,
      or where an input requires grad (autograd records the op), a call of the entry is a call of
      the op (autotuned; into `out` by a copy where one is given).

    These run before the entry's own checks. The decorated entry carries `.layouts`, `.in_place`
    and `.op` (the declaration that KernelSpec reads)."""
    import torch

    def wrap(fn):
        params = inspect.signature(fn).parameters
        names = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
        unknown = sorted((set(layouts) | set(in_place)) - set(names))
        if unknown or params.get("out") is None or params["out"].kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(
                f"{fn.__name__}: port.entry names {unknown or 'no keyword-only out'}; the entry's arguments "
                f"are {names} and a keyword-only out"
            )
        optional = {n for n in layouts if params[n].default is None}
        defaults = [params[n].default for n in names]
        ranks = [(arg, layout, checks.layout_rank(layout)) for arg, layout in layouts.items()]
        kernel = fn.__name__

        def checked(*args, **kwargs):
            given = dict(zip(names, args)) | kwargs
            for arg, layout, dims in ranks:
                if arg in given and not (given[arg] is None and arg in optional):
                    checks.rank(kernel, arg, given[arg], layout, dims)
            out = kwargs.get("out")
            if out is not None:
                if not isinstance(out, torch.Tensor):
                    raise TypeError(f"{kernel}: out must be a torch.Tensor or None, got {type(out).__name__}")
                checks.out_aliasing(kernel, out, in_place, **{n: v for n, v in given.items() if n in names})
            return fn(*args, **kwargs)

        op = ops.define(fn, checked)

        def needs_grad(args, kwargs) -> bool:
            given = [*args, *(v for k, v in kwargs.items() if k in names)]
            return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in given)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            # the op, which dynamo does not trace into; and with autograd, whose graph records the op
            # (its gradient: tilekit.runtime.ops.register_backward; without one, backward raises)
            grad = needs_grad(args, kwargs)
            if torch.compiler.is_compiling() or grad:
                given = dict(zip(names, args)) | kwargs
                out = given.get("out")
                if out is not None and not torch.compiler.is_compiling():  # eager, with autograd: the same rule
                    checks.out_aliasing(kernel, out, in_place, **{n: v for n, v in given.items() if n in names})
                # with grad, a kernel's training call where it has one (attention's keeps its forward's lse)
                call_op = (grad and ops.training_call(kernel)) or op
                y = call_op(*(given.get(n, d) for n, d in zip(names, defaults)))
                if out is None:
                    return y
                checks.out_matches(kernel, out, tuple(y.shape), y)  # as eager refuses it: no broadcast, no cast
                return out.copy_(y)
            return checked(*args, **kwargs)

        call.layouts, call.in_place, call.op = dict(layouts), tuple(in_place), op
        return call

    return wrap
