"""gelu_and_mul's tests beyond the generated suite (tilekit.testing.suite adds the test_* to
tests/kernels/test_gelu_and_mul.py): its inputs and reference on the CPU; and BASELINE_CASES, what
tests/kit/test_baselines.py checks of baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import math

import pytest
import torch

from kernels.gelu_and_mul.spec import SPEC
from tilekit.runtime import gated
from tilekit.runtime.baseline_cases import Has, tile_plan


def test_reference_is_the_tanh_gelu_of_the_gate_times_up():
    x = SPEC.make_inputs({"dtype": "float32", "m": 2, "h": 6, "row_stride": 16}, device="cpu", seed=1)["x"]
    assert x.stride() == (16, 1) and x[0, :4].tolist() == [-100.0, -30.0, 30.0, 100.0]
    ref = SPEC.reference({"x": x})
    g, u = x[1, 0].item(), x[1, 6].item()
    gelu = 0.5 * g * (1 + math.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g**3)))
    assert ref[1, 0].item() == pytest.approx(gelu * u, rel=1e-12)
    assert ref[0, 0].item() == pytest.approx(0.0, abs=1e-300) and ref[0, 3].item() == pytest.approx(
        100 * x[0, 9].item()
    )


def test_the_baselines_sigmoid_form_is_the_tanh_gelu():
    """Our kernels (port, Triton, cuTile) compute gelu_tanh(g) as g * sigmoid(2 sqrt(2/pi) (g + 0.044715 g^3))."""
    g = torch.linspace(-12, 12, 2001, dtype=torch.float64)
    s = g * (1.5957691216057308 + 0.07135481627260025 * g * g)
    torch.testing.assert_close(
        g * torch.sigmoid(s), torch.nn.functional.gelu(g, approximate="tanh"), rtol=1e-13, atol=1e-15
    )


BASELINE_CASES = gated.fused_baseline_cases(  # the family's cases, and this kernel's plans and kernels
    SPEC,
    plans=[
        ("config", (16384, 16384), tile_plan("tiled", 4096, 1, 16384 * 4)),
        ("config", (256, 9216, "row"), Has(block=4096, grid=256)),
    ],
    plan_errors=[("config", (10, 1000, "fastest"), {}, "variant must be one of")],
    triton_compile=[
        ("gated_baselines.fused_tiled_kernel", "bf16", {"ACT": 1, "ROWS": 2, "BLOCK": 2048}),
        ("gated_baselines.fused_row_kernel", "fp16", {"ACT": 1, "BLOCK": 4096}),
    ],
    cutile_kernels=[
        (("gated_baselines.cutile_kernel", ("tiled", 4)), "bfloat16", ["A2", "A2", "A2", 1, 2, 2048], True),
        (("gated_baselines.cutile_kernel", ("row", 4)), "float16", ["A2", "A2", "A2", 1, 4096], False),
    ],
)
