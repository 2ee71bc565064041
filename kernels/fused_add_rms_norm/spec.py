"""fused_add_rms_norm: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel
describes; its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

Per row of (m, n): s = x + residual (rounded to the dtype, as stored), y = s * rsqrt(mean(s^2) + eps) * w;
the one output is (2, m, n), y then s (kernels/fused_add_rms_norm/op.py).
"""

from __future__ import annotations

import torch

from kernels.fused_add_rms_norm import op
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, row_kernel, shapes, torch_dtype

EPS = 1e-6


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs (never zeros): x ~ N(0, 1), the residual stream ~ N(0, 4) (it carries the sum
    of the blocks before: larger than one block's output), w ~ 1 + N(0, 0.1); x and residual in rows
    of row_stride where the config has one."""
    g = generator(device, seed)
    dt = torch_dtype(cfg["dtype"])
    m, n = cfg["m"], cfg["n"]
    x, r = (
        scale * torch.randn(m, cfg.get("row_stride", n), generator=g, device=device, dtype=torch.float32)
        for scale in (1.0, 2.0)
    )
    w = (1 + 0.1 * torch.randn(n, generator=g, device=device, dtype=torch.float32)).to(dt)
    return {"x": x.to(dt)[:, :n], "residual": r.to(dt)[:, :n], "weight": w, "eps": EPS}


def reference(inputs: dict) -> torch.Tensor:
    """float64 (2, m, n): y, then s. s is x + residual rounded to the dtype (what the port stores and
    normalizes; the rounding passes gradients through unchanged)."""
    x, r = inputs["x"], inputs["residual"]
    s = (x.double() + r.double()).to(x.dtype).double()
    y = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + inputs["eps"]) * inputs["weight"].double()
    return torch.stack((y, s))


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read x and residual once, write y and s once (w is n elements, counted)."""
    return (4 * cfg["m"] * cfg["n"] + cfg["n"]) * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


def _rows(n: int, **dtypes):
    def make():
        x, r, w = (
            torch.randn(*shape).to(dtypes.get(k, torch.float32))
            for k, shape in (("x", (4, n)), ("r", (4, n)), ("w", (n,)))
        )
        return call(x, r, w)

    return make


SPEC = row_kernel(
    op,
    out_shape=lambda cfg: (2, cfg["m"], cfg["n"]),
    # tiny to large and irregular; row_stride > n exercises padded rows; n = 16384 the widest row
    correctness_shapes=shapes(
        "m n row_stride", (1, 1), (3, 1000), (257, 4097), (4096, 4096, 4160), (33, 4000, 4004), (600, 16384)
    ),
    # between decoder blocks of real models: decode batches (256 and 64 tokens), prefill and training
    # steps of 4 K-32 K tokens at Llama-3-8B's 4096, Llama-3-70B's 8192, Qwen2-7B's 3584 and
    # Llama-2-13B's 5120 hidden sizes
    perf_configs=shapes(
        "dtype m n",
        *(("bfloat16", 256, 4096), ("bfloat16", 64, 8192), ("bfloat16", 4096, 4096), ("bfloat16", 16384, 4096)),
        *(("bfloat16", 32768, 4096), ("bfloat16", 16384, 8192), ("bfloat16", 16384, 3584)),
        *(("bfloat16", 16384, 5120), ("float16", 16384, 4096)),
    ),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    size_check=op.check_size,
    variant_shapes=shapes(
        "m n dtype",
        (37, 1000, "float16"),
        (19, 8195, "bfloat16"),
        (600, 4096, "bfloat16"),
        (64, 4096, "float32"),
        (601, 16384, "float16"),
    ),
    bad_inputs={
        "dtype_mix": BadInput(_rows(8, r=torch.float16), TypeError, "share one dtype"),
        "residual_shape": BadInput(
            lambda: call(torch.randn(4, 8), torch.randn(4, 7), torch.randn(8)),
            ValueError,
            "residual must have x's shape",
        ),
        "weight_shape": BadInput(
            lambda: call(torch.randn(4, 8), torch.randn(4, 8), torch.randn(7)), ValueError, "weight must be (8,)"
        ),
        "too_wide": BadInput(_rows(op.MAX_BLOCK + 1), ValueError, f"at most {op.MAX_BLOCK}"),
        "out_shape": BadInput(
            lambda: call(torch.randn(4, 8), torch.randn(4, 8), torch.randn(8), out=torch.empty(4, 8)),
            ValueError,
            "out must be (2, 4, 8)",
        ),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 9)}, message="`out` is [4, 9]: it must be [2, 4, 8]"),
        "planes_overlap": FfiCase(
            lambda: {"out": torch.empty(64).as_strided((2, 4, 8), (31, 8, 1))}, message="planes would overlap"
        ),
        "weight_len": FfiCase(
            lambda: {"weight": torch.randn(7)}, message="`weight` has 7 elements but x has n=8 columns"
        ),
        "residual_shape": FfiCase(
            lambda: {"residual": torch.randn(4, 9)}, message="`x` shape [4, 8] != `residual` shape [4, 9]"
        ),
        "bad_block": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        # the in-place form: y into an (m, n) out, s into residual (valid: -4, the CPU has no such device)
        "in_place_form": FfiCase(lambda: {"out": torch.empty(4, 8)}, code=-4),
    },
)
