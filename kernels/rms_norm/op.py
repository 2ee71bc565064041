"""rms_norm, the cuTile Rust port: y = x * rsqrt(mean(x^2, -1) + eps) * weight.

    from kernels.rms_norm.op import rms_norm
    y = rms_norm(x, weight, eps=1e-6)            # x: (..., n) CUDA f16/bf16/f32, weight: (n,)

Calls `cutile_rms_norm` in libcutile_kernels.so (kernels/rms_norm/ffi.rs) on x's device and that
device's current torch stream. The output is allocated here with torch.empty; Rust only borrows.
`variant="auto"` (the default) uses the autotuned (block, rows, occupancy) for this GPU, dtype
and shape class (tilekit.autotune; candidates from spec.variants); a dict picks one explicitly.
"""
from __future__ import annotations

import functools

import torch

from kernels.rms_norm import spec
from tilekit import autotune, ffi

# The single source of truth for the export's signature (checked against `nm -D` by make symbols).
CDEF = """
int32_t cutile_rms_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* weight,
                        float eps, int32_t block, int32_t rows, int32_t occupancy,
                        int32_t programs, int32_t device_id, uint64_t stream);
"""

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1, "programs_per_sm": 0}  # ffi.rs picks


def _check(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor | None) -> None:
    if x.dim() < 1 or weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(f"rms_norm: weight must be ({x.shape[-1]},) for x of shape {tuple(x.shape)}, got {tuple(weight.shape)}")
    if x.dtype not in DTYPES or weight.dtype != x.dtype:
        raise TypeError(f"rms_norm: x and weight must share one dtype of {DTYPES}, got {x.dtype} and {weight.dtype}")
    if x.stride(-1) != 1:
        raise ValueError("rms_norm: x must be contiguous in its last dim; pass x.contiguous()")
    if out is not None and (out.shape != x.shape or out.dtype != x.dtype or out.device != x.device):
        raise ValueError(f"rms_norm: out must be {tuple(x.shape)} {x.dtype} on {x.device}, got {tuple(out.shape)} {out.dtype} {out.device}")
    if x.device.type != "cuda" or x.device != weight.device:
        raise ValueError(f"rms_norm: x and weight must be on one CUDA device, got {x.device} and {weight.device}")


def export_args(block: int, rows: int, occupancy: int, programs_per_sm: int = 0, *, sms: int) -> tuple[int, ...]:
    """A variant's arguments of the export, (block, rows, occupancy, programs), on a GPU with `sms`
    SMs: programs_per_sm > 0 selects the persistent kernel on SMs x programs_per_sm tile blocks.
    Pure, so the CPU tests check spec.variants through exactly what launch passes."""
    programs = programs_per_sm * sms if programs_per_sm > 0 else 0
    return int(block), int(rows), int(occupancy), int(programs)


def launch(x2: torch.Tensor, weight: torch.Tensor, eps: float, y2: torch.Tensor, block: int, rows: int, occupancy: int,
           programs_per_sm: int = 0) -> None:
    """One call of the export on 2-D views with one variant (export_args); raises
    ffi.KernelError on a non-zero code."""
    device_id, stream = ffi.stream_args(x2)
    sms = _sm_count(device_id) if programs_per_sm > 0 else 0
    lib = ffi.library()
    d_out, d_x, d_w = lib.pack(y2), lib.pack(x2), lib.pack(weight)
    lib.call("rms_norm", "cutile_rms_norm", d_out, d_x, d_w, float(eps),
             *export_args(block, rows, occupancy, programs_per_sm, sms=sms), device_id, stream)


@functools.lru_cache(maxsize=None)
def _sm_count(device_id: int) -> int:
    return torch.cuda.get_device_properties(device_id).multi_processor_count


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *, variant: str | dict = "auto",
             out: torch.Tensor | None = None) -> torch.Tensor:
    """RMSNorm over the last dim. Raises ValueError/TypeError on bad input and ffi.KernelError
    on a non-zero return code."""
    _check(x, weight, out)
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
            "rms_norm", spec.tune_key(dtype, m, n), spec.variants(m, n),
            lambda v: (lambda: launch(x2, weight, eps, y2, **v)))
    elif variant == "default":
        variant = DEFAULT_VARIANT
    launch(x2, weight, eps, y2, **variant)
    return y
