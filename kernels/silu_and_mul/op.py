"""silu_and_mul, the cuTile Rust port: out = silu(x[..., :H]) * x[..., H:], silu(a) = a * sigmoid(a).

    y = silu_and_mul(x, variant="auto", out=None)    # x: (..., 2H) CUDA f16/bf16/f32 -> y: (..., H)

`cutile_silu_and_mul` (kernels/silu_and_mul/ffi.rs) called through tilekit.port; `variant`: "auto"
the autotuned candidate of `variants` for this GPU, dtype and shape class, "default" ffi.rs's, a dict.
"""

from __future__ import annotations

from torch import Tensor

from tilekit import autotune, checks, port

CDEF = """
int32_t cutile_silu_and_mul(const TensorDesc* out, const TensorDesc* x,
                            int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                            int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")
# ffi.rs's tile (~4K output elements) at occupancy 4: the compiler's was 1.5-3x slower (rms_norm, H200)
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": 4}


def export_args(block: int, rows: int, occupancy: int, warps: int = -1) -> tuple[int, ...]:
    """A variant's arguments of the export. Pure: the CPU tests check `variants` through it."""
    return int(block), int(rows), int(occupancy), int(warps)


def silu_and_mul(x: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """silu(gate) * up, x = [gate | up]; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if x.dim() < 1 or x.shape[-1] % 2 != 0:
        raise ValueError(f"silu_and_mul: x must be (..., 2H) with an even last dim, got shape {tuple(x.shape)}")
    checks.dtypes("silu_and_mul", DTYPES, x=x)
    checks.contiguous_last_dim("silu_and_mul", size_one_ok=True, x=x)
    checks.out_matches("silu_and_mul", out, (*x.shape[:-1], x.shape[-1] // 2), x)
    checks.cuda("silu_and_mul", x=x)
    return port.rows(__name__, x, out, x.shape[-1] // 2, variant=variant)


# -- autotune: the port's variants (ffi.rs: block = tile width, rows per tile block, occupancy) --

DEFAULT_TILE = 4096  # output elements per tile block of the default (ffi.rs DEFAULT_TILE_ELEMS)


def default_block(h: int) -> int:
    """ffi.rs's default_block: the whole row (next power of two, >= 16) up to 4096, else the
    widest power-of-two column tile in [256, 4096] whose padding wastes at most 1/8 of the lanes."""
    if h <= 4096:
        return max(16, autotune.pow2(h))
    return next((b for b in (4096, 2048, 1024, 512) if -(-h // b) * b * 8 <= h * 9), 256)


def tune_key(dtype: str, m: int, h: int) -> dict:
    """Problem class: exact h (it decides tiling), m rounded up to a power of two."""
    return {"dtype": dtype, "h": h, "m_class": autotune.pow2(m)}


def variants(m: int, h: int) -> list[dict]:
    """Candidates, few (each one JIT when tuning); TILEKIT_AUTOTUNE=0 runs the first. Why these:
    kernels/silu_and_mul/NOTES.md, "The variant space" (ffi.rs's default was 1.7x slower).

    >>> [tuple(v.values()) for v in variants(65536, 4096)]
    [(1024, 1, 8), (1024, 1, 16), (2048, 1, 8), (4096, 1, 4), (4096, 2, 4), (2048, 1, 8, 8)]
    """
    pow2, bw, max_rows = 1 << max(4, (h - 1).bit_length()), default_block(h), min(64, autotune.pow2(m))
    narrow, mid = min(1024, pow2), min(2048, pow2)
    narrow_rows, mid_rows = max(1, 1024 // narrow), max(1, 2048 // mid)
    shapes = [(narrow, narrow_rows, 8, None), (narrow, narrow_rows, 16, None), (mid, mid_rows, 8, None)]
    shapes += [(bw, max(1, DEFAULT_TILE // bw), 4, None), (bw, max(1, 2 * DEFAULT_TILE // bw), 4, None)]
    shapes += [(mid, mid_rows, 8, 8)]  # (block, rows, occupancy, warps)
    return autotune.unique({"block": b, "rows": min(r, max_rows), "occupancy": o, "warps": w} for b, r, o, w in shapes)
