"""softmax, the cuTile Rust port: y = exp(x - max(x, -1)) / sum(exp(x - max(x, -1)), -1).

    from kernels.softmax.op import softmax
    y = softmax(x)                               # x: (..., n) CUDA f16/bf16/f32, over the last dim

Calls `cutile_softmax` in libcutile_kernels.so (kernels/softmax/ffi.rs) on x's device and that
device's current torch stream. The output is allocated here with torch.empty; Rust only borrows.
`variant="auto"` (the default) uses the autotuned (block, rows, occupancy[, warps]) for this GPU, dtype
and shape class (tilekit.autotune over `variants`); "default" lets ffi.rs pick; a dict picks one.
"""

from __future__ import annotations

import torch

from tilekit import autotune, checks, ffi

# The single source of truth for the export's signature (checked against `nm -D` by make symbols).
CDEF = """
int32_t cutile_softmax(const TensorDesc* out, const TensorDesc* x,
                       int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                       int32_t chunk, int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1}  # ffi.rs picks


def export_args(block: int, rows: int, occupancy: int, warps: int = -1, chunk: int = -1) -> tuple[int, ...]:
    """A variant's arguments of the export, (block, rows, occupancy, warps, chunk); chunk > 0 splits
    rows into chunk-column pieces (ffi.rs `SplitPlan`), -1 lets ffi.rs decide. Pure, so the CPU
    tests check `variants` through exactly what launch passes."""
    return int(block), int(rows), int(occupancy), int(warps), int(chunk)


def launch(x2: torch.Tensor, y2: torch.Tensor, block: int, rows: int, occupancy: int, warps: int = -1, chunk: int = -1):
    """One call of the export on 2-D views with one variant; raises ffi.KernelError on a non-zero code."""
    device_id, stream = ffi.stream_args(x2)
    lib = ffi.library()
    d_out, d_x = lib.pack(y2), lib.pack(x2)
    args = export_args(block, rows, occupancy, warps, chunk)
    lib.call("softmax", "cutile_softmax", d_out, d_x, *args, device_id, stream)


def softmax(x: torch.Tensor, *, variant: str | dict = "auto", out: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last dim. Raises ValueError/TypeError on bad input and ffi.KernelError on
    a non-zero return code."""
    if x.dim() < 1:
        raise ValueError(f"softmax: x must have at least one dim, got shape {tuple(x.shape)}")
    checks.dtypes("softmax", DTYPES, x=x)
    checks.contiguous_last_dim("softmax", x=x)
    checks.out_matches("softmax", out, x.shape, x)
    checks.cuda("softmax", x=x)
    n = x.shape[-1]
    x2 = x if x.dim() == 2 else x.reshape(-1, n)
    y = out if out is not None else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    y2 = y if y.dim() == 2 else y.view(-1, n)
    if x2.numel() == 0:
        return y
    m, dtype = x2.shape[0], str(x.dtype).removeprefix("torch.")
    variant = autotune.pick(
        "softmax",
        variant,
        default=DEFAULT_VARIANT,
        key=tune_key(dtype, m, n),
        candidates=variants(m, n),
        make_call=lambda v: lambda: launch(x2, y2, **v),
    )
    launch(x2, y2, **variant)
    return y


# -- autotune: the port's variants (ffi.rs: block = tile width, rows per tile block, occupancy) --

MAX_ROW_BLOCK = 16384  # widest row a candidate holds whole in one tile (ffi.rs MAX_DEFAULT_ROW_BLOCK)
MAX_ROWS = 64  # ffi.rs accepts 1..=64 rows per tile block
# The split form for n > MAX_ROW_BLOCK (ffi.rs `SplitPlan`: several tile blocks per row; issue 13,
# not yet swept): (block, rows, occupancy, chunk columns).
SPLIT_SHAPES = [(4096, 1, 8, 8192), (4096, 1, 4, 4096), (8192, 1, 4, 8192), (2048, 1, 8, 8192)]


def tune_key(dtype: str, m: int, n: int) -> dict:
    """Problem class: exact n (it decides tiling), m rounded up to a power of two.

    >>> tune_key("float16", 65535, 1000), tune_key("float32", 1, 1)
    ({'dtype': 'float16', 'n': 1000, 'm_class': 65536}, {'dtype': 'float32', 'n': 1, 'm_class': 1})
    """
    return {"dtype": dtype, "n": n, "m_class": 1 << max(0, (m - 1).bit_length())}


def variants(m: int, n: int) -> list[dict]:
    """Candidate (block, rows, occupancy[, warps]), at most 8, so tuning a new shape class stays
    within seconds; the first is what TILEKIT_AUTOTUNE=0 runs. From the H200 sweeps
    (kernels/softmax/NOTES.md, scripts/sweep_variants.py), where occupancy decided more than tile
    shape and the compiler's own occupancy was 3-10x slower everywhere: short rows (n <= 2048)
    ~4K-element tiles of whole rows at occupancy 8, then 2K at 8, 8K at 4; rows up to 16K held
    whole: ~8K-element tiles at occupancy 4 with 8 worker warps and without, one row at occupancy
    3 and 4; n > 8192 also the looped online form (x read twice, mostly from L2; three exps per
    element) with 4096- or 2048-wide column tiles of 8K elements, and for n > 16384 also 8192 x 1
    and 4096 x 4, at occupancy 4, then the split form (SPLIT_SHAPES, with a "chunk" knob). The
    unmasked entry (rows exactly one tile wide) kept the same candidates: the padded entry still
    needs them for other n.

    >>> def table(m, n): return [(v["block"], v["rows"], v["occupancy"], v.get("warps")) for v in variants(m, n)]
    >>> table(65536, 1024)
    [(1024, 4, 8, None), (1024, 2, 8, None), (1024, 8, 4, None)]
    >>> table(65536, 4096)
    [(4096, 2, 4, 8), (4096, 2, 4, None), (4096, 1, 3, None), (4096, 1, 4, None)]
    >>> table(65536, 8192)
    [(8192, 1, 4, 8), (8192, 1, 4, None), (8192, 1, 3, None)]
    >>> table(4096, 16384)
    [(16384, 1, 4, 8), (16384, 1, 4, None), (16384, 1, 3, None), (4096, 2, 4, None), (2048, 4, 4, None)]
    >>> table(64, 32768)[:4]
    [(4096, 2, 4, None), (2048, 4, 4, None), (8192, 1, 4, None), (4096, 4, 4, None)]
    >>> [(v["block"], v["rows"], v["occupancy"], v["chunk"]) for v in variants(64, 32768) if "chunk" in v] == SPLIT_SHAPES
    True
    >>> table(3, 1000)  # rows capped at 4
    [(1024, 4, 8, None), (1024, 2, 8, None), (1024, 4, 4, None)]
    >>> table(1, 1)
    [(16, 1, 8, None), (16, 1, 4, None)]
    """
    pow2 = 1 << max(4, (n - 1).bit_length())
    max_rows = min(MAX_ROWS, 1 << max(0, (m - 1).bit_length()))
    shapes = []  # (block, rows, occupancy, warps)
    if pow2 <= 2048:
        shapes += [(pow2, 4096 // pow2, 8, None), (pow2, 2048 // pow2, 8, None), (pow2, 8192 // pow2, 4, None)]
    elif pow2 <= MAX_ROW_BLOCK:
        rows = max(1, 8192 // pow2)
        shapes += [(pow2, rows, 4, 8), (pow2, rows, 4, None), (pow2, 1, 3, None), (pow2, 1, 4, None)]
    if pow2 > 8192:
        shapes += [(4096, 2, 4, None), (2048, 4, 4, None)]
    if pow2 > MAX_ROW_BLOCK:
        shapes += [(8192, 1, 4, None), (4096, 4, 4, None)]
    split = [(b, r, o, None, c) for b, r, o, c in SPLIT_SHAPES if pow2 > MAX_ROW_BLOCK]
    return autotune.unique(
        {"block": b, "rows": min(r, max_rows), "occupancy": o, "warps": w, "chunk": c}
        for b, r, o, w, c in [(*s, None) for s in shapes] + split
    )
