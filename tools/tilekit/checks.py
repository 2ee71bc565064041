"""The argument checks every kernels/<name>/op.py makes before it touches the GPU, with one wording
across kernels (the suites' bad-input cases match these messages). Each takes the kernel's name
and the tensors by their argument names, and raises TypeError/ValueError saying what to fix.
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
