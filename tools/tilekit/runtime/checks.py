"""The argument checks every kernels/<name>/op.py makes before it touches the GPU, with one wording
across kernels (the suites' bad-input cases match these messages). Each takes the kernel's name
and the tensors by their argument names, and raises TypeError/ValueError saying what to fix.

Every entry is decorated with tilekit.runtime.port.entry, which applies the rules all ports share here
before the entry's own checks run: each tensor argument's rank (`rank`, from its declared layout),
and the aliasing rule (`out_aliasing`; docs/kernels.md, "Aliasing"):

- `out` that *is* an input (`overlap` says "same": one address, shape, strides and dtype) is an
  in-place call, allowed for the inputs named in `in_place` (kernels whose tile blocks read every
  element they write before writing it, and no other block reads it) and refused otherwise;
- any other memory shared by `out` and an input is refused, naming both.
"""

from __future__ import annotations


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


# -- ranks and the aliasing rule, applied by tilekit.runtime.port.entry ----------------------------------------------


def layout_rank(layout: str) -> tuple[int, bool]:
    """(dims named, whether more may lead) of a layout as entries declare it: its first parenthesized
    group (after a "; " comes a hint for rank's message).

    >>> layout_rank("(..., n)"), layout_rank("(n,)"), layout_rank("(batch, k, n); b.expand(batch, k, n) for one b")
    ((1, True), (1, False), (3, False))
    """
    group = layout[layout.index("(") + 1 : layout.index(")")]
    parts = [p.strip() for p in group.split(",") if p.strip()]
    return len([p for p in parts if p != "..."]), "..." in parts


def rank(kernel: str, name: str, t, layout: str, dims: tuple[int, bool] | None = None) -> None:
    """t is a tensor of the rank `layout` declares (`dims`: its layout_rank, when parsed already):
    TypeError for a non-tensor, ValueError naming the layout and what came otherwise.

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
    >>> rank("bmm", "b", torch.empty(8, 3), "(batch, k, n); one b for every product: b.expand(batch, k, n)")
    Traceback (most recent call last):
    ValueError: bmm: b must be (batch, k, n), a tensor of 3 dims, got a 2-d tensor of shape (8, 3) (one b for every product: b.expand(batch, k, n))
    """
    import torch

    shape, _, hint = layout.partition("; ")
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{kernel}: {name} must be a torch.Tensor {shape}, got {type(t).__name__}")
    named, leading = dims or layout_rank(layout)
    if t.dim() == named or (leading and t.dim() > named):
        return
    need = f"at least {named} dim{'s' * (named != 1)}" if leading else f"{named} dim{'s' * (named != 1)}"
    raise ValueError(
        f"{kernel}: {name} must be {shape}, a tensor of {need}, got a {t.dim()}-d tensor of shape {tuple(t.shape)}"
        + (f" ({hint})" if hint else "")
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


def _without_memory(t) -> bool:
    """A tensor with no address to read: on the meta device, or fake (torch.compile's tracing).
    Plain tensors and parameters answer without the fake-tensor test (the per-call path)."""
    import torch

    if t.device.type == "meta":
        return True
    if type(t) in (torch.Tensor, torch.nn.Parameter):
        return False
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(t)


def span(t) -> int:
    """Elements from a tensor's first to its last, as ffi.rs's views index them (a stride-0 batch
    spans one matrix, a column slice (rows - 1) * row stride + cols); an empty one none.

    >>> import torch
    >>> span(torch.empty(4, 3, 5)), span(torch.empty(3, 5).expand(4, 3, 5)), span(torch.empty(4, 5, 3).transpose(1, 2))
    (60, 15, 60)
    >>> span(torch.empty(2, 4096)[:, :8]), span(torch.empty(0, 4096)[:, :8])
    (4104, 0)
    """
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) if t.numel() else 0


def _strides_where_sized(t) -> tuple:
    """t's strides on its dims of more than one element: the only ones that place an element."""
    return tuple(s for n, s in zip(t.shape, t.stride()) if n > 1)


def overlap(a, b) -> str:
    """How the memory of two tensors meets: "none"; "same" (one address, shape and dtype, and the
    same strides on every dim of more than one element: `out=x` in place); "partial" (any other
    element in common, found exactly by numpy.shares_memory; docs/kernels.md says why not torch's
    check). Tensors without memory (meta, fake) are compared by storage and storage offset.

    >>> import torch
    >>> x = torch.zeros(4, 8)
    >>> overlap(x, x.view(4, 8)), overlap(x, x[1:]), overlap(x, x.t()), overlap(x, torch.zeros(4, 8))
    ('same', 'partial', 'partial', 'none')
    >>> wide = torch.zeros(4, 16)  # two halves of each row: neighbours, not overlapping
    >>> overlap(wide[:, :8], wide[:, 8:]), overlap(wide[:, :8], wide[:, 7:15])
    ('none', 'partial')
    >>> overlap(wide[-1:, :8], wide[-1:, :8].clone()), overlap(wide[-1:, :8], wide[-1, :8].view(1, 8))  # strides (16, 1), (8, 1)
    ('none', 'same')
    """
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return "none"
    if _without_memory(a) or _without_memory(b):
        if not _is_alias_of(a, b):
            return "none"
        start_a, start_b = a.storage_offset() * a.element_size(), b.storage_offset() * b.element_size()
    else:
        start_a, start_b = a.data_ptr(), b.data_ptr()
    if start_a + span(a) * a.element_size() <= start_b or start_b + span(b) * b.element_size() <= start_a:
        return "none"
    if start_a == start_b and a.shape == b.shape and a.dtype == b.dtype:
        if _strides_where_sized(a) == _strides_where_sized(b):
            return "same"
    import numpy as np

    base = 1 << 44  # numpy needs addresses; storage offsets are placed past a fixed base
    start_a, start_b = (start_a, start_b) if start_a > base else (start_a + base, start_b + base)
    try:
        shared = np.shares_memory(np.asarray(_Memory(start_a, a)), np.asarray(_Memory(start_b, b)), MAX_OVERLAP_WORK)
    except np.exceptions.TooHardError:
        shared = True
    return "partial" if shared else "none"


def _is_alias_of(a, b) -> bool:
    import torch

    return torch._C._is_alias_of(a, b)


def internal_overlap(t) -> bool:
    """Whether two elements of t may share memory (an expanded tensor, stride 0): False when its dims
    of more than one element, in stride order, each step past all the smaller ones; True otherwise
    (a layout so interleaved is refused rather than solved).

    >>> import torch
    >>> x = torch.zeros(4, 8)
    >>> internal_overlap(x), internal_overlap(x.t()), internal_overlap(x[:, ::2]), internal_overlap(x[:1].expand(4, 8))
    (False, False, False, True)
    """
    reach = 0
    for s, n in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n > 1):
        if s <= reach:
            return True
        reach += (n - 1) * s
    return False


def out_aliasing(kernel: str, out, in_place: tuple[str, ...], **inputs) -> None:
    """The aliasing rule: `out` may be an input named in `in_place` (an in-place call); ValueError
    naming out and the input for an in-place call the kernel cannot make, or any other overlap.
    Non-tensor inputs (scalars, None) are skipped."""
    import torch

    if internal_overlap(out):
        raise ValueError(
            f"{kernel}: out {tuple(out.shape)} with strides {out.stride()} has elements that share memory (an "
            f"expanded tensor?): pass an out with a place of its own for each element"
        )
    for name, t in inputs.items():
        if not isinstance(t, torch.Tensor):
            continue
        how = overlap(out, t)
        if how == "same" and name not in in_place:
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
