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
    """Candidate (block, rows, occupancy[, warps]), at most 8, so tuning a new shape class stays
    within seconds; the first is what TILEKIT_AUTOTUNE=0 runs. From the H200 sweeps (2026-11-29,
    scripts/sweep_variants.py; kernels/softmax/NOTES.md), occupancy decides more than tile shape:
      * short rows (n <= 2048): ~4K-element tiles of whole rows at occupancy 8 (1024 x 4: 0.0716
        ms at 65536 x 1024, ahead of Triton's 0.0753), then 2K at occupancy 8, 8K at occupancy 4;
      * rows up to 16K held whole: ~8K-element tiles with 8 worker warps at occupancy 4 (4096 x 2:
        0.300 ms) and without (0.336), one row at occupancy 3 and 4 (8192 x 1 f32: 1.026 / 1.033
        ms); the compiler's own occupancy was 3-10x slower everywhere;
      * since the unmasked entry (rows exactly one tile wide, third run): 1024 x 4 at occupancy 8
        0.0645 ms, every whole-row 4096 candidate 0.260-0.267 ms (4096 x 1 with 8 warps fastest);
        the same candidates stay, the padded entry still needs them for other n;
      * n > 8192: also the looped online form with 4096- or 2048-wide column tiles of 8K elements
        (x read twice, mostly from L2; three exps per element), and for n > 16384 also 8192 x 1
        and 4096 x 4, at occupancy 4."""
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
    seen, out = set(), []
    for block, rows, occ, warps in shapes:
        rows = min(rows, max_rows)
        if (block, rows, occ, warps) in seen:
            continue
        seen.add((block, rows, occ, warps))
        v = {"block": block, "rows": rows, "occupancy": occ}
        if warps:
            v["warps"] = warps
        out.append(v)
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
