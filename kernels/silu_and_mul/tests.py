"""silu_and_mul's GPU tests beyond the generated suite (tilekit.suite adds them to
tests/kernels/test_silu_and_mul.py)."""

import torch

from kernels.silu_and_mul.spec import SPEC
from tilekit import harness


def test_op_3d_input_cutile_rs(cuda):
    """Leading dims are flattened: (b, s, 2H) -> (b, s, H)."""
    x = 2 * torch.randn(3, 5, 2 * 300, device=cuda, dtype=torch.bfloat16)
    y = SPEC.entry(x)
    assert y.shape == (3, 5, 300)
    ref = SPEC.reference({"x": x.reshape(15, 600)}).reshape(3, 5, 300)
    harness.check_close(y, ref, SPEC.tolerance["bfloat16"], "cutile_rs 3-D")
