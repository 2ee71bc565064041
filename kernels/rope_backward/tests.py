"""rope_backward's tests beyond the generated suite: the reference against autograd of rope's
float64 reference, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the
CPU (tilekit.runtime.baseline_cases)."""

import dataclasses

import torch

from kernels.rope import tests as forward_tests
from kernels.rope.spec import reference as forward_reference
from kernels.rope_backward.spec import SPEC


def test_reference_is_autograd_of_ropes_reference():
    """Both layouts, positions and per-sequence tables: rotating back is the vector-Jacobian product."""
    for cfg in (
        {"b": 2, "s": 5, "hq": 3, "hk": 1, "d": 8, "positions": 1, "dtype": "float32"},
        {"b": 2, "s": 4, "hq": 2, "hk": 2, "d": 6, "heads_first": 1, "per_batch": 1, "dtype": "float32"},
    ):
        inputs = SPEC.make_inputs(cfg, device="cpu", seed=1)
        head = 1 if cfg.get("heads_first") else 2
        q, k = (inputs[n].double().requires_grad_() for n in ("dq", "dk"))
        rest = {n: inputs[n] for n in ("cos", "sin", "position_ids", "heads_first")}
        y = forward_reference({"q": q, "k": k, **rest})
        dy = torch.cat((inputs["dq"], inputs["dk"]), head).double()
        y.backward(dy)
        grads = {"dq": inputs["dq"], "dk": inputs["dk"]} | {
            n: inputs[n] for n in ("cos", "sin", "position_ids", "heads_first")
        }
        grads["dq"], grads["dk"] = dy.narrow(head, 0, cfg["hq"]), dy.narrow(head, cfg["hq"], cfg["hk"])
        expected = torch.cat((q.grad, k.grad), head)
        torch.testing.assert_close(SPEC.reference(grads), expected, rtol=1e-12, atol=1e-12)


BASELINE_CASES = dataclasses.replace(forward_tests.BASELINE_CASES, spec=SPEC)
