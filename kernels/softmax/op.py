"""softmax, the cuTile Rust port: y = exp(x - max(x, -1)) / sum(exp(x - max(x, -1)), -1).

    from kernels.softmax.op import softmax
    y = softmax(x)                               # x: (..., n) CUDA f16/bf16/f32, over the last dim

Calls `cutile_softmax` in libcutile_kernels.so (kernels/softmax/ffi.rs) on x's device and that
device's current torch stream. The output is allocated here with torch.empty; Rust only borrows.
`variant="auto"` (the default) uses the autotuned (block, rows, occupancy[, warps]) for this GPU, dtype
and shape class (tilekit.autotune; candidates from spec.variants); "default" lets ffi.rs pick; a
dict picks one explicitly.
"""
from __future__ import annotations

import torch

from kernels.softmax import spec
from tilekit import autotune, ffi

# The single source of truth for the export's signature (checked against `nm -D` by make symbols).
CDEF = """
int32_t cutile_softmax(const TensorDesc* out, const TensorDesc* x,
                       int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                       int32_t device_id, uint64_t stream);
"""

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1}  # ffi.rs picks


def _check(x: torch.Tensor, out: torch.Tensor | None) -> None:
    if x.dim() < 1:
        raise ValueError(f"softmax: x must have at least one dim, got shape {tuple(x.shape)}")
    if x.dtype not in DTYPES:
        raise TypeError(f"softmax: x must be one of {DTYPES}, got {x.dtype}")
    if x.stride(-1) != 1:
        raise ValueError("softmax: x must be contiguous in its last dim; pass x.contiguous()")
    if out is not None and (out.shape != x.shape or out.dtype != x.dtype or out.device != x.device):
        raise ValueError(f"softmax: out must be {tuple(x.shape)} {x.dtype} on {x.device}, got {tuple(out.shape)} {out.dtype} {out.device}")
    if x.device.type != "cuda":
        raise ValueError(f"softmax: x must be on a CUDA device, got {x.device}")


def export_args(block: int, rows: int, occupancy: int, warps: int = -1) -> tuple[int, ...]:
    """A variant's arguments of the export, (block, rows, occupancy, warps). Pure, so the CPU tests
    check spec.variants through exactly what launch passes."""
    return int(block), int(rows), int(occupancy), int(warps)


def launch(x2: torch.Tensor, y2: torch.Tensor, block: int, rows: int, occupancy: int, warps: int = -1) -> None:
    """One call of the export on 2-D views with one variant (export_args); raises
    ffi.KernelError on a non-zero code."""
    device_id, stream = ffi.stream_args(x2)
    lib = ffi.library()
    d_out, d_x = lib.pack(y2), lib.pack(x2)
    lib.call("softmax", "cutile_softmax", d_out, d_x, *export_args(block, rows, occupancy, warps), device_id, stream)


def softmax(x: torch.Tensor, *, variant: str | dict = "auto", out: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last dim. Raises ValueError/TypeError on bad input and ffi.KernelError on
    a non-zero return code."""
    _check(x, out)
    n = x.shape[-1]
    x2 = x if x.dim() == 2 else x.reshape(-1, n)
    y = out if out is not None else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    y2 = y if y.dim() == 2 else y.view(-1, n)
    if x2.numel() == 0:
        return y
    if variant == "auto":
        m = x2.shape[0]
        dtype = str(x.dtype).removeprefix("torch.")
        variant = autotune.best(
            "softmax", spec.tune_key(dtype, m, n), spec.variants(m, n),
            lambda v: (lambda: launch(x2, y2, **v)))
    elif variant == "default":
        variant = DEFAULT_VARIANT
    launch(x2, y2, **variant)
    return y
