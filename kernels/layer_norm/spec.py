"""layer_norm: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel describes;
its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

y = (x - mean) * rsqrt(var + eps) * w + b over the last dim of an (m, n) tensor; w and b optional.
A shape's "absent" ("weight", "bias" or "weight_bias") leaves those out (None).
"""

from __future__ import annotations

import torch

from kernels.layer_norm import op
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, row_kernel, shapes, torch_dtype

EPS = 1e-5


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs (never zeros): x ~ N(1, 1) (a mean to remove), w ~ 1 + N(0, 0.1),
    b ~ N(0, 0.1); w and b None where the shape says "absent"."""
    g = generator(device, seed)
    dt = torch_dtype(cfg["dtype"])
    m, n, absent = cfg["m"], cfg["n"], cfg.get("absent", "")

    def randn(*size):
        return torch.randn(*size, generator=g, device=device, dtype=torch.float32)

    x = (1 + randn(m, cfg.get("row_stride", n))).to(dt)[:, :n]
    w = None if "weight" in absent else (1 + 0.1 * randn(n)).to(dt)
    b = None if "bias" in absent else (0.1 * randn(n)).to(dt)
    return {"x": x, "weight": w, "bias": b, "eps": EPS}


def reference(inputs: dict) -> torch.Tensor:
    x, w, b = (None if t is None else t.double() for t in (inputs["x"], inputs["weight"], inputs["bias"]))
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=inputs["eps"])
    return (y if w is None else y * w) + (0 if b is None else b)


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read x once, write y once, read w and b (n elements each) where present.

    >>> bytes_moved({"m": 32768, "n": 8192, "dtype": "bfloat16"})  # the headline: 4.3 TB/s is 0.25 ms
    1073774592
    """
    params = 2 - sum(p in cfg.get("absent", "") for p in ("weight", "bias"))
    return (2 * cfg["m"] + params) * cfg["n"] * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


def _x(*size, dtype=torch.float32):
    return torch.randn(*size, dtype=dtype)


SPEC = row_kernel(
    op,
    options={"absent": "-no_"},
    # N = 1, odd N (1000, 4097), padded rows, partial row tiles, rows of several column tiles
    # (11008, 16384: the looped entries), and weight, bias or both absent
    correctness_shapes=shapes("m n row_stride", (1, 1), (257, 4097), (4096, 4096, 4160), (16384, 8192), (64, 11008))
    + shapes("m n absent", (3, 1000, "weight_bias"), (5, 4097, "weight"), (37, 768, "bias"), (16, 16384, "bias"))
    + [{"m": 64, "n": 1000, "row_stride": 1040, "absent": "weight_bias"}],
    # the headline (issue 14), then hidden sizes of real models: BERT-base 768, 1024, 2048, Llama
    # 4096, Llama-2-13B 5120, Qwen2-7B 3584; a decode batch of 256 tokens; one f16, one f32
    perf_configs=shapes(
        "dtype m n",
        *(("bfloat16", 32768, 8192), ("bfloat16", 65536, 768), ("bfloat16", 65536, 1024)),
        *(("bfloat16", 32768, 2048), ("bfloat16", 16384, 4096), ("bfloat16", 16384, 5120)),
        *(("bfloat16", 16384, 3584), ("bfloat16", 256, 4096), ("float16", 32768, 4096)),
        ("float32", 16384, 4096),
    ),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    # partial tiles (the masked pointer-tile entries), looped rows, and an absent bias
    # (33 x 4097: rows off 16-byte boundaries, the aligned entry)
    variant_shapes=shapes(
        "m n dtype", (37, 1000, "float16"), (64, 11008, "bfloat16"), (64, 4096, "float16"), (33, 4097, "bfloat16")
    )
    # past the decode rows: every body-and-tail candidate (persistent, 2-row tiles, a partial row tile);
    # the prefetching tail (form 1) in 2-row and 1-row tiles, 4-5 of them a tile block
    + shapes("m n dtype", (601, 5120, "bfloat16"), (1201, 11008, "bfloat16"))
    # the aligned entry's persistent form: 1-2 (occupancy 5) or 3-4 (3) row tiles a tile block
    + shapes("m n dtype", (1201, 4097, "float16"))
    # the whole 16384-wide pointer tile, with a partial last tile; the one-row 2048 tile at occupancy 8
    + shapes("m n dtype", (601, 13824, "bfloat16"), (601, 2000, "bfloat16"))
    # the 16384 + 4096 pointer tail and the looped tiles past 16384, the prefetching tail at occupancy 1
    + shapes("m n dtype", (601, 18944, "bfloat16"))
    + shapes("m n dtype absent", (19, 8195, "bfloat16", "bias"))
    # the unmasked pointer tile (the decode candidates where the tile divides the rows) without w and b
    + shapes("m n dtype absent", (64, 2048, "bfloat16", "weight_bias")),
    bad_inputs={
        "dtype_mix": BadInput(lambda: call(_x(4, 8).half(), _x(8)), TypeError, "share one dtype"),
        "bias_dtype": BadInput(lambda: call(_x(4, 8), None, _x(8).half()), TypeError, "x and bias must share"),
        "weight_shape": BadInput(lambda: call(_x(4, 8), _x(7)), ValueError, "weight must be (8,) or None"),
        "bias_shape": BadInput(
            lambda: call(_x(4, 8), _x(8), _x(8, 1)), ValueError, "bias must be (n,), a tensor of 1 dim"
        ),
        "cpu_tensor": BadInput(lambda: call(_x(4, 8), None, None), ValueError, "x must be on a CUDA device"),
        "last_dim_stride": BadInput(lambda: call(_x(8, 4).t(), _x(8)), ValueError, "contiguous in its last dim"),
        "float64": BadInput(lambda: call(_x(4, 8, dtype=torch.float64)), TypeError, "x must be one of"),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 9)}, message="`x` shape [4, 8] != `out` shape [4, 9]"),
        "weight_len": FfiCase(lambda: {"weight": _x(7)}, message="`weight` has 7 elements but x has n=8 columns"),
        "bias_len": FfiCase(lambda: {"bias": _x(9)}, message="`bias` has 9 elements but x has n=8 columns"),
        "bias_dtype": FfiCase(lambda: {"bias": _x(8).half()}, message="`bias` is f16: all tensors must share"),
        "bias_strided": FfiCase(lambda: {"bias": _x(16)[::2]}, message="`bias` must be contiguous in its last dim"),
        "bad_block": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        "bad_tail": FfiCase(variant={"block": 16, "tail": 16}, message="block < n=8 <= block + tail"),
        # valid: weight and/or bias absent (null descriptors) reach device set-up
        "no_weight_bias": FfiCase(lambda: {"weight": None, "bias": None}, code=-4),
        "no_weight": FfiCase(lambda: {"weight": None}, code=-4),
    },
    max_variants=16,  # rms_norm's
)
