"""rms_norm: what to test and time, and how to judge it (the declaration tilekit.kernel describes;
its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

y = x * rsqrt(mean(x^2, -1) + eps) * w over the last dim of an (m, n) tensor; f32 accumulation.
"""

from __future__ import annotations

import torch

from kernels.rms_norm import op
from tilekit.kernel import BadInput, FfiCase, KernelSpec, call, generator, torch_dtype

EPS = 1e-6


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs (never zeros): x ~ N(0, 1), w ~ 1 + N(0, 0.1)."""
    g = generator(device, seed)
    dt = torch_dtype(cfg["dtype"])
    m, n = cfg["m"], cfg["n"]
    x = torch.randn(m, cfg.get("row_stride", n), generator=g, device=device, dtype=torch.float32).to(dt)[:, :n]
    w = (1 + 0.1 * torch.randn(n, generator=g, device=device, dtype=torch.float32)).to(dt)
    return {"x": x, "w": w, "eps": EPS}


def reference(inputs: dict) -> torch.Tensor:
    x, w = inputs["x"].double(), inputs["w"].double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + inputs["eps"]) * w


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read x once, write y once (w is n elements, negligible but counted)."""
    return (2 * cfg["m"] * cfg["n"] + cfg["n"]) * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


SPEC = KernelSpec(
    op=op,
    dims={"m": 1 << 20, "n": 1 << 18},
    strides={"row_stride": "ld"},
    # tiny to large and irregular; row_stride > n exercises padded rows
    correctness_shapes=[
        {"m": 1, "n": 1},
        {"m": 3, "n": 1000},
        {"m": 257, "n": 4097},
        {"m": 4096, "n": 4096, "row_stride": 4160},
        {"m": 65536, "n": 8192},
    ],
    perf_configs=[
        {"dtype": "float16", "m": 262144, "n": 1024},
        {"dtype": "float16", "m": 262144, "n": 2048},
        {"dtype": "float16", "m": 262144, "n": 4096},
        {"dtype": "float16", "m": 65536, "n": 8192},
        {"dtype": "float16", "m": 65536, "n": 16384},
        {"dtype": "bfloat16", "m": 65536, "n": 8192},
    ],  # the issue's
    tolerance={"float16": (2e-3, 1e-2), "bfloat16": (1.6e-2, 6e-2), "float32": (1e-5, 1e-5)},
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    out_shape=lambda cfg: (cfg["m"], cfg["n"]),
    # partial tiles (the masked pointer-tile entries); n = 11008 their predicated 16-byte form
    variant_shapes=[
        {"m": 37, "n": 1000, "dtype": "float16"},
        {"m": 19, "n": 8195, "dtype": "bfloat16"},
        {"m": 64, "n": 11008, "dtype": "bfloat16"},
    ],
    autotune_edges=[{"m": m, "n": n} for m, n in [(1000, 1), (4097, 4097), (1000, 11008), (3, 151936), (5, 16385)]],
    bad_inputs={
        "dtype_mix": BadInput(
            lambda: call(torch.randn(4, 8, dtype=torch.float16), torch.randn(8)), TypeError, "share one dtype"
        ),
        "weight_shape": BadInput(lambda: call(torch.randn(4, 8), torch.randn(7)), ValueError, "weight must be (8,)"),
        "cpu_tensor": BadInput(lambda: call(torch.randn(4, 8), torch.randn(8)), ValueError, "CUDA device"),
        "last_dim_stride": BadInput(
            lambda: call(torch.randn(8, 4).t(), torch.randn(8)), ValueError, "contiguous in its last dim"
        ),
        "float64": BadInput(
            lambda: call(torch.randn(4, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)),
            TypeError,
            "share one dtype",
        ),
    },
    ffi_example={"m": 4, "n": 8, "dtype": "float32"},
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 9)}, message="shape"),
        "weight_len": FfiCase(lambda: {"w": torch.randn(7)}, message="weight"),
        "dtype_mix": FfiCase(lambda: {"out": torch.empty(4, 8, dtype=torch.float16)}, message="share one dtype"),
        "last_dim_stride": FfiCase(lambda: {"x": torch.randn(8, 4).t()}, message="contiguous in its last dim"),
        "bad_block": FfiCase(variant={"block": 24}, message="power of two"),
    },
)
