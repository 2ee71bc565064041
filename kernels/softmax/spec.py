"""softmax: what to test and time, and how to judge it. Read by tests/kernels/test_softmax.py,
scripts/sweep_variants.py and op.py's autotune; nothing here touches the GPU at import.

y = exp(x - max(x, -1)) / sum(exp(x - max(x, -1)), -1) over the last dim of an (m, n) tensor;
f32 math, output in x's dtype.
"""
from __future__ import annotations

import torch

KERNEL = "softmax"
DTYPES = ("float16", "bfloat16", "float32")

# Correctness: tiny to large and irregular n (1, 1000, 4097, 20000, 32768); row_stride > n
# exercises padded rows; n > 16384 takes the looped (online) kernel by default.
CORRECTNESS_SHAPES = [
    {"m": 1, "n": 1},
    {"m": 3, "n": 1000},
    {"m": 257, "n": 4097},
    {"m": 4096, "n": 4096, "row_stride": 4160},
    {"m": 65536, "n": 1024},
    {"m": 100, "n": 20000, "row_stride": 20032},
    {"m": 64, "n": 32768},
]

# Benchmarks (the perf configs).
PERF_CONFIGS = [
    {"dtype": "float16", "m": 65536, "n": 1024},
    {"dtype": "float16", "m": 65536, "n": 4096},
    {"dtype": "float32", "m": 65536, "n": 8192},
]

# ||y - ref|| / ||ref|| and max |y - ref| / (1 + |ref|) against the float64 reference: a few
# output ulps of each dtype (softmax values are in [0, 1]).
TOLERANCE = {"float16": (2e-3, 1e-2), "bfloat16": (1.6e-2, 6e-2), "float32": (1e-5, 1e-5)}

# Every row is shifted by up to +-ROW_SHIFT: exp without subtracting the row max overflows (or
# underflows to 0/0) in f32 beyond ~88, so a numerically unstable kernel fails correctness.
ROW_SHIFT = 200.0


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs (never zeros): x = 2 * N(0, 1) + a per-row shift in [-200, 200]."""
    g = torch.Generator(device=device)
    g.seed() if seed is None else g.manual_seed(seed)
    dt = torch_dtype(cfg["dtype"])
    m, n = cfg["m"], cfg["n"]
    ld = cfg.get("row_stride", n)
    shift = ROW_SHIFT * (2 * torch.rand(m, 1, generator=g, device=device, dtype=torch.float32) - 1)
    x = (2 * torch.randn(m, ld, generator=g, device=device, dtype=torch.float32) + shift).to(dt)[:, :n]
    return {"x": x}


def reference(inputs: dict) -> torch.Tensor:
    return torch.softmax(inputs["x"].double(), dim=-1)


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read x once, write y once."""
    size = torch.finfo(torch_dtype(cfg["dtype"])).bits // 8
    return 2 * cfg["m"] * cfg["n"] * size


# -- autotune: the port's variants (ffi.rs: block = tile width, rows per tile block, occupancy) --

MAX_ROW_BLOCK = 16384  # widest row a candidate holds whole in one tile (ffi.rs MAX_DEFAULT_ROW_BLOCK)
MAX_ROWS = 64          # ffi.rs accepts 1..=64 rows per tile block


def tune_key(dtype: str, m: int, n: int) -> dict:
    """Problem class: exact n (it decides tiling), m rounded up to a power of two."""
    return {"dtype": dtype, "n": n, "m_class": 1 << max(0, (m - 1).bit_length())}


def variants(m: int, n: int) -> list[dict]:
    """Candidate (block, rows, occupancy), at most 10, so tuning a new shape class stays within
    seconds. From rms_norm's H200 sweep (the same load-reduce-scale-store shape): tiles of ~8K
    elements with occupancy 2-4 were fastest and one row per tile block was 3-10x slower. So:
      * n <= 16384: the whole row in one tile (one read of x, one exp per element) with 8K or
        16K elements of rows per tile block -- 8 / 16 rows at n = 1024, 2 / 4 at n = 4096, 1 / 2
        at n = 8192;
      * n > 8192: also the looped online form with 4096- or 2048-wide column tiles of 8K
        elements (x read twice, mostly from L2; three exps per element), and for n > 16384 also
        8192 x 1 and 4096 x 4.
    Occupancy 4 and 2 for each; for rows of n <= 4096 also 1 and 2 rows at occupancy 8 (below).
    The first candidate is ffi.rs's default shape (what
    TILEKIT_AUTOTUNE=0 runs)."""
    pow2 = 1 << max(4, (n - 1).bit_length())
    max_rows = min(MAX_ROWS, 1 << max(0, (m - 1).bit_length()))
    shapes = []
    if pow2 <= MAX_ROW_BLOCK:
        shapes += [(pow2, max(1, elems // pow2)) for elems in (8192, 16384)]
    if pow2 > 8192:
        shapes += [(4096, 2), (2048, 4)]
    if pow2 > MAX_ROW_BLOCK:
        shapes += [(8192, 1), (4096, 4)]
    seen, out = set(), []
    for block, rows in shapes:
        rows = min(rows, max_rows)
        if (block, rows) in seen:
            continue
        seen.add((block, rows))
        out += [{"block": block, "rows": rows, "occupancy": occ} for occ in (4, 2)]
    if pow2 <= 4096:
        # Short rows, few rows per tile block, many blocks per SM: the first H200 sweep
        # (2026-11-29, results/h200/softmax/reports/logs/sweep_variants.txt) had cuTile Python's
        # one-row-per-program kernel at 0.096 ms and Triton's at 0.076 ms for 65536x1024 f16,
        # against 0.118 ms for this port's best 8-row tile (its rows reduce through shared memory
        # with 13 barriers); tileiras keeps these tiles at 64 registers, so 8 CTAs fit an SM.
        out += [{"block": pow2, "rows": rows, "occupancy": 8} for rows in (1, 2) if rows <= max_rows]
    return out


# -- how the suites and scripts call each side (the only kernel-specific glue they need) --------

def run_port(inputs: dict, out=None, variant="auto"):
    from kernels.softmax.op import softmax

    return softmax(inputs["x"], variant=variant, out=out)


def run_baseline(backend: str, inputs: dict, variant: str | None = None):
    """backend: "cutile" | "triton" | "torch" (baselines.BACKENDS); variant: one of
    baselines.VARIANTS for the backends that have variants."""
    from kernels.softmax import baselines

    kwargs = {} if variant is None else {"variant": variant}
    return baselines.BACKENDS[backend](inputs["x"], **kwargs)
