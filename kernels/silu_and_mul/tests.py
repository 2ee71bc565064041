"""silu_and_mul's tests beyond the generated suite (tilekit.testing.suite adds the test_* to
tests/kernels/test_silu_and_mul.py): a 3-D input on the GPU; on the CPU, its inputs (the port's
tile, autotune space, tune key and bytes model are tilekit.runtime.gated's: tests/kit/test_gated.py); and
BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the CPU
(tilekit.runtime.baseline_cases)."""

import pytest
import torch

from kernels.silu_and_mul.spec import SPEC
from tilekit.testing import harness
from tilekit.runtime import gated
from tilekit.runtime.baseline_cases import Has, tile_plan


def test_op_3d_input_cutile_rs(cuda):
    """Leading dims are flattened: (b, s, 2H) -> (b, s, H)."""
    x = 2 * torch.randn(3, 5, 2 * 300, device=cuda, dtype=torch.bfloat16)
    y = SPEC.entry(x)
    assert y.shape == (3, 5, 300)
    ref = SPEC.reference({"x": x.reshape(15, 600)}).reshape(3, 5, 300)
    harness.check_close(y, ref, SPEC.tolerance["bfloat16"], "cutile_rs 3-D")


def test_make_inputs_pads_rows_and_plants_saturating_gates():
    x = SPEC.make_inputs({"dtype": "float16", "m": 4, "h": 6, "row_stride": 16}, device="cpu", seed=1)["x"]
    assert x.shape == (4, 12) and x.stride() == (16, 1) and x.dtype == torch.float16
    assert x[0, :4].tolist() == [-100.0, -30.0, 30.0, 100.0]
    ref = SPEC.reference({"x": x})
    assert ref.dtype == torch.float64 and ref.shape == (4, 6)
    assert ref[0, 0].item() == pytest.approx(
        -100 * torch.sigmoid(torch.tensor(-100.0).double()).item() * x[0, 6].item()
    )


BASELINE_CASES = gated.fused_baseline_cases(  # the family's cases, and this kernel's plans and kernels
    SPEC,
    plans=[
        # the perf configs get 4K-element tiles with no padding (auto = tiled)
        ("config", (65536, 4096), tile_plan("tiled", 4096, 1, 65536)),
        ("config", (16384, 14336), tile_plan("tiled", 2048, 2, 8192 * 7)),
        ("config", (16384, 14336, "wide"), tile_plan("wide", 2048, 4, 4096 * 7)),
        # row: one program per row, chunks of at most 4096
        ("config", (100, 14336, "row"), tile_plan("row", 4096, 1, 100)),
        ("config", (100, 1000, "row"), Has(block=1024)),
        # rows never exceed m rounded up, or 64
        ("config", (3, 16), Has(rows=4)),
        ("config", (1000, 16), Has(rows=64)),
        ("config", (1000, 16, "tiled"), {"rows": 8, "block": 32}, tile_plan("tiled", 32, 8, 125)),
    ],
    plan_errors=[("config", (10, 1000, "fastest"), {}, "variant must be one of")],
    triton_compile=[
        ("gated_baselines.fused_tiled_kernel", "bf16", {"ACT": 0, "ROWS": 2, "BLOCK": 2048}),
        ("gated_baselines.fused_row_kernel", "fp16", {"ACT": 0, "BLOCK": 4096}),
    ],
    cutile_kernels=[
        (kernel, dt, args, dt == "bfloat16")
        for dt in ("bfloat16", "float16", "float32")
        for kernel, args in (
            (("gated_baselines.cutile_kernel", ("tiled", 4)), ["A2", "A2", "A2", 0, 2, 2048]),
            (("gated_baselines.cutile_kernel", ("wide", -1)), ["A2", "A2", "A2", 0, 4, 2048]),
            (("gated_baselines.cutile_kernel", ("row", 4)), ["A2", "A2", "A2", 0, 4096]),
        )
    ],
)
