"""rms_norm_backward's tests beyond the generated suite: the reference against autograd of the forward's
float64 reference, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the
CPU (tilekit.runtime.baseline_cases)."""

import torch

from kernels.rms_norm.spec import reference as forward_reference
from kernels.rms_norm_backward.spec import EPS, SPEC
from tilekit.runtime import norm_backward_baselines as nb
from tilekit.runtime.kernel import stacked


def test_reference_is_autograd_of_the_forward_stacked():
    inputs = SPEC.make_inputs({"dtype": "float32", "m": 7, "n": 33, "row_stride": 40}, device="cpu", seed=3)
    x, w = (inputs[k].double().requires_grad_() for k in ("x", "weight"))
    forward_reference({"x": x, "weight": w, "eps": EPS}).backward(inputs["dy"].double())
    expected = torch.cat((x.grad, w.grad[None]))
    torch.testing.assert_close(SPEC.reference(inputs), expected, rtol=1e-12, atol=1e-12)
    assert tuple(SPEC.out_shape({"m": 7, "n": 33})) == (8, 33)


def test_the_libraries_start_from_each_inputs_own_saved_rstd():
    """The baselines' saved rstd is keyed by the input tensor itself: two inputs of one shape each get
    their own (on the H100 a new input at a freed one's address took its rstd), and an entry goes
    with its input."""
    import gc

    from kernels.rms_norm_backward import baselines as B

    for seed in (0, 1):
        inputs = SPEC.make_inputs({"dtype": "float32", "m": 64, "n": 256}, device="cpu", seed=seed)
        got = stacked(B.torch_rms_norm_backward(*inputs.values()), (65, 256))
        torch.testing.assert_close(got.double(), SPEC.reference(inputs), rtol=1e-4, atol=1e-4)
        assert B.saved_rstd(inputs["x"], EPS) is B.SAVED[inputs["x"]][1]
    kept = len(B.SAVED)
    del inputs, got
    gc.collect()
    assert len(B.SAVED) == kept - 1


BASELINE_CASES = nb.baseline_cases(SPEC, EPS, centered=False)
