"""fused_linear_cross_entropy's tests beyond the generated suite: the reference against autograd of
PyTorch's loss, the training op's Python (on the CPU with the exports done by torch), the training op
and small chunks on a GPU, and BASELINE_CASES, what tests/kit/test_baselines.py checks of
baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import pytest
import torch
import torch.nn.functional as F

from kernels.fused_linear_cross_entropy.op import DEFAULT_VARIANT as DEFAULT
from kernels.fused_linear_cross_entropy.spec import SPEC
from tilekit.runtime.baseline_cases import BaselineCases
from tilekit.testing import harness


def torch_loss(h, w, target, ignore_index, label_smoothing, reduction):
    return F.cross_entropy(
        h @ w.t(), target, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction
    )


@pytest.mark.parametrize("extra", [{}, {"smoothing": 0.2, "ignore": 0}, {"reduction": "sum", "target": "int32"}])
def test_reference_is_autograd_of_torchs_loss(extra):
    cfg = {"m": 30, "vocab": 17, "hidden": 5, "dtype": "float32", **extra}
    inputs = SPEC.make_inputs(cfg, "cpu", 2)
    h, w = (inputs[k].double().requires_grad_() for k in ("h", "weight"))
    torch_loss(h, w, inputs["target"].long(), inputs["ignore_index"], inputs["label_smoothing"], cfg.get("reduction", "mean")).backward()  # fmt: skip
    torch.testing.assert_close(SPEC.reference(inputs), torch.cat([h.grad, w.grad]), rtol=1e-7, atol=1e-12)  # scale: f32


def test_a_mean_s_scale_is_one_over_the_rows_counted():
    inputs = SPEC.make_inputs({"m": 30, "vocab": 17, "hidden": 5, "dtype": "float16"}, "cpu", 2)
    counted = int((inputs["target"] != -100).sum())
    assert inputs["scale"].tolist() == [pytest.approx(1 / counted)] and counted <= 30 - 4


def exports_in_torch(monkeypatch) -> list:
    """The exports done by torch on the CPU (float64 math, each output written as the export would),
    the device check off: the Python around them (the ops, autograd, the reductions and scales) runs as
    on a GPU. Records each export called."""
    from tilekit.runtime import checks, port

    called = []

    def run(op, variant, sizes, out, *args, key=None, export=None, mutated=()):
        called.append(export or "cutile_fused_linear_cross_entropy")
        if export == "cutile_fused_linear_cross_entropy_train":
            dw, losses, h, w, target, scale, ii, eps = args
        else:
            (h, w, target, scale, ii, eps), dw, losses = args, None, None
        inputs = {"h": h, "weight": w, "target": target, "scale": scale, "ignore_index": ii, "label_smoothing": eps}
        grads = SPEC.reference(inputs)
        if dw is None:
            out.copy_(grads)
            return
        m = h.shape[0]
        out.copy_(grads[:m]), dw.copy_(grads[m:])
        losses.copy_(torch_loss(h.double(), w.double(), target.long(), ii, eps, "none"))

    monkeypatch.setattr(port, "run", run)
    monkeypatch.setattr(checks, "cuda", lambda kernel, **tensors: None)
    return called


@pytest.mark.parametrize("reduction, dloss", [("mean", 1.0), ("sum", 0.5), ("mean", 3.0)])
def test_the_training_op_is_autograd_of_torchs_loss(monkeypatch, reduction, dloss):
    """On the CPU with the exports done by torch: fused_linear_cross_entropy_loss runs the training
    export once (none at backward) and gives PyTorch's loss and gradients for each reduction and loss
    gradient, (b, s, H) hidden states included; the kit's entry returns [dh; dW]."""
    from kernels.fused_linear_cross_entropy.op import fused_linear_cross_entropy, fused_linear_cross_entropy_loss

    called = exports_in_torch(monkeypatch)
    cfg = {"m": 40, "vocab": 33, "hidden": 6, "dtype": "float16", "smoothing": 0.1}
    inputs = SPEC.make_inputs(cfg, "cpu", 4)
    h, w, target = inputs["h"].reshape(4, 10, 6), inputs["weight"], inputs["target"]
    kw = {"ignore_index": -100, "label_smoothing": 0.1, "reduction": reduction}
    ref_h, ref_w = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref = torch_loss(ref_h.reshape(40, 6), ref_w, target, **kw)
    ref.backward(torch.tensor(dloss, dtype=torch.float64))
    x, y = h.detach().requires_grad_(), w.detach().requires_grad_()
    loss = fused_linear_cross_entropy_loss(x, y, target.reshape(4, 10), **kw)
    loss.backward(torch.tensor(dloss))
    assert called == ["cutile_fused_linear_cross_entropy_train"]
    # f16 inputs and outputs (the kernel's dtypes): the float64 results rounded once
    torch.testing.assert_close(loss.double(), ref.detach(), rtol=1e-3, atol=1e-6)
    torch.testing.assert_close(x.grad.double(), ref_h.grad, rtol=2e-3, atol=1e-6)
    torch.testing.assert_close(y.grad.double(), ref_w.grad, rtol=2e-3, atol=1e-6)
    grads = fused_linear_cross_entropy(*inputs.values())
    torch.testing.assert_close(grads, SPEC.reference(inputs).half())


def test_the_training_op_refuses_a_per_row_loss_and_checks_fake_tensors():
    """reduction "none" is refused (the fused form has one loss gradient); the fake implementation
    (torch.compile's tracing, no GPU needed) gives the outputs' shapes and refuses a bad weight."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernels.fused_linear_cross_entropy.op import fused_linear_cross_entropy_loss

    h, w, t = torch.randn(4, 8, dtype=torch.float16), torch.randn(16, 8, dtype=torch.float16), torch.zeros(4).long()
    with pytest.raises(ValueError, match="reduction must be one of"):
        fused_linear_cross_entropy_loss(h, w, t, reduction="none")
    with FakeTensorMode():
        fh, fw = (torch.empty(s, dtype=torch.float16, device="cuda") for s in ((4, 8), (16, 8)))
        ft = torch.zeros(4, dtype=torch.long, device="cuda")
        loss, dh, dw = torch.ops.tilekit.fused_linear_cross_entropy_train(fh, fw, ft, -100, 0.0, "mean")
        assert (loss.shape, dh.shape, dw.shape) == ((), (4, 8), (16, 8))
        with pytest.raises(ValueError, match=r"\(V, H\) with H = 8"):
            torch.ops.tilekit.fused_linear_cross_entropy_train(fh, fw[:, :4], ft, -100, 0.0, "mean")


@pytest.mark.parametrize("reduction, dloss", [("mean", 1.0), ("sum", 0.5), ("mean", 3.0)])
def test_op_training_loss_matches_autograd_of_torchs_loss_cutile_rs(cuda, reduction, dloss):
    """fused_linear_cross_entropy_loss (torch.ops.tilekit.fused_linear_cross_entropy_train, the gradients
    written while the loss is computed): the loss and both gradients against PyTorch's in float64, for
    a loss gradient of 1 (the gradients as written) and others, over three chunks (the last shorter),
    an ignored row and smoothing; under torch.compile (fullgraph) too."""
    cfg = {"m": 2300, "vocab": 20000, "hidden": 128, "dtype": "bfloat16", "smoothing": 0.1}
    inputs = SPEC.make_inputs(cfg)
    h, w, target = inputs["h"], inputs["weight"], inputs["target"]
    kw = {"ignore_index": -100, "label_smoothing": 0.1, "reduction": reduction}
    ref_h, ref_w = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref = torch_loss(ref_h, ref_w, target, **kw)
    ref.backward(torch.tensor(dloss, dtype=torch.float64, device=h.device))
    from kernels.fused_linear_cross_entropy.op import fused_linear_cross_entropy_loss

    for fn in (fused_linear_cross_entropy_loss, torch.compile(fused_linear_cross_entropy_loss, fullgraph=True)):
        x, y = h.detach().requires_grad_(), w.detach().requires_grad_()
        loss = fn(x, y, target, **kw)
        assert loss.dtype == h.dtype and loss.shape == ()
        harness.check_close(loss.float(), ref.detach(), (1e-2, 1e-2), f"{reduction} loss")  # rounded to bf16
        loss.backward(torch.tensor(dloss, dtype=loss.dtype, device=h.device))
        harness.check_close(x.grad, ref_h.grad, SPEC.tolerance["bfloat16"], f"{reduction} dh")
        harness.check_close(y.grad, ref_w.grad, SPEC.tolerance["bfloat16"], f"{reduction} dW")


@pytest.mark.parametrize("chunk", [7, 100, 4096])
def test_op_any_chunk_gives_the_same_gradients_cutile_rs(cuda, chunk):
    """Chunks of 7 rows (dW summed over 43 chunks in bf16; the dh product split over K), 100 (the
    last of 3 shorter) and one chunk for every row, against the float64 reference."""
    from kernels.fused_linear_cross_entropy.op import fused_linear_cross_entropy

    cfg = {"m": 300, "vocab": 5003, "hidden": 96, "dtype": "bfloat16", "smoothing": 0.05}
    inputs = SPEC.make_inputs(cfg)
    y = fused_linear_cross_entropy(*inputs.values(), variant={**DEFAULT, "chunk": chunk})
    harness.check(SPEC, f"cutile_rs chunk={chunk}", cfg, inputs, y)  # dh and dW each (SPEC.out_blocks)


BASELINE_CASES = BaselineCases(
    SPEC,
    interpreted=[
        ({"dtype": "float16", "m": 9, "vocab": 100, "hidden": 16}, "auto", {}),
        ({"dtype": "float16", "m": 5, "vocab": 1000, "hidden": 8, "smoothing": 0.1, "reduction": "sum"}, "auto", {}),
    ],
    torch_case=({"m": 9, "vocab": 1000, "hidden": 16, "h_stride": 20, "dtype": "float16", "smoothing": 0.1}, 2e-3),
    bad_inputs=[
        (
            (torch.randn(2, 4).half(), torch.randn(5, 4).half(), torch.zeros(2).long(), torch.ones(2)),
            ValueError,
            "scale must be",
        ),
        (
            (torch.randn(2, 4).half(), torch.randn(5, 3).half(), torch.zeros(2).long(), torch.ones(1)),
            ValueError,
            "weight must be",
        ),
        ((torch.randn(2, 4), torch.randn(5, 4), torch.zeros(2).long(), torch.ones(1)), ValueError, "f16/bf16"),
    ],
    plans=[],
    plan_errors=[],
    triton_compile=[],
    cutile_kernels=[],
)
