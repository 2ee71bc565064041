"""matmul, the cuTile Rust port: C = A @ B in f16 or bf16 with f32 accumulation.

    from kernels.matmul.op import matmul
    c = matmul(a, b)                 # a: (m, k), b: (k, n) CUDA f16/bf16, last dims contiguous

Calls `cutile_matmul` in libcutile_kernels.so (kernels/matmul/ffi.rs) on a's device and that
device's current torch stream. The output is allocated here with torch.empty (or passed as
`out`, which may be a column slice of a wider buffer); Rust only borrows.
`variant="auto"` (the default) uses the autotuned variant for this GPU, dtype and shape class
(tilekit.autotune; candidates from spec.variants); "default" takes ffi.rs's defaults; a dict
{"bm", "bn", "bk", "group", "persistent", "occupancy", "cga"} picks one explicitly.
"""
from __future__ import annotations

import functools

import torch

from kernels.matmul import spec
from tilekit import autotune, ffi

# The single source of truth for the export's signature (checked against `nm -D` by make symbols).
CDEF = """
int32_t cutile_matmul(const TensorDesc* c, const TensorDesc* a, const TensorDesc* b,
                      int32_t bm, int32_t bn, int32_t bk, int32_t group, int32_t programs,
                      int32_t occupancy, int32_t num_cta_in_cga,
                      int32_t device_id, uint64_t stream);
"""

DTYPES = (torch.float16, torch.bfloat16)
DEFAULT_VARIANT = {"bm": -1, "bn": -1, "bk": -1, "group": -1, "persistent": False, "occupancy": -1, "cga": -1}


def _check(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> None:
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a must be (m, k) and b (k, n), got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype not in DTYPES or b.dtype != a.dtype:
        raise TypeError(f"matmul: a and b must share one dtype of {DTYPES}, got {a.dtype} and {b.dtype}")
    for name, t in (("a", a), ("b", b)):
        if t.shape[1] > 1 and t.stride(1) != 1:
            raise ValueError(f"matmul: {name} must be contiguous in its last dim; pass {name}.contiguous()")
    shape = (a.shape[0], b.shape[1])
    if out is not None and (tuple(out.shape) != shape or out.dtype != a.dtype or out.device != a.device):
        raise ValueError(f"matmul: out must be {shape} {a.dtype} on {a.device}, got {tuple(out.shape)} {out.dtype} {out.device}")
    (m, k), n = a.shape, b.shape[1]
    check_index_range(m, n, k, a.stride(0), b.stride(0), out.stride(0) if out is not None else n)
    if a.device.type != "cuda" or a.device != b.device:
        raise ValueError(f"matmul: a and b must be on one CUDA device, got {a.device} and {b.device}")


INDEX_LIMIT = 2**31 - 1  # ffi.rs row_stride(): the kernel's views index each operand with i32


def check_index_range(m: int, n: int, k: int, lda: int | None = None, ldb: int | None = None,
                      ldc: int | None = None) -> None:
    """ValueError unless every operand (a (m, k), b (k, n), c (m, n); row strides default to the
    column counts) spans at most INDEX_LIMIT elements, the limit ffi.rs enforces (-6 there). Pure,
    so it runs before any autotune or launch and the CPU tests can check it for any size."""
    for name, rows, cols, ld in (("a", m, k, lda), ("b", k, n, ldb), ("c", m, n, ldc)):
        if rows <= 0 or cols <= 0:
            continue  # nothing is indexed
        ld = cols if rows == 1 or ld is None else ld
        extent = (rows - 1) * ld + cols
        if extent > INDEX_LIMIT:
            raise ValueError(
                f"matmul: {name} ({rows} x {cols}, row stride {ld}) spans {extent} elements for m={m}, n={n}, k={k}; "
                f"the kernel indexes each operand with i32 (at most {INDEX_LIMIT} elements): split the product into "
                "smaller blocks")


@functools.lru_cache(maxsize=None)
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def persistent_programs(sms: int, occupancy: int, cga: int) -> int:
    """Tile blocks of a persistent grid: one per cluster of `cga` SMs, `occupancy` deep (-1 = 1)."""
    return max(1, sms // max(1, cga)) * max(1, occupancy)


def export_args(bm: int, bn: int, bk: int, group: int, persistent: bool, occupancy: int, cga: int, *,
                sms: int) -> tuple[int, ...]:
    """A variant's arguments of the export, (bm, bn, bk, group, programs, occupancy, num_cta_in_cga),
    on a GPU with `sms` SMs. Pure, so the CPU tests check spec.variants through exactly what launch
    passes."""
    programs = persistent_programs(sms, occupancy, cga) if persistent else 0
    return int(bm), int(bn), int(bk), int(group), int(programs), int(occupancy), int(cga)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, bm: int, bn: int, bk: int, group: int,
           persistent: bool, occupancy: int, cga: int) -> None:
    """One call of the export with one variant (export_args); raises ffi.KernelError on a non-zero
    code."""
    device_id, stream = ffi.stream_args(a)
    sms = _sm_count(device_id) if persistent else 0
    lib = ffi.library()
    d_c, d_a, d_b = lib.pack(c), lib.pack(a), lib.pack(b)
    lib.call("matmul", "cutile_matmul", d_c, d_a, d_b,
             *export_args(bm, bn, bk, group, persistent, occupancy, cga, sms=sms), device_id, stream)


def matmul(a: torch.Tensor, b: torch.Tensor, *, variant: str | dict = "auto",
           out: torch.Tensor | None = None) -> torch.Tensor:
    """C = A @ B. Raises ValueError/TypeError on bad input and ffi.KernelError on a non-zero
    return code."""
    _check(a, b, out)
    (m, k), n = a.shape, b.shape[1]
    c = out if out is not None else torch.empty((m, n), dtype=a.dtype, device=a.device)
    if c.numel() == 0:
        return c
    if k == 0:
        return c.zero_()
    if variant == "auto":
        dtype = str(a.dtype).removeprefix("torch.")
        variant = autotune.best(
            "matmul", spec.tune_key(dtype, m, n, k), spec.variants(m, n, k),
            lambda v: (lambda: launch(a, b, c, **v)))
    elif variant == "default":
        variant = DEFAULT_VARIANT
    launch(a, b, c, **variant)
    return c
