"""rms_norm: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel describes;
its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

y = x * rsqrt(mean(x^2, -1) + eps) * w over the last dim of an (m, n) tensor; f32 accumulation.
"""

from __future__ import annotations

import torch

from kernels.rms_norm import op
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, row_kernel, shapes, torch_dtype

EPS = 1e-6


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs (never zeros): x ~ N(0, 1), w ~ 1 + N(0, 0.1)."""
    g = generator(device, seed)
    dt = torch_dtype(cfg["dtype"])
    m, n = cfg["m"], cfg["n"]
    x = torch.randn(m, cfg.get("row_stride", n), generator=g, device=device, dtype=torch.float32).to(dt)[:, :n]
    w = (1 + 0.1 * torch.randn(n, generator=g, device=device, dtype=torch.float32)).to(dt)
    return {"x": x, "weight": w, "eps": EPS}


def reference(inputs: dict) -> torch.Tensor:
    x, w = inputs["x"].double(), inputs["weight"].double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + inputs["eps"]) * w


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read x once, write y once (w is n elements, negligible but counted)."""
    return (2 * cfg["m"] * cfg["n"] + cfg["n"]) * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


SPEC = row_kernel(
    op,
    # tiny to large and irregular; row_stride > n exercises padded rows
    correctness_shapes=shapes(
        "m n row_stride", (1, 1), (3, 1000), (257, 4097), (4096, 4096, 4160), (65536, 8192), (33, 4000, 4004)
    ),
    # the first issue's six; then hidden sizes of real models the tile does not divide (Qwen2-7B
    # 3584, Llama-2-13B 5120), a decode batch (256 tokens of Llama-3-8B's 4096), the MLP widths
    # issue 13 names for every row kernel (Llama-2-7B 11008, Qwen2-7B 18944) and n = 4097 (rows
    # not 16-byte aligned)
    perf_configs=shapes(
        "dtype m n",
        *(("float16", 262144, 1024), ("float16", 262144, 2048), ("float16", 262144, 4096)),
        *(("float16", 65536, 8192), ("float16", 65536, 16384), ("bfloat16", 65536, 8192)),
        *(("bfloat16", 16384, 3584), ("bfloat16", 16384, 5120), ("bfloat16", 256, 4096)),
        *(("bfloat16", 16384, 11008), ("bfloat16", 16384, 18944), ("float16", 16384, 4097)),
    ),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    # the gradients' (kernels/rms_norm_backward): at n = 1, x̂^2 = x^2 / (x^2 + eps), so dx = r * w * dy *
    # (1 - x̂^2) is ~1e-6 of its terms, left by a cancellation f32 cannot resolve (any f32 kernel's
    # error is ~1e-7 absolute, up to tens of % relative: f16 8.9e-2 and bf16 2.3e-2 on the H100,
    # 2026-12-05, as small as the absolute error is)
    backward_skip=lambda cfg: (
        "n = 1: the gradient is the f32 cancellation w * dy * (1 - x̂^2), ~1e-6 of its terms, which no f32 "
        "kernel resolves to a relative tolerance (its absolute error stays ~1e-7)"
        if cfg["n"] == 1
        else None
    ),
    # partial tiles (the masked pointer-tile entries); n = 11008 their predicated 16-byte form
    # (64 x 4096: tiles that divide it, so the decode candidates' pointer-tile entries run where the
    # partition entries otherwise would)
    max_variants=16,  # at most 16 (reached past 512 rows at many widths: 2049-3072, 5120, 11008 ...)
    variant_shapes=shapes(
        "m n dtype",
        (37, 1000, "float16"),
        (19, 8195, "bfloat16"),
        (64, 11008, "bfloat16"),
        (64, 4096, "float32"),
        # past the decode rows: every body-and-tail candidate (persistent, 2-row tiles, a partial row tile)
        (601, 5120, "bfloat16"),
        (1201, 11008, "bfloat16"),  # the prefetching tail (form 1) in 1-row tiles: 4-5 a tile block, past the last
        (33, 4097, "float16"),  # rows off 16-byte boundaries: the aligned entry (8192 and 4096 lanes)
        (1201, 4097, "bfloat16"),  # its persistent form: 1-2 or 3-4 row tiles a tile block, other heads
        (601, 16384, "float16"),  # the whole 16384-wide pointer tile
        (601, 2000, "float16"),  # the one-row 2048 pointer tile at occupancy 8 (partial tiles)
        # the 16384 + 4096 pointer tail (it spills at occupancy 2), looped tiles, the prefetching tail
        # at occupancy 1 (2-3 row tiles a tile block)
        (601, 18944, "bfloat16"),
    ),
    bad_inputs={
        "dtype_mix": BadInput(lambda: call(torch.randn(4, 8).half(), torch.randn(8)), TypeError, "share one dtype"),
        "weight_shape": BadInput(lambda: call(torch.randn(4, 8), torch.randn(7)), ValueError, "weight must be (8,)"),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 9)}, message="`x` shape [4, 8] != `out` shape [4, 9]"),
        "weight_len": FfiCase(
            lambda: {"weight": torch.randn(7)}, message="`weight` has 7 elements but x has n=8 columns"
        ),
        "bad_block": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        "bad_tail": FfiCase(variant={"block": 16, "tail": 16}, message="block < n=8 <= block + tail"),
    },
)
