"""softmax_backward's tests beyond the generated suite: the reference against autograd of softmax's
float64 reference, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the
CPU (tilekit.runtime.baseline_cases)."""

import pytest
import torch

from kernels.softmax_backward.spec import SPEC
from tilekit.runtime.baseline_cases import BaselineCases


def test_reference_is_autograd_of_softmax():
    g = torch.Generator().manual_seed(2)
    x = (2 * torch.randn(5, 33, generator=g, dtype=torch.float64)).requires_grad_()
    dy = torch.randn(5, 33, generator=g, dtype=torch.float64)
    y = torch.softmax(x, -1)
    y.backward(dy)
    torch.testing.assert_close(SPEC.reference({"dy": dy, "y": y.detach()}), x.grad, rtol=1e-12, atol=1e-15)


def test_the_looped_form_serves_wide_rows_and_whole_rows_the_rest():
    from kernels.softmax_backward import baselines as B

    assert [B.config(8, n)["looped"] for n in (100, 8192, 8193, 128256)] == [False, False, True, True]


@pytest.mark.parametrize(
    "variant",
    [
        {"block": 4096, "rows": 1, "occupancy": 4, "warps": 8, "chunk": 8192, "lag": 4},
        {"block": 2048, "rows": 2, "occupancy": 4, "warps": 8, "chunk": 4096, "lag": 7},
        {"block": 4096, "rows": 1, "occupancy": 4, "warps": 8, "chunk": 8192, "lag": 256},
    ],
    ids=["lag_chunks", "two_rows", "lag_256"],
)
def test_op_lagged_split_cutile_rs(cuda, variant):
    """The lagged split at the smallest lag (the row's chunks: a ticket's store then waits on the
    row just summed, so the exchange's ordering is what makes it right), with two-row tiles, and at
    a candidate's lag; over 300 ragged, unaligned rows of 24577 (4 chunks of 8192 a row; 7 of 4096
    in the two-row tiles, 150 row tiles)."""
    from kernels.softmax_backward.op import softmax_backward
    from tilekit.testing import harness

    inputs = SPEC.make_inputs({"m": 300, "n": 24577, "dtype": "bfloat16"})
    dx = softmax_backward(*inputs.values(), variant=variant)
    harness.check_close(dx, SPEC.reference(inputs), SPEC.tolerance["bfloat16"], f"{variant}")


BASELINE_CASES = BaselineCases(
    SPEC,
    # whole rows (several a tile, irregular n, padded rows) and the looped form
    interpreted=[
        ({"dtype": "float32", "m": 5, "n": 100}, "auto", {}),
        ({"dtype": "float16", "m": 9, "n": 1000, "row_stride": 1040}, "auto", {}),
        ({"dtype": "bfloat16", "m": 3, "n": 9000}, "auto", {}),  # looped: 4096-wide tiles, an uneven last one
    ],
    torch_case=({"m": 5, "n": 1000, "row_stride": 1040, "dtype": "float32"}, 1e-6),
    bad_inputs=[
        ((torch.randn(2, 4), torch.randn(2, 5)), ValueError, "dy must match y"),
        ((torch.randn(2, 3, 4), torch.randn(2, 3, 4)), ValueError, "must be 2-D"),
    ],
    plans=[
        ("config", (32768, 4096), {"block": 4096, "rows": 1, "looped": False, "grid": 32768}),
        ("config", (3, 100), {"block": 128, "rows": 4, "looped": False, "grid": 1}),
        ("config", (4096, 128256), {"block": 4096, "rows": 1, "looped": True, "grid": 4096}),
    ],
    plan_errors=[("config", (10, 100, "row"), {}, "variant must be one of")],
    triton_compile=[
        ("_triton_backward_kernel", "bf16", {"ROWS": 1, "BLOCK": 4096, "LOOPED": True}, {"num_warps": 8}),
        ("_triton_backward_kernel", "fp32", {"ROWS": 4, "BLOCK": 1024, "LOOPED": False}),
    ],
    cutile_kernels=[
        ("_cutile_backward_kernel", "bfloat16", ["A2"] * 3 + [1, 4096, True], True),
        ("_cutile_backward_kernel", "float32", ["A2"] * 3 + [4, 1024, False], False),
    ],
)
