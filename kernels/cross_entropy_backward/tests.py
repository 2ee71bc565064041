"""cross_entropy_backward's tests beyond the generated suite: the reference against autograd of
cross_entropy's, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the
CPU (tilekit.runtime.baseline_cases)."""

import pytest
import torch

from kernels.cross_entropy import spec as forward
from kernels.cross_entropy_backward.spec import SPEC
from tilekit.runtime.baseline_cases import BaselineCases
from tilekit.testing import harness


@pytest.mark.parametrize("extra", [{}, {"smoothing": 0.2, "ignore": 0}, {"dloss": "mean"}])
def test_reference_is_autograd_of_the_losses(extra):
    inputs = SPEC.make_inputs({"m": 30, "n": 17, "dtype": "float32", **extra}, "cpu", 2)
    x = inputs["logits"].double().requires_grad_()
    losses = forward.reference({**inputs, "logits": x})
    losses.backward(inputs["dloss"].double().expand(30))
    torch.testing.assert_close(SPEC.reference(inputs), x.grad, rtol=1e-12, atol=1e-14)


def test_a_mean_dloss_is_one_over_the_rows_counted():
    inputs = SPEC.make_inputs({"m": 30, "n": 17, "dtype": "float32", "dloss": "mean"}, "cpu", 2)
    counted = int((inputs["target"] != -100).sum())
    assert inputs["dloss"].tolist() == [pytest.approx(1 / counted)] and counted <= 30 - 4


@pytest.mark.parametrize("reduction, dloss", [("mean", 1.0), ("sum", 0.5), ("none", None), ("mean", 3.0)])
def test_op_training_loss_matches_autograd_of_torchs_loss_cutile_rs(cuda, reduction, dloss):
    """cross_entropy_loss with logits that require grad runs torch.ops.tilekit.cross_entropy_train (the
    gradient written in the loss's launch): its loss and the logits' gradient against F.cross_entropy's
    in float64, for a loss gradient of 1 (the gradient as written), another scalar and one per row;
    an ignored row and smoothing included; under torch.compile (fullgraph) too."""
    import torch.nn.functional as F

    from kernels.cross_entropy.op import cross_entropy_loss

    cfg = {"m": 300, "n": 50000, "dtype": "bfloat16", "smoothing": 0.1}
    inputs = forward.make_inputs(cfg)
    logits, target = inputs["logits"], inputs["target"]
    grad_out = torch.randn(300, device=logits.device) if dloss is None else torch.tensor(dloss, device=logits.device)
    kw = {"ignore_index": -100, "label_smoothing": 0.1, "reduction": reduction}
    ref_x = logits.detach().double().requires_grad_()
    ref = F.cross_entropy(ref_x, target, **kw)
    ref.backward(grad_out.double())
    for fn in (cross_entropy_loss, torch.compile(cross_entropy_loss, fullgraph=True)):
        x = logits.detach().requires_grad_()
        loss = fn(x, target, **kw)
        assert loss.dtype == logits.dtype and loss.shape == ref.shape
        harness.check_close(loss.float(), ref.detach(), (1e-2, 1e-2), f"{reduction} loss")  # rounded to bf16
        loss.backward(grad_out.to(loss.dtype))
        harness.check_close(x.grad, ref_x.grad, SPEC.tolerance["bfloat16"], f"{reduction} dlogits")


def test_op_gradient_over_the_logits_cutile_rs(cuda):
    """out=logits: the gradient written over the logits (each row read before it is written)."""
    from kernels.cross_entropy_backward.op import cross_entropy_backward

    cfg = {"m": 64, "n": 40000, "dtype": "bfloat16", "dloss": "mean"}
    inputs = SPEC.make_inputs(cfg)
    expected = SPEC.reference(inputs)
    y = cross_entropy_backward(*inputs.values(), out=inputs["logits"])
    assert y.data_ptr() == inputs["logits"].data_ptr()
    harness.check_close(y, expected, SPEC.tolerance["bfloat16"], "in place")


BASELINE_CASES = BaselineCases(
    SPEC,
    interpreted=[
        ({"dtype": "float32", "m": 9, "n": 100}, "auto", {}),
        ({"dtype": "float16", "m": 8, "n": 1000, "row_stride": 1040, "smoothing": 0.1, "dloss": "mean"}, "auto", {}),
        ({"dtype": "bfloat16", "m": 4, "n": 9000, "target": "int32", "ignore": 0}, "auto", {}),
    ],
    torch_case=({"m": 9, "n": 1000, "row_stride": 1040, "dtype": "float32", "smoothing": 0.1}, 1e-6),
    bad_inputs=[
        ((torch.randn(2, 4), torch.zeros(2, dtype=torch.long), torch.zeros(3)), ValueError, "dloss must be"),
        ((torch.randn(2, 4), torch.zeros(3, dtype=torch.long), torch.zeros(2)), ValueError, "a class id per row"),
    ],
    plans=[("config", (4096, 128256), {"block": 4096, "rows": 1, "grid": 4096})],
    plan_errors=[("config", (10, 100, "row"), {}, "variant must be one of")],
    triton_compile=[
        ("_triton_kernel", "bf16", {"ROWS": 1, "BLOCK": 4096, "GRAD": True}, {"num_warps": 8}),
    ],
    triton_types={"keep": "fp32", "spread": "fp32"},
    cutile_kernels=[
        (
            "_cutile_kernel",
            "bfloat16",
            ["A2", "A1:int64", "A1:float32", "A2", "A1:float32", -100, 0.0, 1, 4096, True],
            True,
        ),
    ],
)
