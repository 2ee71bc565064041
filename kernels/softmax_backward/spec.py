"""softmax_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's
declaration). Touches no GPU at import.

The gradient of y = softmax(x) over the last dim of an (m, n) tensor for an output gradient dy, from
y: dx = y * (dy - sum(y * dy, -1)) (m, n).
"""

from __future__ import annotations

import torch

from kernels.softmax_backward import op
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, row_kernel, shapes, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs: y = softmax of N(0, 2^2) logits (rows summing to 1, some entries far
    larger than 1/n), dy ~ N(0, 1); each in rows of row_stride where the shape has one."""
    g, dt, m, n = generator(device, seed), torch_dtype(cfg["dtype"]), cfg["m"], cfg["n"]
    stride = cfg.get("row_stride", n)
    logits = 2 * torch.randn(m, n, generator=g, device=device)
    y = torch.zeros(m, stride, device=device)
    y[:, :n] = torch.softmax(logits, -1)
    dy = torch.randn(m, stride, generator=g, device=device)
    return {"dy": dy.to(dt)[:, :n], "y": y.to(dt)[:, :n]}


def reference(inputs: dict) -> torch.Tensor:
    """float64 dx from the inputs as given (y rounded to its dtype: the formula applied to that y)."""
    dy, y = inputs["dy"].double(), inputs["y"].double()
    return y * (dy - (y * dy).sum(-1, keepdim=True))


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read dy and y once, write dx once (the looped form's second read is its own)."""
    return 3 * cfg["m"] * cfg["n"] * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


SPEC = row_kernel(
    op,
    # a row tile past m, rows off 16 bytes, padded rows, whole rows up to 16384, the looped form's
    # rows (uneven: 40000, and vocabularies)
    correctness_shapes=shapes(
        "m n row_stride",
        (1, 1),
        (3, 1000),
        (257, 4097),
        (4096, 4096, 4160),
        (33, 4000, 4004),
        (64, 16384),
        (9, 40000),
        (4, 128256),
    ),
    # eager attention's probabilities (Llama-3-8B: 32 heads x 2048-4096 keys per query row) and the
    # vocabulary rows of Llama-3 (128256) and Qwen2 (151936), bf16 and f32
    perf_configs=shapes(
        "dtype m n",
        ("bfloat16", 65536, 2048),
        ("bfloat16", 32768, 4096),
        ("float16", 32768, 4096),
        ("bfloat16", 4096, 128256),
        ("float32", 4096, 128256),
        ("bfloat16", 2048, 151936),
    ),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    # (300 rows of 24577: every lagged candidate has tile blocks that both sum a chunk and store one,
    # 1200 tickets in 2-tile chunks (944 past a lag of 256, 688 past 512), 600 in 4-tile chunks (344
    # and 88 past), over ragged, unaligned rows)
    variant_shapes=shapes(
        "m n dtype", (37, 1000, "float16"), (64, 8195, "bfloat16"), (5, 40000, "float32"), (300, 24577, "bfloat16")
    ),
    bad_inputs={"dy_shape": BadInput(lambda: call(torch.randn(4, 7), torch.randn(4, 8)), ValueError, "y's shape")},
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 7)}, message="shape"),
        "block_not_pow2": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        "bad_warps": FfiCase(variant={"warps": 6}, message="warps"),
        "chunk_not_multiple": FfiCase(variant={"block": 4096, "rows": 1, "chunk": 6000}, message="multiple of block"),
        "lag_without_split": FfiCase(variant={"chunk": 0, "lag": 256}, message="a lag needs a split"),
    },
)
