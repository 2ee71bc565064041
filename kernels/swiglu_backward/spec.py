"""swiglu_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's declaration).
Touches no GPU at import.

The gradient of out = silu(a) * b (a the gate, b the up projection, each (m, H) in rows of its own
stride: a config's `lda`, `ldb`) for an output gradient dy (m, H), stacked as one (2m, H) output:
rows [0, m) da, rows [m, 2m) db (kernels/swiglu_backward/op.py). Configs name H `h`, as swiglu's.
"""

from __future__ import annotations

import torch

from kernels.swiglu_backward import op
from tilekit.runtime import gated
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, grid, row_kernel, shapes, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random dy ~ N(0, 1) and a, b ~ N(0, 2^2) (column slices of (m, lda) / (m, ldb) buffers
    where the config has row strides), with swiglu's saturating gates at the start of a's row 0."""
    g, dt, m, h = generator(device, seed), torch_dtype(cfg["dtype"]), cfg["m"], cfg["h"]

    def operand(ld, scale):
        return (scale * torch.randn(m, ld or h, generator=g, device=device)).to(dt)[:, :h]

    dy, a, b = operand(None, 1), operand(cfg.get("lda"), 2), operand(cfg.get("ldb"), 2)
    gated.plant_saturating_gates(a)
    return {"dy": dy, "a": a, "b": b}


def reference(inputs: dict) -> torch.Tensor:
    """float64 da (m rows) then db (m rows): the gated family's closed form."""
    return torch.cat(gated.backward_reference(inputs["dy"], inputs["a"], inputs["b"]))


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read dy, a and b once, write da and db once: 5 * m * H elements."""
    return 5 * cfg["m"] * cfg["h"] * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


SPEC = row_kernel(
    op,
    "h",
    strides={"lda": "lda", "ldb": "ldb"},
    out_shape=lambda cfg: (2 * cfg["m"], cfg["h"]),
    correctness_shapes=shapes("m h lda ldb", (1, 1), (3, 1000), (257, 4097, 4104, 4100), (4096, 4096), (1000, 14336)),
    # training steps of Llama-3-8B (MLP 14336) and -70B (28672): 4K-16K tokens a batch; Llama-2-7B's 11008
    perf_configs=grid({"dtype": ("bfloat16",), "h": (14336,), "m": (4096, 16384)})
    + shapes("dtype m h", ("bfloat16", 4096, 28672), ("bfloat16", 16384, 11008)),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    variant_shapes=shapes("m h dtype", (37, 1000, "float16"), (64, 11008, "bfloat16"), (37, 4097, "float32")),
    bad_inputs={
        "shapes": BadInput(
            lambda: call(torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 7)), ValueError, "must have one shape"
        ),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 8)}, message="it must be (2m, H) = [8, 8]"),
        "b_shape": FfiCase(lambda: {"b": torch.randn(4, 9)}, message="shape"),
        "block_not_pow2": FfiCase(variant={"block": 24}, message="block must be a power of two"),
    },
)
