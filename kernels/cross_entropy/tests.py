"""cross_entropy's tests beyond the generated suite: the reference against PyTorch's loss, the
reductions of cross_entropy_loss, and BASELINE_CASES, what tests/kit/test_baselines.py checks of
baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import pytest
import torch
import torch.nn.functional as F

from kernels.cross_entropy import op
from kernels.cross_entropy.spec import SPEC
from tilekit.runtime.baseline_cases import BaselineCases


@pytest.mark.parametrize("ignore, eps", [(-100, 0.0), (0, 0.1), (5, 0.3)])
def test_reference_is_torchs_loss_per_row(ignore, eps):
    inputs = SPEC.make_inputs({"m": 40, "n": 33, "dtype": "float32", "ignore": ignore, "smoothing": eps}, "cpu", 1)
    x, t = inputs["logits"].double(), inputs["target"]
    assert (t[3::7] == ignore).all() and (t == ignore).sum() >= 6  # rows 3, 10, ..., 38 (and any drawn as `ignore`)
    expected = F.cross_entropy(x, t, ignore_index=ignore, label_smoothing=eps, reduction="none")
    torch.testing.assert_close(SPEC.reference(inputs), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", op.REDUCTIONS)
def test_reduce_is_torchs_reduction(reduction):
    g = torch.Generator().manual_seed(3)
    x, t = torch.randn(20, 7, generator=g), torch.randint(0, 7, (20,), generator=g)
    t[::4] = -100
    losses = F.cross_entropy(x, t, reduction="none").float()
    expected = F.cross_entropy(x, t, reduction=reduction)
    torch.testing.assert_close(op.reduce(losses, t, -100, reduction, x.dtype), expected)


def test_mean_of_nothing_is_nan_as_torchs():
    t = torch.full((3,), -100)
    assert op.reduce(torch.zeros(3), t, -100, "mean", torch.float32).isnan()
    assert F.cross_entropy(torch.zeros(3, 4), t).isnan()


def test_cross_entropy_loss_refuses_an_unknown_reduction():
    with pytest.raises(ValueError, match="reduction must be one of"):
        op.cross_entropy_loss(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), reduction="avg")


def test_version_2_is_a_question_of_the_tune_class_and_the_row_stride():
    """A pick is shared by every m of a tune class: version 2's candidates only where all of the class
    reaches (8000 x 262144 is in 8192's class, past i32), and logits whose row stride puts it out of
    reach (a view of wider rows) a class of their own, not sharing version 2 picks with contiguous ones."""
    forms = {v["form"] for v in op.variants(8000, 262144)}
    assert forms == {1} and 2 in {v["form"] for v in op.variants(4000, 262144)}
    wide = torch.empty_strided((4096, 128256), (600000, 1), device="meta")
    contiguous = torch.empty((4096, 128256), device="meta")
    assert op.launch_key(wide) == {**op.launch_key(contiguous), "form_2": False}
    assert "form_2" not in op.launch_key(torch.empty((32768, 128256), device="meta"))  # no class reaches


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_op_losses_are_float32_exact_cutile_rs(cuda, dtype):
    """The port's losses are float32 sums over the row whatever the logits' dtype: within 1e-5 of the
    float64 reference of the logits as given (SPEC.tolerance admits the libraries' rounded ones)."""
    from tilekit.testing import harness

    cfg = {"m": 64, "n": 128256, "dtype": dtype, "smoothing": 0.1}
    inputs = SPEC.make_inputs(cfg)
    harness.check_close(op.cross_entropy(*inputs.values()), SPEC.reference(inputs), (1e-5, 2e-5), f"{cfg}")


@pytest.mark.parametrize(
    "cfg", [{"ignore": -100}, {"ignore": 5, "smoothing": 0.1, "target": "int32"}], ids=["plain", "smooth"]
)
@pytest.mark.parametrize("form", [3, 4])
def test_op_version_3_losses_cutile_rs(cuda, cfg, form):
    """Version 3 (form 3, the row split into exchanging chunks) and version 4 (form 4, its lagged
    form), which the loss's autotune does not offer, forced: their losses (chunk 0's store, the
    chunks' sums of x combined for smoothing) within 1e-5 of the reference, over an uneven row
    (40000 columns: five 8192-column chunks, the last with a ragged tile) with ignored rows; 256
    rows, 1280 tickets, so that version 4's tile blocks both sum and store past its lag."""
    from tilekit.testing import harness

    inputs = SPEC.make_inputs({"m": 256, "n": 40000, "dtype": "bfloat16", **cfg})
    for block in (4096, 2048):
        variant = {"block": block, "rows": 1, "occupancy": 8, "warps": 4, "form": form}
        harness.check_close(
            op.cross_entropy(*inputs.values(), variant=variant), SPEC.reference(inputs), (1e-5, 2e-5), f"{block}"
        )


BASELINE_CASES = BaselineCases(
    SPEC,
    # one column tile and several (a ragged last one), padded rows, ignored rows, smoothing
    interpreted=[
        ({"dtype": "float32", "m": 9, "n": 100}, "auto", {}),
        ({"dtype": "float16", "m": 8, "n": 1000, "row_stride": 1040, "smoothing": 0.1}, "auto", {}),
        ({"dtype": "bfloat16", "m": 4, "n": 9000, "target": "int32", "ignore": 0}, "auto", {}),
    ],
    torch_case=({"m": 9, "n": 1000, "row_stride": 1040, "dtype": "float32", "smoothing": 0.1}, 1e-6),
    bad_inputs=[
        ((torch.randn(2, 4), torch.zeros(3, dtype=torch.long)), ValueError, "a class id per row"),
        ((torch.randn(2, 3, 4), torch.zeros(2, dtype=torch.long)), ValueError, "must be 2-D"),
        ((torch.randn(2, 4), torch.zeros(2)), ValueError, "int32 or int64"),
    ],
    plans=[
        ("config", (4096, 128256), {"block": 4096, "rows": 1, "grid": 4096}),
        ("config", (3, 100), {"block": 128, "rows": 4, "grid": 1}),
    ],
    plan_errors=[("config", (10, 100, "row"), {}, "variant must be one of")],
    triton_types={"keep": "fp32", "spread": "fp32"},
    triton_compile=[
        ("_triton_kernel", "bf16", {"ROWS": 1, "BLOCK": 4096, "GRAD": False}, {"num_warps": 8}),
        ("_triton_kernel", "fp32", {"ROWS": 4, "BLOCK": 128, "GRAD": True}),
    ],
    cutile_kernels=[
        (
            "_cutile_kernel",
            "bfloat16",
            ["A2", "A1:int64", "A1:float32", "A2", "A1:float32", -100, 0.0, 1, 4096, False],
            True,
        ),
        (
            "_cutile_kernel",
            "float32",
            ["A2", "A1:int32", "A1:float32", "A2", "A1:float32", -100, 0.1, 4, 128, True],
            False,
        ),
    ],
)
