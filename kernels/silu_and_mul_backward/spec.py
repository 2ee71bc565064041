"""silu_and_mul_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's
declaration). Touches no GPU at import.

The gradient of out = silu(gate) * up, x = [gate | up] (m, 2H), for an output gradient dy (m, H):
dx = (dgate | dup) (m, 2H), x's layout. Configs name H `h`, as silu_and_mul's.
"""

from __future__ import annotations

import torch

from kernels.silu_and_mul_backward import op
from tilekit.runtime import gated
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, grid, row_kernel, shapes, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs: dy ~ N(0, 1) (m, H); x ~ N(0, 2^2) (m, 2H, in rows of row_stride where the
    shape has one) with silu_and_mul's saturating gates at the start of row 0 (tilekit.runtime.gated)."""
    g, dt, m, h = generator(device, seed), torch_dtype(cfg["dtype"]), cfg["m"], cfg["h"]
    dy = torch.randn(m, h, generator=g, device=device).to(dt)
    x = (2 * torch.randn(m, cfg.get("row_stride", 2 * h), generator=g, device=device)).to(dt)[:, : 2 * h]
    gated.plant_saturating_gates(x[:, :h])
    return {"dy": dy, "x": x}


def reference(inputs: dict) -> torch.Tensor:
    """float64 (dgate | dup)."""
    dy, x = inputs["dy"].double(), inputs["x"].double()
    h = dy.shape[-1]
    gate, up = x[:, :h], x[:, h:]
    s = torch.sigmoid(gate)
    return torch.cat((dy * up * s * (1 + gate * (1 - s)), dy * gate * s), -1)


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read dy (m * H) and x (m * 2H) once, write dx (m * 2H) once."""
    return 5 * cfg["m"] * cfg["h"] * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


SPEC = row_kernel(
    op,
    "h",
    out_shape=lambda cfg: (cfg["m"], 2 * cfg["h"]),
    correctness_shapes=shapes("m h row_stride", (1, 1), (3, 1000), (257, 4097), (4096, 4096, 8320), (1000, 14336)),
    # training steps of Llama-3-8B (MLP 14336) and -70B (28672): 4K-32K tokens a batch; Llama-2-7B's 11008
    perf_configs=grid({"dtype": ("bfloat16",), "h": (14336,), "m": (4096, 16384)})
    + shapes("dtype m h", ("bfloat16", 4096, 28672), ("bfloat16", 16384, 11008), ("float16", 16384, 14336)),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    variant_shapes=shapes("m h dtype", (37, 1000, "float16"), (64, 11008, "bfloat16"), (37, 4097, "float32")),
    bad_inputs={
        "odd_x": BadInput(lambda: call(torch.randn(4, 4), torch.randn(4, 7)), ValueError, "x must be (..., 2H)"),
        "dy_width": BadInput(lambda: call(torch.randn(4, 5), torch.randn(4, 8)), ValueError, "dy (..., H)"),
    },
    ffi_cases={
        "odd_x": FfiCase(lambda: {"x": torch.randn(4, 15), "out": torch.empty(4, 15)}, message="it must be (m, 2H)"),
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 8)}, message="shape"),
        "block_not_pow2": FfiCase(variant={"block": 24}, message="block must be a power of two"),
    },
)
