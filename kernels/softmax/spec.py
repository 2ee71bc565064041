"""softmax: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel describes;
its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

y = exp(x - max(x, -1)) / sum(exp(x - max(x, -1)), -1) over the last dim of an (m, n) tensor;
f32 math, output in x's dtype.
"""

from __future__ import annotations

import torch

from kernels.softmax import op
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, row_kernel, shapes, torch_dtype

# Every row is shifted by up to +-ROW_SHIFT: exp without subtracting the row max overflows (or
# underflows to 0/0) in f32 beyond ~88, so a numerically unstable kernel fails correctness.
ROW_SHIFT = 200.0


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs (never zeros): x = 2 * N(0, 1) + a per-row shift in [-200, 200].

    >>> x = make_inputs({"dtype": "bfloat16", "m": 64, "n": 1000, "row_stride": 1040}, device="cpu", seed=0)["x"]
    >>> x.shape, x.stride(), x.dtype, float(x.float().abs().max()) > 100, int((x == 0).sum()) < x.numel() // 100
    (torch.Size([64, 1000]), (1040, 1), torch.bfloat16, True, True)
    """
    g = generator(device, seed)
    m, n = cfg["m"], cfg["n"]
    shift = ROW_SHIFT * (2 * torch.rand(m, 1, generator=g, device=device, dtype=torch.float32) - 1)
    x = 2 * torch.randn(m, cfg.get("row_stride", n), generator=g, device=device, dtype=torch.float32) + shift
    return {"x": x.to(torch_dtype(cfg["dtype"]))[:, :n]}


def reference(inputs: dict) -> torch.Tensor:
    """float64 softmax: rows sum to one, -inf gives exactly 0.

    >>> reference({"x": torch.tensor([[1000.0, 1000.0], [-1000.0, float("-inf")]])}).tolist()
    [[0.5, 0.5], [1.0, 0.0]]
    """
    return torch.softmax(inputs["x"].double(), dim=-1)


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read x once, write y once.

    >>> bytes_moved({"dtype": "float16", "m": 65536, "n": 1024}) == 2 * 65536 * 1024 * 2
    True
    """
    return 2 * cfg["m"] * cfg["n"] * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


SPEC = row_kernel(  # its tolerance: a few output ulps of each dtype (softmax values are in [0, 1])
    op,
    # Tiny to large and irregular n (1, 1000, 4097, 20000, 32768); row_stride > n exercises padded
    # rows; n > 16384 takes the looped (online) kernel by default.
    correctness_shapes=shapes(
        "m n row_stride",
        *((1, 1), (3, 1000), (257, 4097), (4096, 4096, 4160), (33, 4000, 4004)),
        *((65536, 1024), (100, 20000, 20032), (64, 32768)),
    ),
    # the first issue's three; then vocabulary rows (Llama-3 128256, Qwen2 151936 logits), and rows
    # the tile does not divide: Llama-2-7B's 11008 and n = 4097 (rows not 16-byte aligned)
    perf_configs=shapes(
        "dtype m n",
        *(("float16", 65536, 1024), ("float16", 65536, 4096), ("float32", 65536, 8192)),
        *(("float32", 1024, 128256), ("bfloat16", 512, 151936), ("bfloat16", 4096, 128256)),
        *(("bfloat16", 16384, 11008), ("float16", 16384, 4097)),
    ),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    # Whole-row shape classes (padded: n = 1000, 8195; unmasked: 64 x 4096 and 64 x 1024 with
    # padded rows, every variant's tile divides them) and a looped one (n > 16384).
    variant_shapes=shapes(
        "m n dtype row_stride",
        *((37, 1000, "float16"), (19, 20000, "bfloat16"), (7, 8195, "float32")),
        *((64, 4096, "bfloat16"), (64, 1024, "float16", 1040)),
        (64, 11008, "bfloat16"),  # whole rows in a padded tile (the masked entry), or body and tail
        (37, 5120, "float16"),  # body and tail in 2-row tiles, a partial row tile
        (1201, 11008, "bfloat16"),  # the persistent tail: a grid of 264, each tile block walking 4-5 row tiles
        (1201, 5120, "float16"),  # the persistent tail in 2-row tiles, a ragged last row tile
        (33, 4097, "float16"),  # rows off 16-byte boundaries: the aligned entry (8192 and 4096 lanes)
        (7, 150001, "bfloat16"),  # vocabulary-like: the split candidates (and the default) take the split form
    ),
    max_variants=10,  # 16384 x 8195: 4 whole-row tiles, 2 looped, 2 aligned, 2 tails and the persistent one, one shared
    bad_inputs={
        "int_dtype": BadInput(lambda: call(torch.ones(4, 8, dtype=torch.int32)), TypeError, "must be one of"),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 9)}, message="`x` shape [4, 8] != `out` shape [4, 9]"),
        "overlapping_rows": FfiCase(
            lambda: {"x": torch.randn(40).as_strided((4, 8), (4, 1))},
            message="`x` row stride 4 < n=8: rows would overlap",
        ),
        "block_not_pow2": FfiCase(variant={"block": 24, "rows": 1}, message="variant block=24 rows=1"),
        "block_too_small": FfiCase(variant={"block": 8, "rows": 1}, message="variant block=8 rows=1"),
        "rows_too_many": FfiCase(variant={"block": 16, "rows": 128}, message="variant block=16 rows=128"),
        "tile_too_big": FfiCase(variant={"block": 65536, "rows": 2}, message="variant block=65536 rows=2"),
        "bad_tail": FfiCase(variant={"block": 16, "rows": 1, "tail": 16}, message="block < n=8 <= block + tail"),
    },
)
