"""silu_and_mul, the cuTile Rust port: out = silu(x[..., :H]) * x[..., H:], silu(a) = a * sigmoid(a).

    from kernels.silu_and_mul.op import silu_and_mul
    y = silu_and_mul(x)                  # x: (..., 2H) CUDA f16/bf16/f32 -> y: (..., H)

Calls `cutile_silu_and_mul` in libcutile_kernels.so (kernels/silu_and_mul/ffi.rs) on x's device
and that device's current torch stream. The output is allocated here with torch.empty (or passed
as `out`); Rust only borrows. `variant="auto"` (the default) uses the autotuned (block, rows,
occupancy[, warps]) for this GPU, dtype and shape class (tilekit.autotune; candidates from spec.variants);
"default" takes ffi.rs's tile with occupancy 4; a dict picks one explicitly.
"""
from __future__ import annotations

import torch

from kernels.silu_and_mul import spec
from tilekit import autotune, ffi

# The single source of truth for the export's signature (checked against `nm -D` by make symbols).
CDEF = """
int32_t cutile_silu_and_mul(const TensorDesc* out, const TensorDesc* x,
                            int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                            int32_t device_id, uint64_t stream);
"""

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# ffi.rs picks the tile (~4K output elements); occupancy 4, not the compiler's default, which
# was 1.5-3x slower for every streaming tile of rms_norm on the H200.
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": 4}


def _check(x: torch.Tensor, out: torch.Tensor | None) -> None:
    if x.dim() < 1 or x.shape[-1] % 2 != 0:
        raise ValueError(f"silu_and_mul: x must be (..., 2H) with an even last dim, got shape {tuple(x.shape)}")
    if x.dtype not in DTYPES:
        raise TypeError(f"silu_and_mul: x must be one of {DTYPES}, got {x.dtype}")
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        raise ValueError("silu_and_mul: x must be contiguous in its last dim; pass x.contiguous()")
    want = (*x.shape[:-1], x.shape[-1] // 2)
    if out is not None and (tuple(out.shape) != want or out.dtype != x.dtype or out.device != x.device):
        raise ValueError(f"silu_and_mul: out must be {want} {x.dtype} on {x.device}, got {tuple(out.shape)} {out.dtype} {out.device}")
    if x.device.type != "cuda":
        raise ValueError(f"silu_and_mul: x must be on a CUDA device, got {x.device}")


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
    lib.call("silu_and_mul", "cutile_silu_and_mul", d_out, d_x, *export_args(block, rows, occupancy, warps), device_id, stream)


def silu_and_mul(x: torch.Tensor, *, variant: str | dict = "auto", out: torch.Tensor | None = None) -> torch.Tensor:
    """silu(gate) * up over the last dim of x = [gate | up]. Raises ValueError/TypeError on bad
    input and ffi.KernelError on a non-zero return code."""
    _check(x, out)
    two_h = x.shape[-1]
    h = two_h // 2
    x2 = x if x.dim() == 2 else x.reshape(-1, two_h)
    y = out if out is not None else torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
    y2 = y if y.dim() == 2 else y.view(-1, h)
    if y2.numel() == 0:
        return y
    if variant == "auto":
        m = x2.shape[0]
        dtype = str(x.dtype).removeprefix("torch.")
        variant = autotune.best(
            "silu_and_mul", spec.tune_key(dtype, m, h), spec.variants(m, h),
            lambda v: (lambda: launch(x2, y2, **v)))
    elif variant == "default":
        variant = DEFAULT_VARIANT
    launch(x2, y2, **variant)
    return y
