"""The argument checks every kernels/<name>/op.py makes before it touches the GPU, with one wording
across kernels (the suites' bad-input cases match these messages). Each takes the kernel's name
and the tensors by their argument names, and raises TypeError/ValueError saying what to fix.

Every entry is decorated with `entry`, which applies the rules all ports share before the entry's
own checks run: each tensor argument's rank (from its declared layout), and the aliasing rule
(docs/kernels.md, "Aliasing"):

    @checks.entry(layouts={"x": "(..., n)", "weight": "(n,)"}, in_place=("x",))
    def rms_norm(x, weight, eps=1e-6, *, variant="auto", out=None): ...

- `out` that *is* an input (`overlap` says "same": one address, shape, strides and dtype) is an
  in-place call, allowed for the inputs named in `in_place` (kernels whose tile blocks read every
  element they write before writing it, and no other block reads it) and refused otherwise;
- any other memory shared by `out` and an input is refused, naming both.
"""

from __future__ import annotations

import functools
import inspect


def dtypes(kernel: str, names: tuple[str, ...], **tensors) -> None:
    """Every tensor has one dtype, one of `names` (torch's short names)."""
    import torch

    allowed = tuple(getattr(torch, n) for n in names)
    (first, t), *rest = tensors.items()
    if t.dtype in allowed and all(o.dtype == t.dtype for o in tensors.values()):
        return
    if not rest:
        raise TypeError(f"{kernel}: {first} must be one of {allowed}, got {t.dtype}")
    raise TypeError(
        f"{kernel}: {' and '.join(tensors)} must share one dtype of {allowed}, got "
        f"{' and '.join(str(o.dtype) for o in tensors.values())}"
    )


def contiguous_last_dim(kernel: str, size_one_ok: bool = False, **tensors) -> None:
    """Each tensor's last dim has stride 1 (a last dim of size 1 has any stride with size_one_ok)."""
    for name, t in tensors.items():
        if t.stride(-1) != 1 and not (size_one_ok and t.shape[-1] <= 1):
            raise ValueError(f"{kernel}: {name} must be contiguous in its last dim; pass {name}.contiguous()")


def out_matches(kernel: str, out, shape: tuple, like) -> None:
    """A caller's `out` (None: allocated by the op) has `shape` and like's dtype and device."""
    if out is not None and (tuple(out.shape) != tuple(shape) or out.dtype != like.dtype or out.device != like.device):
        raise ValueError(
            f"{kernel}: out must be {tuple(shape)} {like.dtype} on {like.device}, "
            f"got {tuple(out.shape)} {out.dtype} {out.device}"
        )


def cuda(kernel: str, **tensors) -> None:
    """Every tensor is on one CUDA device."""
    (first, t), *rest = tensors.items()
    if t.device.type == "cuda" and all(o.device == t.device for o in tensors.values()):
        return
    if not rest:
        raise ValueError(f"{kernel}: {first} must be on a CUDA device, got {t.device}")
    raise ValueError(
        f"{kernel}: {' and '.join(tensors)} must be on one CUDA device, got "
        f"{' and '.join(str(o.device) for o in tensors.values())}"
    )


# -- ranks and the aliasing rule, applied by `entry` ----------------------------------------------


def layout_rank(layout: str) -> tuple[int, bool]:
    """(dims named, whether more may lead) of a layout as entries declare it.

    >>> layout_rank("(..., n)"), layout_rank("(n,)"), layout_rank("(b, h, s_q, d)")
    ((1, True), (1, False), (4, False))
    """
    parts = [p.strip() for p in layout.strip().strip("()").split(",") if p.strip()]
    return len([p for p in parts if p != "..."]), "..." in parts


def rank(kernel: str, name: str, t, layout: str) -> None:
    """t is a tensor of the rank `layout` declares: TypeError for a non-tensor, ValueError naming the
    layout and what came otherwise.

    >>> import torch
    >>> rank("rms_norm", "x", torch.tensor(1.0), "(..., n)")
    Traceback (most recent call last):
    ValueError: rms_norm: x must be (..., n), a tensor of at least 1 dim, got a 0-d tensor of shape ()
    >>> rank("bmm", "a", torch.empty(4, 8), "(batch, m, k)")
    Traceback (most recent call last):
    ValueError: bmm: a must be (batch, m, k), a tensor of 3 dims, got a 2-d tensor of shape (4, 8)
    >>> rank("matmul", "a", [[1.0]], "(m, k)")
    Traceback (most recent call last):
    TypeError: matmul: a must be a torch.Tensor (m, k), got list
    """
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{kernel}: {name} must be a torch.Tensor {layout}, got {type(t).__name__}")
    dims, leading = layout_rank(layout)
    if t.dim() == dims or (leading and t.dim() > dims):
        return
    need = f"at least {dims} dim{'s' * (dims != 1)}" if leading else f"{dims} dim{'s' * (dims != 1)}"
    raise ValueError(
        f"{kernel}: {name} must be {layout}, a tensor of {need}, got a {t.dim()}-d tensor of shape {tuple(t.shape)}"
    )


MAX_OVERLAP_WORK = 1 << 20  # numpy.shares_memory's bound; past it an overlap is assumed (refused)


class _Memory:
    """A tensor's elements as numpy sees an array: an address, shape, byte strides; numpy never
    reads them (shares_memory is arithmetic on these numbers)."""

    def __init__(self, address: int, t):
        size = t.element_size()
        self.__array_interface__ = {
            "shape": tuple(t.shape),
            "typestr": f"|V{size}",
            "data": (address, True),
            "strides": tuple(s * size for s in t.stride()),
            "version": 3,
        }


def _address(t) -> int | None:
    """Where t's first element lies: its data_ptr, or on the meta device (no memory) its byte offset
    in its storage past a fixed base; None where that is unknown."""
    if t.device.type != "meta":
        return t.data_ptr()
    return (1 << 40) + t.storage_offset() * t.element_size()


def overlap(a, b) -> str:
    """How the memory of two tensors meets: "none"; "same" (one address, shape, strides and dtype:
    `out=x` in place); "partial" (any other element in common, found exactly by
    numpy.shares_memory; docs/kernels.md says why not torch's check).

    >>> import torch
    >>> x = torch.zeros(4, 8)
    >>> overlap(x, x.view(4, 8)), overlap(x, x[1:]), overlap(x, x.t()), overlap(x, torch.zeros(4, 8))
    ('same', 'partial', 'partial', 'none')
    >>> wide = torch.zeros(4, 16)  # two halves of each row: neighbours, not overlapping
    >>> overlap(wide[:, :8], wide[:, 8:]), overlap(wide[:, :8], wide[:, 7:15])
    ('none', 'partial')
    """
    import numpy as np

    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return "none"
    if a.device.type == "meta" and not _is_alias_of(a, b):
        return "none"
    start_a, start_b = _address(a), _address(b)
    end_a = start_a + (1 + sum((n - 1) * s for n, s in zip(a.shape, a.stride()))) * a.element_size()
    end_b = start_b + (1 + sum((n - 1) * s for n, s in zip(b.shape, b.stride()))) * b.element_size()
    if end_a <= start_b or end_b <= start_a:
        return "none"
    if start_a == start_b and a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype:
        return "same"
    try:
        shared = np.shares_memory(np.asarray(_Memory(start_a, a)), np.asarray(_Memory(start_b, b)), MAX_OVERLAP_WORK)
    except np.exceptions.TooHardError:
        shared = True
    return "partial" if shared else "none"


def _is_alias_of(a, b) -> bool:
    import torch

    return torch._C._is_alias_of(a, b)


def out_aliasing(kernel: str, out, in_place: tuple[str, ...], **inputs) -> tuple[str, ...]:
    """The aliasing rule: the inputs `out` is in place of (each named in `in_place`); ValueError
    naming out and the input for an in-place call the kernel cannot make, or any other overlap.
    Non-tensor inputs (scalars, None) are skipped."""
    import torch

    same = []
    for name, t in inputs.items():
        if not isinstance(t, torch.Tensor):
            continue
        how = overlap(out, t)
        if how == "same" and name in in_place:
            same.append(name)
        elif how == "same":
            can = f"runs in place only on {' or '.join(in_place)}" if in_place else "cannot run in place"
            raise ValueError(
                f"{kernel}: out is {name} (the same memory, shape and strides), and {kernel} {can}: its tiles "
                f"of out are written while other tiles still read {name}; pass a separate out (or none)"
            )
        elif how == "partial":
            exact = f", or out={name} itself to run in place" if name in in_place else ""
            raise ValueError(
                f"{kernel}: out overlaps {name}: out {tuple(out.shape)} with strides {out.stride()} and {name} "
                f"{tuple(t.shape)} with strides {t.stride()} share memory without being one tensor; pass an out "
                f"that shares no memory with {name}{exact}"
            )
    return tuple(same)


def entry(*, layouts: dict[str, str], in_place: tuple[str, ...] = ()):
    """Decorate a kernel's entry with the checks every port shares, run before its own: each argument
    in `layouts` ({name: "(..., n)"}) a tensor of that rank (None where the parameter defaults to
    None), then `out` (keyword-only) by the aliasing rule, in place only of the inputs in
    `in_place`. The decorated entry carries both as `.layouts` and `.in_place` (the declaration)."""
    import torch

    def wrap(fn):
        params = inspect.signature(fn).parameters
        names = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
        unknown = sorted((set(layouts) | set(in_place)) - set(names))
        if unknown or params.get("out") is None or params["out"].kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(
                f"{fn.__name__}: checks.entry names {unknown or 'no keyword-only out'}; the entry's arguments "
                f"are {names} and a keyword-only out"
            )
        optional = {n for n in layouts if params[n].default is None}
        kernel = fn.__name__

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            given = dict(zip(names, args)) | kwargs
            for name, layout in layouts.items():
                if name in given and not (given[name] is None and name in optional):
                    rank(kernel, name, given[name], layout)
            out = kwargs.get("out")
            if out is not None:
                if not isinstance(out, torch.Tensor):
                    raise TypeError(f"{kernel}: out must be a torch.Tensor or None, got {type(out).__name__}")
                out_aliasing(kernel, out, in_place, **{n: v for n, v in given.items() if n in names})
            return fn(*args, **kwargs)

        checked.layouts, checked.in_place = dict(layouts), tuple(in_place)
        return checked

    return wrap
