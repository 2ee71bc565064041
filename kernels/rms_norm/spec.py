"""rms_norm: what to test and time, and how to judge it. Read by tests/kernels/test_rms_norm.py
and by op.py's autotune; nothing here touches the GPU at import.

y = x * rsqrt(mean(x^2, -1) + eps) * w over the last dim of an (m, n) tensor; f32 accumulation.
"""
from __future__ import annotations

import torch

KERNEL = "rms_norm"
EPS = 1e-6
DTYPES = ("float16", "bfloat16", "float32")

# Correctness: tiny to large and irregular; row_stride > n exercises padded rows.
CORRECTNESS_SHAPES = [
    {"m": 1, "n": 1},
    {"m": 3, "n": 1000},
    {"m": 257, "n": 4097},
    {"m": 4096, "n": 4096, "row_stride": 4160},
    {"m": 65536, "n": 8192},
]

# Benchmarks (the perf configs).
PERF_CONFIGS = [
    {"dtype": "float16", "m": 262144, "n": 1024},
    {"dtype": "float16", "m": 262144, "n": 2048},
    {"dtype": "float16", "m": 262144, "n": 4096},
    {"dtype": "float16", "m": 65536, "n": 8192},
    {"dtype": "float16", "m": 65536, "n": 16384},
    {"dtype": "bfloat16", "m": 65536, "n": 8192},
]

# ||y - ref|| / ||ref|| and max |y - ref| / (1 + |ref|) against the float64 reference.
TOLERANCE = {"float16": (2e-3, 1e-2), "bfloat16": (1.6e-2, 6e-2), "float32": (1e-5, 1e-5)}


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs (never zeros): x ~ N(0, 1), w ~ 1 + N(0, 0.1)."""
    g = torch.Generator(device=device)
    g.seed() if seed is None else g.manual_seed(seed)
    dt = torch_dtype(cfg["dtype"])
    m, n = cfg["m"], cfg["n"]
    ld = cfg.get("row_stride", n)
    x = torch.randn(m, ld, generator=g, device=device, dtype=torch.float32).to(dt)[:, :n]
    w = (1 + 0.1 * torch.randn(n, generator=g, device=device, dtype=torch.float32)).to(dt)
    return {"x": x, "w": w, "eps": EPS}


def reference(inputs: dict) -> torch.Tensor:
    x, w = inputs["x"].double(), inputs["w"].double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + inputs["eps"]) * w


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read x once, write y once (w is n elements, negligible but counted)."""
    size = torch.finfo(torch_dtype(cfg["dtype"])).bits // 8
    return (2 * cfg["m"] * cfg["n"] + cfg["n"]) * size


# -- autotune: the port's variants (ffi.rs: block = tile width, rows per tile block, occupancy) --

MAX_ROWS = 64  # ffi.rs accepts 1..=64 rows per tile block


def tune_key(dtype: str, m: int, n: int) -> dict:
    """Problem class: exact n (it decides tiling), m rounded up to a power of two."""
    return {"dtype": dtype, "n": n, "m_class": 1 << max(0, (m - 1).bit_length())}


def variants(m: int, n: int) -> list[dict]:
    """Candidate (block, rows, occupancy, programs_per_sm), few enough that tuning a new shape class stays within
    seconds. Chosen from a full sweep on the H200 (scripts/sweep_variants.py, 2026-11-29, f16):
    the fast tiles hold ~8K elements (1024x8 rows: 0.263 ms at 262144x1024; 4096x2 and 2048x4:
    1.03 ms at 262144x4096) with occupancy 2-4; one row per tile block is 3-10x slower (2.58 ms).
    So: the whole row in one tile (8K or 16K elements of rows, or 2 rows of 16K), or for long
    rows 2K/4K-wide column tiles of 8K elements; occupancy 2 and 4; plus the persistent form of
    the 8K-element whole-row tile (programs_per_sm > 0). Rows are capped at what m has (rounded
    up to a power of two) and at MAX_ROWS, so rows narrower than 128 get smaller tiles (16 x 64
    for n <= 16), as ffi.rs's default does."""
    pow2 = 1 << max(4, (n - 1).bit_length())
    max_rows = min(MAX_ROWS, 1 << max(0, (m - 1).bit_length()))
    shapes = []
    if pow2 <= 16384:
        shapes += [(pow2, max(1, elems // pow2)) for elems in (8192, 16384)]
        if pow2 == 16384:
            shapes.append((pow2, 2))
    shapes += [(block, 8192 // block) for block in (2048, 4096) if block < n]
    seen, out = set(), []
    for block, rows in shapes:
        rows = min(rows, max_rows)
        if (block, rows) in seen:
            continue
        seen.add((block, rows))
        out += [{"block": block, "rows": rows, "occupancy": occ, "programs_per_sm": 0} for occ in (4, 2)]
    if pow2 <= 16384:
        # persistent: SMs x occupancy tile blocks, each loading w once (NOTES.md: w is re-read per
        # row tile otherwise, ~25 % extra L2 traffic at n = 16384)
        block, rows = shapes[0][0], min(shapes[0][1], max_rows)
        out += [{"block": block, "rows": rows, "occupancy": occ, "programs_per_sm": occ} for occ in (4, 2)]
    return out


# -- how the suites and scripts call each side (the only kernel-specific glue they need) --------

def run_port(inputs: dict, out=None, variant="auto"):
    from kernels.rms_norm.op import rms_norm

    return rms_norm(inputs["x"], inputs["w"], inputs["eps"], variant=variant, out=out)


def run_baseline(backend: str, inputs: dict, variant: str | None = None):
    """backend: "cutile" | "triton" | "torch" (baselines.BACKENDS); variant: one of
    baselines.VARIANTS for the backends that have variants."""
    from kernels.rms_norm import baselines

    kwargs = {} if variant is None else {"variant": variant}
    return baselines.BACKENDS[backend](inputs["x"], inputs["w"], inputs["eps"], **kwargs)
