"""cross_entropy_backward's tests beyond the generated suite: the reference against autograd of
cross_entropy's, and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the
CPU (tilekit.runtime.baseline_cases)."""

import pytest
import torch

from kernels.cross_entropy import spec as forward
from kernels.cross_entropy_backward.op import DEFAULT_VARIANT as DEFAULT
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


def kernels_in_torch(monkeypatch) -> list:
    """The exports of cross_entropy and its gradient done by torch on the CPU (their references), the
    device check off: the Python around them (the ops, their autograd, the reductions and scales) runs
    as on a GPU. Records each export called."""
    import torch.nn.functional as F

    from tilekit.runtime import checks, port

    called = []

    def run(op, variant, sizes, out, *args, key=None, export=None, mutated=()):
        name = op if isinstance(op, str) else op.__name__
        called.append(export or name)
        if name == "kernels.cross_entropy.op":
            logits, target, ii, eps = args
            out.copy_(
                F.cross_entropy(logits.double(), target.long(), ignore_index=ii, label_smoothing=eps, reduction="none")
            )
            return
        if export == "cutile_cross_entropy_train":
            losses, logits, target, scale, ii, eps = args
            inputs = {"logits": logits, "target": target, "dloss": scale, "ignore_index": ii, "label_smoothing": eps}
            losses.copy_(forward.reference(inputs))
        else:
            logits, target, dloss, ii, eps = args
            inputs = {"logits": logits, "target": target, "dloss": dloss, "ignore_index": ii, "label_smoothing": eps}
        out.copy_(SPEC.reference(inputs))

    monkeypatch.setattr(port, "run", run)
    monkeypatch.setattr(checks, "cuda", lambda kernel, **tensors: None)
    return called


def test_an_out_whose_row_stride_version_3_cannot_address_is_a_class_of_its_own(monkeypatch):
    """Version 3 addresses the gradient's rows in i32 too (ffi.rs split_rows): an `out` of wide rows
    past that reach gets a tune key of its own ("form_3": False), so that a version 3 pick made for
    contiguous gradients is never reused for it (the launcher would refuse it); logits and out on
    the meta device, the export not called."""
    from kernels.cross_entropy_backward.op import cross_entropy_backward
    from tilekit.runtime import checks, port

    keys = []
    monkeypatch.setattr(port, "run", lambda *args, key, **kw: keys.append(key()))
    monkeypatch.setattr(checks, "cuda", lambda kernel, **tensors: None)
    logits = torch.empty((4096, 128256), dtype=torch.bfloat16, device="meta")
    target = torch.zeros(4096, dtype=torch.long, device="meta")
    dloss = torch.empty(1, device="meta")
    wide = torch.empty_strided((4096, 128256), (600000, 1), dtype=torch.bfloat16, device="meta")
    for out in (None, wide):
        cross_entropy_backward(logits, target, dloss, out=out)
    assert keys[1] == {**keys[0], "form_3": False} and "form_3" not in keys[0]


@pytest.mark.parametrize("reduction, dloss", [("mean", 1.0), ("sum", 0.5), ("none", None), ("mean", 3.0)])
def test_the_training_op_and_the_ops_gradient_are_autograd_of_torchs_loss(monkeypatch, reduction, dloss):
    """On the CPU with the exports done by torch (`kernels_in_torch`): cross_entropy_loss with grad runs
    the training op once (no second export at backward) and gives F.cross_entropy's loss and gradient
    for each reduction and loss gradient; torch.ops.tilekit.cross_entropy's gradient (the per-row
    losses, then a sum) is the backward export's."""
    import torch.nn.functional as F

    from kernels.cross_entropy.op import cross_entropy_loss

    called = kernels_in_torch(monkeypatch)
    inputs = forward.make_inputs({"m": 40, "n": 33, "dtype": "float32", "smoothing": 0.1}, "cpu", 4)
    logits, target = inputs["logits"], inputs["target"]
    grad_out = torch.randn(40) if dloss is None else torch.tensor(dloss)
    kw = {"ignore_index": -100, "label_smoothing": 0.1, "reduction": reduction}
    ref_x = logits.detach().double().requires_grad_()
    ref = F.cross_entropy(ref_x, target, **kw)
    ref.backward(grad_out.double())
    x = logits.detach().requires_grad_()
    loss = cross_entropy_loss(x, target, **kw)
    loss.backward(grad_out)
    assert called == ["cutile_cross_entropy_train"]
    torch.testing.assert_close(loss.double(), ref.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x.grad.double(), ref_x.grad, rtol=1e-6, atol=1e-7)
    y = logits.detach().requires_grad_()
    torch.ops.tilekit.cross_entropy(y, target, -100, 0.1).sum().backward()
    assert called[1:] == ["kernels.cross_entropy.op", "kernels.cross_entropy_backward.op"]
    sum_x = logits.detach().double().requires_grad_()
    F.cross_entropy(sum_x, target, label_smoothing=0.1, reduction="sum").backward()
    torch.testing.assert_close(y.grad.double(), sum_x.grad, rtol=1e-6, atol=1e-7)


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


@pytest.mark.parametrize(
    "variant",
    [
        "auto",
        {**DEFAULT, "block": 4096, "rows": 1, "form": 2},
        {"block": 4096, "rows": 1, "occupancy": 8, "warps": 4, "form": 3},
        {"block": 4096, "rows": 1, "occupancy": 8, "warps": 4, "form": 4},
    ],
    ids=["auto", "form_2", "form_3", "form_4"],
)
def test_op_gradient_over_the_logits_cutile_rs(cuda, variant):
    """out=logits: the gradient written over the logits (each row read before it is written; in
    versions 3 and 4 every chunk of a row reads before any chunk of it writes), with smoothing, for
    the autotuned pick and each one-row form; 256 rows of 5 chunks (1280 tickets, 752 past version
    4's lag of 528 on an H200), so that its tile blocks both sum and store."""
    from kernels.cross_entropy_backward.op import cross_entropy_backward

    cfg = {"m": 256, "n": 40000, "dtype": "bfloat16", "dloss": "mean", "smoothing": 0.1}
    inputs = SPEC.make_inputs(cfg)
    expected = SPEC.reference(inputs)
    y = cross_entropy_backward(*inputs.values(), out=inputs["logits"], variant=variant)
    assert y.data_ptr() == inputs["logits"].data_ptr()
    harness.check_close(y, expected, SPEC.tolerance["bfloat16"], "in place")


@pytest.mark.parametrize(
    "variant",
    [
        {**DEFAULT, "block": 1024, "rows": 4, "form": 1},
        {**DEFAULT, "block": 4096, "rows": 1, "form": 2},
        {"block": 4096, "rows": 1, "occupancy": 8, "warps": 4, "form": 3},
        {"block": 4096, "rows": 1, "occupancy": 8, "warps": 4, "form": 4},
    ],
    ids=["form_1", "form_2", "form_3", "form_4"],
)
def test_op_gradient_into_a_column_slice_cutile_rs(cuda, variant):
    """out a column slice of a NaN-poisoned buffer whose rows are whole 16-byte units (4104 bf16)
    while out's 4097 columns are not: the gradient is right and the buffer's 7 columns past it stay
    NaN. Forms 1 and 2 store through partitions, which an H100 stored through TMA up to the 16-byte
    unit's end (kernels/matmul/NOTES.md, "Third GPU run"); forms 3 and 4 through masked pointer tiles."""
    from kernels.cross_entropy_backward.op import cross_entropy_backward

    cfg = {"m": 33, "n": 4097, "dtype": "bfloat16", "dloss": "mean", "smoothing": 0.1}
    inputs = SPEC.make_inputs(cfg)
    expected = SPEC.reference(inputs)
    buffer = torch.full((33, 4104), float("nan"), dtype=torch.bfloat16, device=inputs["logits"].device)
    out = buffer[:, :4097]
    assert cross_entropy_backward(*inputs.values(), out=out, variant=variant) is out
    harness.check_close(out, expected, SPEC.tolerance["bfloat16"], "into a column slice")
    harness.check_padding_untouched(out, "the gradient's store past its columns")


@pytest.mark.parametrize("form", [3, 4])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_op_training_export_split_forms_cutile_rs(cuda, smoothing, form):
    """The training op's export (losses and gradient in one launch) with version 3 (or 4, its lagged
    form) forced: the losses (chunk 0's store; with smoothing the chunks' sums of x combined) and the
    gradient of a mean, against the references, over uneven rows with ignored ones (256 rows of 5
    chunks: version 4's tile blocks both sum and store)."""
    from kernels.cross_entropy_backward import op
    from tilekit.runtime import port

    m = 256
    cfg = {"m": m, "n": 40000, "dtype": "bfloat16", "dloss": "mean", "smoothing": smoothing}
    inputs = SPEC.make_inputs(cfg)
    logits, target, scale = inputs["logits"], inputs["target"], inputs["dloss"]
    losses = torch.empty(m, dtype=torch.float32, device=logits.device)
    grad = torch.empty_like(logits)
    variant = {"block": 4096, "rows": 1, "occupancy": 8, "warps": 4, "form": form}
    args = (losses, logits, target, scale, -100, smoothing)
    port.run(op, variant, (m, 40000), grad, *args, export="cutile_cross_entropy_train", mutated=(losses,))
    harness.check_close(losses, forward.reference(inputs), (1e-5, 2e-5), "losses")
    harness.check_close(grad, SPEC.reference(inputs), SPEC.tolerance["bfloat16"], "gradient")


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
