"""swiglu_backward's tests beyond the generated suite: the reference against autograd of swiglu's
float64 reference, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the
CPU (tilekit.runtime.baseline_cases)."""

import torch

from kernels.swiglu_backward.spec import SPEC
from tilekit.runtime import gated
from tilekit.runtime.baseline_cases import BaselineCases
from tilekit.runtime.kernel import shapes


def test_reference_is_autograd_of_the_forward_stacked():
    inputs = SPEC.make_inputs({"dtype": "float32", "m": 5, "h": 6, "lda": 8, "ldb": 16}, device="cpu", seed=2)
    a, b = (inputs[k].double().requires_grad_() for k in ("a", "b"))
    gated.reference(a, b).backward(inputs["dy"].double())
    torch.testing.assert_close(SPEC.reference(inputs), torch.cat((a.grad, b.grad)), rtol=1e-12, atol=1e-12)
    assert tuple(SPEC.out_shape({"m": 5, "h": 6})) == (10, 6)


BASELINE_CASES = BaselineCases(
    SPEC,
    # irregular H, a and b in rows of their own strides, several column tiles, every dtype
    interpreted=[
        (c, "auto", {})
        for c in shapes(
            "dtype m h lda ldb", ("float32", 5, 100), ("float16", 9, 1000, 1040, 1008), ("bfloat16", 3, 4097)
        )
    ],
    torch_case=({"m": 5, "h": 1000, "lda": 1040, "dtype": "float32"}, 1e-5),
    bad_inputs=[
        ((torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 5)), ValueError, "one shape and dtype"),
        ((torch.randn(2, 4), torch.randn(2, 3, 4), torch.randn(2, 4)), ValueError, "must be 2-D"),
    ],
    plans=[("config", (16384, 14336), {"block": 2048, "rows": 2, "grid": (8192, 7)})],
    plan_errors=[("config", (10, 100, "row"), {}, "variant must be one of")],
    triton_compile=[("gated_backward_baselines.triton_kernel", "bf16", {"ROWS": 2, "BLOCK": 2048, "ACT": 0})],
    cutile_kernels=[("gated_backward_baselines.cutile_kernel", "bfloat16", ["A2"] * 5 + [2, 2048, 0], True)],
)
