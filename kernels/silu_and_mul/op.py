"""silu_and_mul, the cuTile Rust port: out = silu(x[..., :H]) * x[..., H:], silu(a) = a * sigmoid(a).

    from kernels.silu_and_mul.op import silu_and_mul
    y = silu_and_mul(x)                  # x: (..., 2H) CUDA f16/bf16/f32 -> y: (..., H)

Calls `cutile_silu_and_mul` in libcutile_kernels.so (kernels/silu_and_mul/ffi.rs) on x's device
and that device's current torch stream. The output is allocated here with torch.empty (or passed
as `out`); Rust only borrows. `variant="auto"` (the default) uses the autotuned (block, rows,
occupancy[, warps]) for this GPU, dtype and shape class (tilekit.autotune over `variants`);
"default" takes ffi.rs's tile with occupancy 4; a dict picks one explicitly.
"""

from __future__ import annotations

import torch

from tilekit import autotune, checks, ffi

# The single source of truth for the export's signature (checked against `nm -D` by make symbols).
CDEF = """
int32_t cutile_silu_and_mul(const TensorDesc* out, const TensorDesc* x,
                            int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                            int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")
# ffi.rs picks the tile (~4K output elements); occupancy 4, not the compiler's default, which
# was 1.5-3x slower for every streaming tile of rms_norm on the H200.
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": 4}


def export_args(block: int, rows: int, occupancy: int, warps: int = -1) -> tuple[int, ...]:
    """A variant's arguments of the export, (block, rows, occupancy, warps). Pure, so the CPU tests
    check `variants` through exactly what launch passes."""
    return int(block), int(rows), int(occupancy), int(warps)


def launch(x2: torch.Tensor, y2: torch.Tensor, block: int, rows: int, occupancy: int, warps: int = -1) -> None:
    """One call of the export on 2-D views with one variant; raises ffi.KernelError on a non-zero code."""
    device_id, stream = ffi.stream_args(x2)
    lib = ffi.library()
    d_out, d_x = lib.pack(y2), lib.pack(x2)
    lib.call(
        "silu_and_mul",
        "cutile_silu_and_mul",
        d_out,
        d_x,
        *export_args(block, rows, occupancy, warps),
        device_id,
        stream,
    )


def silu_and_mul(x: torch.Tensor, *, variant: str | dict = "auto", out: torch.Tensor | None = None) -> torch.Tensor:
    """silu(gate) * up over the last dim of x = [gate | up]. Raises ValueError/TypeError on bad
    input and ffi.KernelError on a non-zero return code."""
    if x.dim() < 1 or x.shape[-1] % 2 != 0:
        raise ValueError(f"silu_and_mul: x must be (..., 2H) with an even last dim, got shape {tuple(x.shape)}")
    checks.dtypes("silu_and_mul", DTYPES, x=x)
    checks.contiguous_last_dim("silu_and_mul", size_one_ok=True, x=x)
    checks.out_matches("silu_and_mul", out, (*x.shape[:-1], x.shape[-1] // 2), x)
    checks.cuda("silu_and_mul", x=x)
    two_h = x.shape[-1]
    h = two_h // 2
    x2 = x if x.dim() == 2 else x.reshape(-1, two_h)
    y = out if out is not None else torch.empty((*x.shape[:-1], h), dtype=x.dtype, device=x.device)
    y2 = y if y.dim() == 2 else y.view(-1, h)
    if y2.numel() == 0:
        return y
    m, dtype = x2.shape[0], str(x.dtype).removeprefix("torch.")
    variant = autotune.pick(
        "silu_and_mul",
        variant,
        default=DEFAULT_VARIANT,
        key=tune_key(dtype, m, h),
        candidates=variants(m, h),
        make_call=lambda v: lambda: launch(x2, y2, **v),
    )
    launch(x2, y2, **variant)
    return y


# -- autotune: the port's variants (ffi.rs: block = tile width, rows per tile block, occupancy) --

DEFAULT_TILE = 4096  # output elements per tile block of the default (ffi.rs DEFAULT_TILE_ELEMS)
MAX_ROWS = 64


def default_block(h: int) -> int:
    """ffi.rs's default_block: the whole row (next power of two, >= 16) up to 4096, else the
    widest power-of-two column tile in [256, 4096] whose padding wastes at most 1/8 of the lanes."""
    if h <= 4096:
        return max(16, 1 << max(0, (h - 1).bit_length()))
    for b in (4096, 2048, 1024, 512):
        if -(-h // b) * b * 8 <= h * 9:
            return b
    return 256


def tune_key(dtype: str, m: int, h: int) -> dict:
    """Problem class: exact h (it decides tiling), m rounded up to a power of two."""
    return {"dtype": dtype, "h": h, "m_class": 1 << max(0, (m - 1).bit_length())}


def variants(m: int, h: int) -> list[dict]:
    """Candidate (block, rows, occupancy[, warps]), few so tuning a class stays within seconds; the
    first is what TILEKIT_AUTOTUNE=0 runs. From the H200 sweep (kernels/silu_and_mul/NOTES.md), on
    the zero-padded entry, whose loads tileiras serializes (each 16-byte load guarded and unpacked
    in its own branch), many small CTAs per SM win: 1024-wide one-row tiles at occupancy 8 or 16,
    then 8K-element tiles at occupancy 4 (4096 x 2, 2048 x 4), then 2048-wide tiles with 8 worker
    warps at occupancy 8; ffi.rs's default (4096 x 1 at occupancy 4) was 1.7x slower. Shapes the
    tile divides run the unmasked entry, whose loads are all in flight at once, so larger tiles at
    lower occupancy are in too: 4K-element tiles at occupancy 4 and 2K at occupancy 8.

    >>> [tuple(v.values()) for v in variants(65536, 4096)]
    [(1024, 1, 8), (1024, 1, 16), (2048, 1, 8), (4096, 1, 4), (4096, 2, 4), (2048, 1, 8, 8)]
    """
    pow2 = 1 << max(4, (h - 1).bit_length())
    bw = default_block(h)
    max_rows = min(MAX_ROWS, 1 << max(0, (m - 1).bit_length()))
    narrow, mid = min(1024, pow2), min(2048, pow2)
    shapes = [
        (narrow, max(1, 1024 // narrow), 8, None),
        (narrow, max(1, 1024 // narrow), 16, None),
        (mid, max(1, 2048 // mid), 8, None),
        (bw, max(1, DEFAULT_TILE // bw), 4, None),
        (bw, max(1, 2 * DEFAULT_TILE // bw), 4, None),
        (mid, max(1, 2048 // mid), 8, 8),
    ]
    return autotune.unique({"block": b, "rows": min(r, max_rows), "occupancy": o, "warps": w} for b, r, o, w in shapes)
