"""silu_and_mul_backward's tests beyond the generated suite: the reference against autograd of silu_and_mul's
float64 reference, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the
CPU (tilekit.runtime.baseline_cases): the gated family's fused gradient's (tilekit.runtime.gated)."""

from kernels.silu_and_mul_backward.spec import SPEC
from tilekit.runtime import gated


def test_reference_is_autograd_of_the_forward():
    gated.assert_backward_reference_is_autograd(SPEC, "silu")


BASELINE_CASES = gated.fused_backward_cases(SPEC, "silu")
