"""rms_norm_backward's tests beyond the generated suite: the reference against autograd of the forward's
float64 reference, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the
CPU (tilekit.runtime.baseline_cases)."""

import torch

from kernels.rms_norm.spec import reference as forward_reference
from kernels.rms_norm_backward.spec import EPS, SPEC
from tilekit.runtime.baseline_cases import H200_SMS as SMS
from tilekit.runtime.baseline_cases import BaselineCases, Has
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


def _arrays(block: int, rows: int, centered: bool = False) -> list:
    """The norms' cuTile kernel's arguments: DY, X, W, DX, PART (f32), then eps, ROWS, BLOCK, CENTERED
    (layer_norm_backward's tests pass centered)."""
    return ["A2", "A2", "A1", "A2", "A2:float32", EPS, rows, block, centered]


BASELINE_CASES = BaselineCases(
    SPEC,
    interpreted=[
        ({"m": 5, "n": 100, "dtype": "float32"}, "auto", {}),
        ({"m": 9, "n": 1000, "row_stride": 1040, "dtype": "float16"}, "auto", {}),
        ({"m": 3, "n": 16, "dtype": "bfloat16"}, "auto", {}),
    ],
    torch_case=({"m": 5, "n": 1000, "dtype": "float32"}, 1e-5),
    bad_inputs=[
        ((torch.randn(2, 4), torch.randn(2, 3, 4), torch.randn(4)), ValueError, "must be 2-D"),
        ((torch.randn(2, 5), torch.randn(2, 4), torch.randn(4)), ValueError, "dy must match x"),
        ((torch.randn(2, 4), torch.randn(2, 4), torch.randn(5)), ValueError, r"w be \(4,\)"),
        ((torch.randn(4, 2).t(), torch.randn(2, 4), torch.randn(4)), ValueError, "last dim must be contiguous"),
    ],
    plans=[
        ("config", (16384, 4096, SMS), {"block": 4096, "rows": 1, "grid": 2 * SMS, "num_warps": 8}),
        ("config", (100, 1000, SMS), Has(block=1024, rows=4, grid=25, num_warps=4)),
        ("config", (8, 16384, SMS), Has(block=16384, rows=1, grid=8, num_warps=16)),
    ],
    plan_errors=[
        ("config", (10, 16385, SMS), {}, "at most 16384"),
        ("config", (10, 100, SMS, "row"), {}, "variant must be one of"),
    ],
    triton_compile=[
        ("nb.triton_kernel", "bf16", {"ROWS": 1, "BLOCK": 4096, "CENTERED": False}, {"num_warps": 8}),
        ("nb.triton_kernel", "fp32", {"ROWS": 4, "BLOCK": 1024, "CENTERED": False}),
    ],
    triton_types={"eps": "fp32"},
    cutile_kernels=[
        ("nb.cutile_kernel", "bfloat16", _arrays(4096, 1), True),
        ("nb.cutile_kernel", "float32", _arrays(1024, 4), False),
    ],
)
