"""cross_entropy_backward's tests beyond the generated suite: the reference against autograd of
cross_entropy's, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the
CPU (tilekit.runtime.baseline_cases)."""

import pytest
import torch

from kernels.cross_entropy import spec as forward
from kernels.cross_entropy_backward.spec import SPEC
from tilekit.runtime.baseline_cases import BaselineCases


@pytest.mark.parametrize("extra", [{}, {"smoothing": 0.2, "ignore": 0}, {"dloss": "mean"}])
def test_reference_is_autograd_of_the_losses(extra):
    inputs = SPEC.make_inputs({"m": 30, "n": 17, "dtype": "float32", **extra}, "cpu", 2)
    x = inputs["logits"].double().requires_grad_()
    losses = forward.reference({**inputs, "logits": x})
    losses.backward(inputs["dloss"].double().expand(30))
    torch.testing.assert_close(SPEC.reference(inputs), x.grad, rtol=1e-12, atol=1e-14)


def test_a_mean_dloss_is_one_over_the_rows_counted():
    inputs = SPEC.make_inputs({"m": 30, "n": 17, "dtype": "float32", "dloss": "mean"}, "cpu", 2)
    counted = int((inputs["target"] != -100).sum())
    assert inputs["dloss"].tolist() == [pytest.approx(1 / counted)] and counted <= 30 - 4


BASELINE_CASES = BaselineCases(
    SPEC,
    interpreted=[
        ({"dtype": "float32", "m": 9, "n": 100}, "auto", {}),
        ({"dtype": "float16", "m": 8, "n": 1000, "row_stride": 1040, "smoothing": 0.1, "dloss": "mean"}, "auto", {}),
        ({"dtype": "bfloat16", "m": 4, "n": 9000, "target": "int32", "ignore": 0}, "auto", {}),
    ],
    torch_case=({"m": 9, "n": 1000, "row_stride": 1040, "dtype": "float32", "smoothing": 0.1}, 1e-6),
    bad_inputs=[
        ((torch.randn(2, 4), torch.zeros(2, dtype=torch.long), torch.zeros(3)), ValueError, "dloss must be"),
        ((torch.randn(2, 4), torch.zeros(3, dtype=torch.long), torch.zeros(2)), ValueError, "a class id per row"),
    ],
    plans=[("config", (4096, 128256), {"block": 4096, "rows": 1, "grid": 4096})],
    plan_errors=[("config", (10, 100, "row"), {}, "variant must be one of")],
    triton_compile=[
        ("_triton_kernel", "bf16", {"ROWS": 1, "BLOCK": 4096, "GRAD": True}, {"num_warps": 8}),
    ],
    triton_types={"keep": "fp32", "spread": "fp32"},
    cutile_kernels=[
        (
            "_cutile_kernel",
            "bfloat16",
            ["A2", "A1:int64", "A1:float32", "A2", "A1:float32", -100, 0.0, 1, 4096, True],
            True,
        ),
    ],
)
