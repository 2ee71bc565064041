"""rms_norm, the cuTile Rust port: y = x * rsqrt(mean(x^2, -1) + eps) * weight.

    from kernels.rms_norm.op import rms_norm
    y = rms_norm(x, weight, eps=1e-6)            # x: (..., n) CUDA f16/bf16/f32, weight: (n,)

Calls `cutile_rms_norm` in libcutile_kernels.so (kernels/rms_norm/ffi.rs) on x's device and that
device's current torch stream. The output is allocated here with torch.empty; Rust only borrows.
"""
from __future__ import annotations

import torch

from tilekit import ffi

# The single source of truth for the export's signature (checked against `nm -D` by make symbols).
CDEF = """
int32_t cutile_rms_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* weight,
                        float eps, int32_t block, int32_t rows, int32_t device_id, uint64_t stream);
"""

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DEFAULT = -1  # let ffi.rs choose block / rows


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *, block: int = DEFAULT,
             rows: int = DEFAULT, out: torch.Tensor | None = None) -> torch.Tensor:
    """RMSNorm over the last dim. `block`/`rows` pick the kernel variant (tile width, rows per
    tile block); -1 leaves the choice to the library. Raises ValueError/TypeError on bad input
    and ffi.KernelError on a non-zero return code."""
    if x.dim() < 1 or weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(f"rms_norm: weight must be ({x.shape[-1]},) for x of shape {tuple(x.shape)}, got {tuple(weight.shape)}")
    if x.dtype not in DTYPES or weight.dtype != x.dtype:
        raise TypeError(f"rms_norm: x and weight must share one dtype of {DTYPES}, got {x.dtype} and {weight.dtype}")
    if x.device != weight.device:
        raise ValueError(f"rms_norm: x is on {x.device} but weight on {weight.device}")
    if x.stride(-1) != 1:
        raise ValueError("rms_norm: x must be contiguous in its last dim; pass x.contiguous()")
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    y = out if out is not None else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.shape != x.shape or y.dtype != x.dtype:
        raise ValueError(f"rms_norm: out must be {tuple(x.shape)} {x.dtype}, got {tuple(y.shape)} {y.dtype}")
    y2 = y if y.dim() == 2 else y.view(-1, x.shape[-1])
    if x2.numel() == 0:
        return y
    device_id, stream = ffi.stream_args(x2)
    lib = ffi.library()
    d_out, d_x, d_w = lib.pack(y2), lib.pack(x2), lib.pack(weight)
    lib.call("rms_norm", "cutile_rms_norm", d_out, d_x, d_w, float(eps), int(block), int(rows), device_id, stream)
    return y
