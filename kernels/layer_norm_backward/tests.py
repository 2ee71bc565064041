"""layer_norm_backward's tests beyond the generated suite: the reference against autograd of the
forward's float64 reference, the gradient an absent weight or bias gets, and BASELINE_CASES, what
tests/kit/test_baselines.py checks of baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import torch

from kernels.layer_norm.spec import reference as forward_reference
from kernels.layer_norm_backward import op
from kernels.layer_norm_backward.spec import EPS, SPEC
from tilekit.runtime import norm_backward_baselines as nb
from tilekit.runtime.kernel import stacked


def test_reference_is_autograd_of_the_forward_stacked():
    inputs = SPEC.make_inputs({"dtype": "float32", "m": 7, "n": 33, "row_stride": 40}, device="cpu", seed=3)
    x, w = (inputs[k].double().requires_grad_() for k in ("x", "weight"))
    b = torch.zeros(33, dtype=torch.float64, requires_grad=True)
    forward_reference({"x": x, "weight": w, "bias": b, "eps": EPS}).backward(inputs["dy"].double())
    expected = torch.cat((x.grad, w.grad[None], b.grad[None]))
    torch.testing.assert_close(SPEC.reference(inputs), expected, rtol=1e-12, atol=1e-12)
    assert tuple(SPEC.out_shape({"m": 7, "n": 33})) == (9, 33)


def test_forward_gradients_views_the_one_output_and_skips_absent_parameters(monkeypatch):
    """dx, dw, db are views of the port's output; a weight of None is ones for the port and, like an
    absent bias, gets no gradient."""
    inputs = SPEC.make_inputs({"dtype": "float32", "m": 5, "n": 16}, device="cpu", seed=1)
    calls = []

    def port(dy, x, w, eps):
        calls.append(w)
        return SPEC.reference({"dy": dy, "x": x, "weight": w, "eps": eps}).float()

    monkeypatch.setattr(op.layer_norm_backward, "op", port)
    x, dy, w = inputs["x"], inputs["dy"], inputs["weight"]
    dx, dw, db, deps = op.forward_gradients((x, None, None, EPS), dy, (True, False, False, False))
    torch.testing.assert_close(calls[-1], torch.ones(16))
    assert (dw, db, deps) == (None, None, None) and dx.shape == x.shape
    dx, dw, db, _ = op.forward_gradients((x, w, torch.zeros(16), EPS), dy, (True, True, True, False))
    expected = SPEC.reference(inputs).float()
    torch.testing.assert_close(torch.cat((dx, dw[None], db[None])), expected)
    assert op.forward_gradients((x, w, None, EPS), dy, (False, False, False, False)) == (None,) * 4


def test_the_libraries_start_from_each_inputs_own_saved_statistics():
    """torch's backward from the saved (mean, rstd), checked stacked against the reference; the
    statistics are kept per input tensor and go with it."""
    import gc

    from kernels.layer_norm_backward import baselines as B

    for seed in (0, 1):
        inputs = SPEC.make_inputs({"dtype": "float32", "m": 64, "n": 256}, device="cpu", seed=seed)
        got = stacked(B.torch_layer_norm_backward(*inputs.values()), (66, 256))
        torch.testing.assert_close(got.double(), SPEC.reference(inputs), rtol=1e-4, atol=1e-4)
        assert B.nb.saved_stats(inputs["x"], EPS, centered=True) is B.SAVED[inputs["x"]]
    kept = len(B.SAVED)
    del inputs, got
    gc.collect()
    assert len(B.SAVED) == kept - 1


BASELINE_CASES = nb.baseline_cases(SPEC, EPS, centered=True)
