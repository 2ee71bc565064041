"""softmax: what to test and time, and how to judge it (the declaration tilekit.kernel describes;
its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

y = exp(x - max(x, -1)) / sum(exp(x - max(x, -1)), -1) over the last dim of an (m, n) tensor;
f32 math, output in x's dtype.
"""

from __future__ import annotations

import torch

from kernels.softmax import op
from tilekit.kernel import BadInput, FfiCase, KernelSpec, call, generator, torch_dtype

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


SPEC = KernelSpec(
    op=op,
    dims={"m": 1 << 20, "n": 1 << 18},
    strides={"row_stride": "ld"},
    # Tiny to large and irregular n (1, 1000, 4097, 20000, 32768); row_stride > n exercises padded
    # rows; n > 16384 takes the looped (online) kernel by default.
    correctness_shapes=[
        {"m": 1, "n": 1},
        {"m": 3, "n": 1000},
        {"m": 257, "n": 4097},
        {"m": 4096, "n": 4096, "row_stride": 4160},
        {"m": 65536, "n": 1024},
        {"m": 100, "n": 20000, "row_stride": 20032},
        {"m": 64, "n": 32768},
    ],
    perf_configs=[
        {"dtype": "float16", "m": 65536, "n": 1024},
        {"dtype": "float16", "m": 65536, "n": 4096},
        {"dtype": "float32", "m": 65536, "n": 8192},
    ],  # the issue's
    # a few output ulps of each dtype (softmax values are in [0, 1])
    tolerance={"float16": (2e-3, 1e-2), "bfloat16": (1.6e-2, 6e-2), "float32": (1e-5, 1e-5)},
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    out_shape=lambda cfg: (cfg["m"], cfg["n"]),
    # Whole-row shape classes (padded: n = 1000, 8195; unmasked: 64 x 4096 and 64 x 1024 with
    # padded rows, every variant's tile divides them) and a looped one (n > 16384).
    variant_shapes=[
        {"m": 37, "n": 1000, "dtype": "float16"},
        {"m": 19, "n": 20000, "dtype": "bfloat16"},
        {"m": 7, "n": 8195, "dtype": "float32"},
        {"m": 64, "n": 4096, "dtype": "bfloat16"},
        {"m": 64, "n": 1024, "dtype": "float16", "row_stride": 1040},
        # vocabulary-like: the split candidates (and the default) take the two-kernel split form
        {"m": 7, "n": 150001, "dtype": "bfloat16"},
    ],
    autotune_edges=[{"m": m, "n": n} for m, n in [(1000, 1), (4097, 4097), (1000, 11008), (3, 151936), (5, 16385)]],
    max_variants=8,
    bad_inputs={
        "int_dtype": BadInput(lambda: call(torch.ones(4, 8, dtype=torch.int32)), TypeError, "must be one of"),
        "float64": BadInput(lambda: call(torch.randn(4, 8, dtype=torch.float64)), TypeError, "must be one of"),
        "cpu_tensor": BadInput(lambda: call(torch.randn(4, 8)), ValueError, "CUDA device"),
        "last_dim_stride": BadInput(lambda: call(torch.randn(8, 4).t()), ValueError, "contiguous in its last dim"),
        "zero_dim": BadInput(lambda: call(torch.tensor(1.0)), ValueError, "at least one dim"),
    },
    ffi_example={"m": 4, "n": 8, "dtype": "float32"},
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 9)}, message="`x` shape [4, 8] != `out` shape [4, 9]"),
        "dtype_mix": FfiCase(
            lambda: {"out": torch.empty(4, 8, dtype=torch.float16)},
            message="`x` is f32 but `out` is f16: all tensors must share one dtype",
        ),
        "last_dim_stride": FfiCase(
            lambda: {"x": torch.randn(8, 4).t()}, message="`x` must be contiguous in its last dim"
        ),
        "overlapping_rows": FfiCase(
            lambda: {"x": torch.randn(40).as_strided((4, 8), (4, 1))},
            message="`x` row stride 4 < n=8: rows would overlap",
        ),
        "three_dims": FfiCase(
            lambda: {"x": torch.randn(2, 2, 8), "out": torch.empty(2, 2, 8)}, message="`x` must have 2 dims, got ndim=3"
        ),
        "block_not_pow2": FfiCase(variant={"block": 24, "rows": 1}, message="variant block=24 rows=1"),
        "block_too_small": FfiCase(variant={"block": 8, "rows": 1}, message="variant block=8 rows=1"),
        "rows_too_many": FfiCase(variant={"block": 16, "rows": 128}, message="variant block=16 rows=128"),
        "tile_too_big": FfiCase(variant={"block": 65536, "rows": 2}, message="variant block=65536 rows=2"),
        "occupancy": FfiCase(variant={"occupancy": 33}, message="variant occupancy=33"),
        "warps": FfiCase(variant={"warps": 2}, message="variant warps=2: use 4 or 8"),
    },
)
