"""rms_norm_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's declaration).
Touches no GPU at import.

The gradients of y = x * rsqrt(mean(x^2, -1) + eps) * w for an output gradient dy, stacked as one
(m + 1, n) output: rows [0, m) dx, row m dw (kernels/rms_norm_backward/op.py).
"""

from __future__ import annotations

import torch

from kernels.rms_norm_backward import op
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, grid, row_kernel, shapes, torch_dtype

EPS = 1e-6


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs: dy, x ~ N(0, 1) (each in rows of row_stride where the shape has one),
    w ~ 1 + N(0, 0.1)."""
    g = generator(device, seed)
    dt = torch_dtype(cfg["dtype"])
    m, n = cfg["m"], cfg["n"]
    rows = lambda: torch.randn(m, cfg.get("row_stride", n), generator=g, device=device).to(dt)[:, :n]  # noqa: E731
    dy, x = rows(), rows()
    w = (1 + 0.1 * torch.randn(n, generator=g, device=device, dtype=torch.float32)).to(dt)
    return {"dy": dy, "x": x, "weight": w, "eps": EPS}


def reference(inputs: dict) -> torch.Tensor:
    """float64 dx (m rows) then dw (one row)."""
    dy, x, w = (inputs[k].double() for k in ("dy", "x", "weight"))
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + inputs["eps"])
    x_hat, w_dy = x * r, w * dy
    dx = r * (w_dy - x_hat * (w_dy * x_hat).mean(-1, keepdim=True))
    return torch.cat((dx, (dy * x_hat).sum(0, keepdim=True)))


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read dy and x once, write dx once (w and dw are n elements each, counted); the
    f32 partial sums of dw are the port's own traffic, not counted."""
    m, n = cfg["m"], cfg["n"]
    return (3 * m * n + 2 * n) * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


SPEC = row_kernel(
    op,
    out_shape=lambda cfg: (cfg["m"] + 1, cfg["n"]),
    # row_kernel's, but f32's max error: dw sums m rows in f32, whose absolute error grows like sqrt(m)
    # ulps of the partial sums; at 4096 rows a column summing to ~0 was 1.9e-5 off on the H100 (2026-12-05)
    tolerance={"float16": (2e-3, 1e-2), "bfloat16": (1.6e-2, 6e-2), "float32": (1e-5, 1e-4)},
    # tiny to large and irregular: a row tile past m, rows off 16 bytes, padded rows, the widest row
    correctness_shapes=shapes(
        "m n row_stride", (1, 1), (3, 1000), (257, 4097), (4096, 4096, 4160), (33, 4000, 4004), (600, 16384)
    ),
    # training steps of Llama-3-8B (hidden 4096) and -70B (8192): 4K-32K tokens a batch; one f16
    perf_configs=grid({"dtype": ("bfloat16",), "n": (4096, 8192), "m": (4096, 16384, 32768)})
    + shapes("dtype m n", ("float16", 16384, 4096)),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    size_check=lambda m, n: op.check_size(n),
    variant_shapes=shapes(
        "m n dtype", (37, 1000, "float16"), (600, 4096, "bfloat16"), (19, 8195, "bfloat16"), (64, 2048, "float32")
    ),
    bad_inputs={
        "dy_shape": BadInput(
            lambda: call(torch.randn(4, 7), torch.randn(4, 8), torch.randn(8)), ValueError, "dy must have x's shape"
        ),
        "weight_shape": BadInput(
            lambda: call(torch.randn(4, 8), torch.randn(4, 8), torch.randn(7)), ValueError, "weight must be (8,)"
        ),
        "too_wide": BadInput(
            lambda: call(torch.randn(2, 16385), torch.randn(2, 16385), torch.randn(16385)), ValueError, "at most 16384"
        ),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 8)}, message="it must be (m + 1, n) = [5, 8]"),
        "weight_len": FfiCase(lambda: {"weight": torch.randn(7)}, message="`weight` has 7 elements but x has n=8"),
        "bad_block": FfiCase(variant={"block": 24}, message="block must be a power of two"),
    },
)
