"""fused_add_rms_norm's tests beyond the generated suite: the in-place form (vLLM's and FlashInfer's:
residual <- s, x <- y) on the GPU and its refusals and op on the CPU, and BASELINE_CASES, what
tests/kit/test_baselines.py checks of baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import pytest
import torch

from kernels.fused_add_rms_norm import op
from kernels.fused_add_rms_norm.spec import SPEC
from tilekit.runtime.baseline_cases import BaselineCases, Has
from tilekit.testing import harness


@pytest.mark.parametrize("shape", [(257, 4097), (2, 300, 4096), (1, 1)])
def test_op_in_place_form_cutile_rs(cuda, shape):
    """fused_add_rms_norm_ writes s into residual and y into x (every row tile, a partial one, leading
    dims), equal to the functional form's two planes; a second call on the same tensors reads the first's
    results (what a decode loop does), and its autotune ran on copies (the caller's tensors written once)."""
    cfg = {"m": shape[-2] if len(shape) > 1 else 1, "n": shape[-1], "dtype": "bfloat16"}
    inputs = SPEC.make_inputs({**cfg, "m": int(torch.tensor(shape[:-1]).prod())})
    x, r = (inputs[k].reshape(shape).contiguous() for k in ("x", "residual"))
    expected = SPEC.reference({**inputs, "x": x, "residual": r})
    got_x, got_r = op.fused_add_rms_norm_(x, r, inputs["weight"], inputs["eps"])
    assert got_x is x and got_r is r
    harness.check_close(torch.stack((x, r)), expected, SPEC.tolerance["bfloat16"], f"in place {shape}")
    again = SPEC.reference({**inputs, "x": x.clone(), "residual": r.clone()})
    op.fused_add_rms_norm_(x, r, inputs["weight"], inputs["eps"])
    harness.check_close(torch.stack((x, r)), again, SPEC.tolerance["bfloat16"], f"in place again {shape}")


def test_op_in_place_form_under_torch_compile_cutile_rs(cuda):
    """The in-place op inside a compiled function (dynamo functionalizes it; no graph break) writes what
    eager writes."""
    inputs = SPEC.make_inputs({"m": 64, "n": 4096, "dtype": "bfloat16"})
    x, r, w = inputs["x"], inputs["residual"], inputs["weight"]

    def step(x, r):
        op.fused_add_rms_norm_(x, r, w)
        return x * 2

    ex, er = x.clone(), r.clone()
    expected = step(ex, er)
    cx, cr = x.clone(), r.clone()
    got = torch.compile(step, fullgraph=True)(cx, cr)
    for a, b in ((got, expected), (cx, ex), (cr, er)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_in_place_form_refuses_grad_shared_memory_and_unviewable_rows():
    x, r, w = torch.randn(4, 8), torch.randn(4, 8), torch.randn(8)
    with pytest.raises(ValueError, match="in place, for inference"):
        op.fused_add_rms_norm_(x, r, w.requires_grad_())
    w = w.detach()
    with pytest.raises(ValueError, match="x and residual share memory"):
        op.fused_add_rms_norm_(x, x, w)
    with pytest.raises(ValueError, match="residual must have x's shape"):
        op.fused_add_rms_norm_(x, torch.randn(4, 9), w)
    swapped = torch.randn(2, 4, 8).transpose(0, 1)  # (4, 2, 8) at strides (8, 32, 1): no (8, 8) view of it
    with pytest.raises(ValueError, match="cannot be viewed as rows"):
        op.fused_add_rms_norm_(swapped, torch.randn(4, 2, 8), w)
    with pytest.raises(ValueError, match="on a CUDA device|one CUDA device"):
        op.fused_add_rms_norm_(x, r, w)


def test_in_place_op_is_registered_and_traces_on_fake_tensors():
    """torch.ops.tilekit.fused_add_rms_norm_ marks x and residual written and returns nothing; its fake
    implementation runs the entry's checks (a bad shape fails at trace time)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    schema = torch.ops.tilekit.fused_add_rms_norm_.default._schema
    assert [a.alias_info is not None and a.alias_info.is_write for a in schema.arguments] == [True, True, False, False]
    with FakeTensorMode():
        x, r, w = torch.empty(4, 8), torch.empty(4, 8), torch.empty(8)
        assert torch.ops.tilekit.fused_add_rms_norm_(x, r, w) is None
        with pytest.raises(ValueError, match="weight must be"):
            torch.ops.tilekit.fused_add_rms_norm_(x, r, torch.empty(7))


def test_reference_stores_the_rounded_sum_and_normalizes_it():
    inputs = SPEC.make_inputs({"m": 3, "n": 100, "dtype": "bfloat16"}, device="cpu", seed=0)
    y, s = SPEC.reference(inputs)
    assert torch.equal(s, (inputs["x"].float() + inputs["residual"].float()).bfloat16().double())
    expected = torch.nn.functional.rms_norm(s, (100,), inputs["weight"].double(), inputs["eps"])
    torch.testing.assert_close(y, expected, rtol=1e-12, atol=1e-12)


BASELINE_CASES = BaselineCases(
    SPEC,
    # several rows a tile, irregular n, padded rows, the widest row
    interpreted=[
        ({"dtype": "float32", "m": 5, "n": 100}, "auto", {}),
        ({"dtype": "float16", "m": 9, "n": 1000, "row_stride": 1040}, "auto", {}),
        ({"dtype": "bfloat16", "m": 2, "n": 16384}, "auto", {}),
    ],
    torch_case=({"m": 5, "n": 1000, "row_stride": 1040, "dtype": "float32"}, 1e-5),
    bad_inputs=[
        ((torch.randn(2, 4), torch.randn(2, 5), torch.randn(4)), ValueError, "residual must match x"),
        ((torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(4)), ValueError, "must be 2-D"),
        ((torch.randn(2, 4), torch.randn(2, 4), torch.randn(5)), ValueError, r"w must have shape \(4,\)"),
    ],
    plans=[
        ("config", (16384, 4096), {"block": 4096, "rows": 2, "grid": 8192}),
        ("config", (3, 100), {"block": 128, "rows": 4, "grid": 1}),
        ("config", (256, 16384), Has(rows=1, grid=256)),
    ],
    plan_errors=[
        ("config", (10, 100, "row"), {}, "variant must be one of"),
        ("config", (10, 16385), {}, "at most 16384"),
    ],
    triton_compile=[
        ("_triton_kernel", "bf16", {"ROWS": 2, "BLOCK": 4096}, {"num_warps": 8}),
        ("_triton_kernel", "fp32", {"ROWS": 4, "BLOCK": 1024}),
    ],
    triton_types={"eps": "fp32"},
    cutile_kernels=[
        ("_cutile_kernel", "bfloat16", ["A2"] * 5 + [1e-6, 2, 4096], True),
        ("_cutile_kernel", "float32", ["A2"] * 5 + [1e-6, 4, 1024], False),
    ],
)
