"""matmul: what to test and time, and how to judge it. Read by tests/kernels/test_matmul.py, by
op.py's autotune and by scripts/sweep_variants.py; nothing here touches the GPU at import.

C = A @ B with A (m, k), B (k, n), C (m, n) in f16 or bf16, products accumulated in f32.
"""
from __future__ import annotations

import torch

KERNEL = "matmul"
DTYPES = ("bfloat16", "float16")

# Correctness: one tile, ragged edges on every dim (129x257x65: each one past a power of two),
# a single row, 1000^3, row strides larger than the row (column slices of wider buffers) on all
# three matrices, and two large squares. Moderate sizes keep the float64 reference cheap.
CORRECTNESS_SHAPES = [
    {"m": 128, "n": 128, "k": 128},
    {"m": 129, "n": 257, "k": 65},
    {"m": 1, "n": 72, "k": 40},
    {"m": 1000, "n": 1000, "k": 1000},
    {"m": 777, "n": 1280, "k": 2000, "lda": 2048, "ldb": 1344, "ldc": 1408},
    {"m": 2048, "n": 2048, "k": 2048},
    {"m": 4096, "n": 4096, "k": 4096},
]

# Benchmarks (the perf configs, M x N x K).
PERF_CONFIGS = [
    {"dtype": "bfloat16", "m": 4096, "n": 4096, "k": 4096},
    {"dtype": "bfloat16", "m": 8192, "n": 8192, "k": 8192},
    {"dtype": "bfloat16", "m": 8192, "n": 8192, "k": 1024},
    {"dtype": "bfloat16", "m": 16384, "n": 1024, "k": 4096},
]

# ||C - ref|| / ||ref|| and max |C - ref| / (1 + |ref|) against the float64 product of the same
# (rounded) inputs. With f32 accumulation the error is the final rounding to the output dtype:
# about u / sqrt(3) in L2 (u = 2^-8 bf16, 2^-11 f16) and at most u per element; ~4x margin.
TOLERANCE = {"bfloat16": (8e-3, 1.6e-2), "float16": (1e-3, 2e-3)}


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random A, B ~ N(0, 1) (never zeros), as column slices of (m, lda) / (k, ldb) buffers
    when the config has row strides."""
    g = torch.Generator(device=device)
    g.seed() if seed is None else g.manual_seed(seed)
    dt = torch_dtype(cfg["dtype"])
    m, n, k = cfg["m"], cfg["n"], cfg["k"]
    a = torch.randn(m, cfg.get("lda", k), generator=g, device=device, dtype=torch.float32).to(dt)[:, :k]
    b = torch.randn(k, cfg.get("ldb", n), generator=g, device=device, dtype=torch.float32).to(dt)[:, :n]
    return {"a": a, "b": b}


def make_out(cfg: dict, inputs: dict) -> torch.Tensor:
    """The (m, n) output the caller passes in, NaN-poisoned (so an unwritten element fails), as a
    column slice of an (m, ldc) buffer when the config has `ldc`."""
    a = inputs["a"]
    m, n = cfg["m"], cfg["n"]
    return torch.full((m, cfg.get("ldc", n)), float("nan"), dtype=a.dtype, device=a.device)[:, :n]


def reference(inputs: dict) -> torch.Tensor:
    """float64 product of the inputs as given (on their device: the GPU for big shapes)."""
    return inputs["a"].double() @ inputs["b"].double()


def flops(cfg: dict) -> int:
    return 2 * cfg["m"] * cfg["n"] * cfg["k"]


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read A and B once, write C once."""
    size = torch.finfo(torch_dtype(cfg["dtype"])).bits // 8
    return (cfg["m"] * cfg["k"] + cfg["k"] * cfg["n"] + cfg["m"] * cfg["n"]) * size


# -- autotune: the port's variants (ffi.rs: tile shape, band rows, persistent grid, hints) --------

H200_SMS = 132  # decides the variant list only; op.py sizes persistent grids from the real GPU


def _pow2_class(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def tune_key(dtype: str, m: int, n: int, k: int) -> dict:
    """Problem class: every dim rounded up to a power of two."""
    return {"dtype": dtype, "m_class": _pow2_class(m), "n_class": _pow2_class(n), "k_class": _pow2_class(k)}


def _v(bm, bn, bk, *, persistent=False, occupancy=1, cga=1, group=8) -> dict:
    return {"bm": bm, "bn": bn, "bk": bk, "group": group, "persistent": persistent, "occupancy": occupancy, "cga": cga}


def variants(m: int, n: int, k: int) -> list[dict]:
    """Candidate variants, few because tileiras takes ~3-4 s per GEMM tile shape (vs ~0.5 s for
    an rms_norm variant), so a class costs ~15-20 s of JIT the first time in a process. From the
    H200 sweep (2026-11-29, scripts/sweep_variants.py --kernel matmul; kernels/matmul/NOTES.md):
    128x128x64 at occupancy 2 was the fastest tile on all four perf shapes (93-94 % of cuBLAS at
    4096^3 and 8192^3), the same at occupancy 1 next; 128x256 and 256x128 tiles spill in one CTA
    (45-78 TFLOP/s) and only work as 2-CTA clusters (650-700 TFLOP/s); 128x128x128 and 64x256 were
    slower. So: the 128x128 tile first (ffi.rs's default shape), the clustered wide tiles as the
    alternatives, and a persistent 128x128 grid; for problems with fewer 128x128 tiles than two
    per SM, smaller tiles that spread the work over more SMs."""
    del k  # K decides the loop length, not the tiling
    if -(-m // 128) * -(-n // 128) >= 2 * H200_SMS:
        return [
            _v(128, 128, 64, occupancy=2),
            _v(128, 128, 64),
            _v(128, 256, 64, cga=2),
            _v(256, 128, 64, cga=2),
            _v(128, 128, 64, persistent=True, occupancy=2),
        ]
    return [
        _v(128, 128, 64, occupancy=2),
        _v(64, 128, 64, occupancy=2),
        _v(128, 64, 64, occupancy=2),
        _v(64, 64, 64, occupancy=4),
    ]


# -- how the suites and scripts call each side (the only kernel-specific glue they need) --------

def run_port(inputs: dict, out=None, variant="auto"):
    from kernels.matmul.op import matmul

    return matmul(inputs["a"], inputs["b"], variant=variant, out=out)


def run_baseline(backend: str, inputs: dict, variant: str | None = None):
    """backend: "cutile" | "triton" | "torch" (baselines.BACKENDS); variant: one of
    baselines.VARIANTS for the backends that have variants."""
    from kernels.matmul import baselines

    kwargs = {} if variant is None else {"variant": variant}
    return baselines.BACKENDS[backend](inputs["a"], inputs["b"], **kwargs)
