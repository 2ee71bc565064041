"""silu_and_mul_backward's tests beyond the generated suite: the reference against autograd of
silu_and_mul's float64 reference, and BASELINE_CASES, what tests/kit/test_baselines.py checks of
baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import torch

from kernels.silu_and_mul_backward.spec import SPEC
from tilekit.runtime import gated
from tilekit.runtime.baseline_cases import BaselineCases
from tilekit.runtime.kernel import shapes


def test_reference_is_autograd_of_the_forward():
    inputs = SPEC.make_inputs({"dtype": "float32", "m": 5, "h": 6, "row_stride": 16}, device="cpu", seed=2)
    x = inputs["x"].double().requires_grad_()
    gated.reference(x[:, :6], x[:, 6:]).backward(inputs["dy"].double())
    torch.testing.assert_close(SPEC.reference(inputs), x.grad, rtol=1e-12, atol=1e-12)
    assert tuple(SPEC.out_shape({"m": 5, "h": 6})) == (5, 12)


BASELINE_CASES = BaselineCases(
    SPEC,
    # irregular H, padded rows, several column tiles, every dtype
    interpreted=[
        (c, "auto", {}) for c in shapes("dtype m h row_stride", ("float32", 5, 100), ("float16", 9, 1000, 2040))
    ]
    + [({"m": 3, "h": 4097, "dtype": "bfloat16"}, "auto", {})],
    torch_case=({"m": 5, "h": 1000, "row_stride": 2040, "dtype": "float32"}, 1e-5),
    bad_inputs=[
        ((torch.randn(2, 4), torch.randn(2, 7)), ValueError, "x must be"),
        ((torch.randn(2, 3), torch.randn(2, 8)), ValueError, "dy"),
        ((torch.randn(2, 4), torch.randn(2, 3, 8)), ValueError, "must be 2-D"),
    ],
    plans=[
        ("config", (16384, 14336), {"block": 2048, "rows": 2, "grid": (8192, 7)}),
        ("config", (3, 100), {"block": 128, "rows": 4, "grid": (1, 1)}),
    ],
    plan_errors=[("config", (10, 100, "row"), {}, "variant must be one of")],
    triton_compile=[
        ("gated_backward_baselines.triton_kernel", "bf16", {"ROWS": 2, "BLOCK": 2048}),
        ("gated_backward_baselines.triton_kernel", "fp32", {"ROWS": 4, "BLOCK": 128}),
    ],
    cutile_kernels=[
        ("gated_backward_baselines.cutile_kernel", "bfloat16", ["A2"] * 5 + [2, 2048], True),
        ("gated_backward_baselines.cutile_kernel", "float32", ["A2"] * 5 + [4, 128], False),
    ],
)
