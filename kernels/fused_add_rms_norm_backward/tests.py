"""fused_add_rms_norm_backward's tests beyond the generated suite: the reference against autograd of the
forward's float64 reference, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py
on the CPU (tilekit.runtime.baseline_cases)."""

import torch

from kernels.fused_add_rms_norm.spec import reference as forward_reference
from kernels.fused_add_rms_norm_backward.spec import EPS, SPEC
from tilekit.runtime import norm_backward_baselines as nb


def test_reference_is_autograd_of_the_forward_stacked():
    """dx (x's and residual's gradient, one tensor) and dw from autograd of the forward's reference (y
    and s) with the gradients (dy, dresidual) of its two planes."""
    inputs = SPEC.make_inputs({"dtype": "float32", "m": 7, "n": 33, "row_stride": 40}, device="cpu", seed=3)
    s = inputs["s"].double()
    x = (0.25 * s).requires_grad_()
    r = (s - x.detach()).requires_grad_()  # x + r = s exactly (f64), and rounds to itself
    w = inputs["weight"].double().requires_grad_()
    out = forward_reference({"x": x, "residual": r, "weight": w, "eps": EPS})
    out.backward(torch.stack((inputs["dy"].double(), inputs["dresidual"].double())))
    expected = torch.cat((x.grad, w.grad[None]))
    torch.testing.assert_close(SPEC.reference(inputs), expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(r.grad, x.grad, rtol=0, atol=0)
    assert tuple(SPEC.out_shape({"m": 7, "n": 33})) == (8, 33)


BASELINE_CASES = nb.baseline_cases(SPEC, EPS, centered=False, added=True)
