"""rope's tests beyond the generated suite: rope_qk's views, decode at arbitrary positions against
Hugging Face's formula on the GPU, and BASELINE_CASES, what tests/kit/test_baselines.py checks of
baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import pytest
import torch

from kernels.rope import op
from kernels.rope.spec import SPEC, tables
from tilekit.runtime.baseline_cases import BaselineCases
from tilekit.testing import harness


@pytest.mark.parametrize("heads_first", [False, True])
def test_op_rope_qk_views_cutile_rs(cuda, heads_first):
    """rope_qk returns q's and k's parts of the one output, in their layout, as views of it."""
    cfg = {"b": 2, "s": 5, "hq": 6, "hk": 2, "d": 64, "dtype": "bfloat16", "heads_first": heads_first}
    inputs = SPEC.make_inputs(cfg)
    q_rot, k_rot = op.rope_qk(*inputs.values())
    assert q_rot.shape == inputs["q"].shape and k_rot.shape == inputs["k"].shape
    assert q_rot.untyped_storage().data_ptr() == k_rot.untyped_storage().data_ptr()
    head = 1 if heads_first else 2
    harness.check_close(torch.cat((q_rot, k_rot), head), SPEC.reference(inputs), SPEC.tolerance["bfloat16"], "rope_qk")


def test_op_decode_positions_match_hugging_face_cutile_rs(cuda):
    """A decode step (one token per sequence, each at its own position in a 32 K table) equals
    Hugging Face's apply_rotary_pos_emb on the table rows gathered by those positions."""
    b, hq, hk, d = 8, 32, 8, 128
    cos, sin = tables(32768, d, "cuda", torch.float32)
    positions = torch.tensor([[0], [1], [4095], [4096], [20000], [32767], [7], [12345]], device="cuda")
    q, k = (torch.randn(b, h, 1, d, device="cuda", dtype=torch.bfloat16) for h in (hq, hk))
    q_rot, k_rot = op.rope_qk(q, k, cos, sin, positions, heads_first=True)
    c, s = cos[positions][:, None].double(), sin[positions][:, None].double()  # (b, 1, 1, d)

    def hf(x):
        x = x.double()
        return x * c + torch.cat((-x[..., d // 2 :], x[..., : d // 2]), -1) * s

    for got, x in ((q_rot, q), (k_rot, k)):
        harness.check_close(got, hf(x), SPEC.tolerance["bfloat16"], "decode at positions")


def test_reference_is_hugging_faces_formula_on_full_tables():
    inputs = SPEC.make_inputs({"b": 2, "s": 7, "hq": 3, "hk": 1, "d": 8, "dtype": "float32"}, device="cpu", seed=0)
    q = inputs["q"].double()
    c, s = (t.double()[None, :, None, :] for t in (inputs["cos"], inputs["sin"]))
    expected = q * c + torch.cat((-q[..., 4:], q[..., :4]), -1) * s
    torch.testing.assert_close(SPEC.reference(inputs)[:, :, :3], expected, rtol=1e-12, atol=1e-12)


BASELINE_CASES = BaselineCases(
    SPEC,
    # odd heads and d/2, positions with vLLM's half table, the transposed layout with per-sequence tables
    interpreted=[
        ({"dtype": "float32", "b": 2, "s": 3, "hq": 5, "hk": 1, "d": 80}, "auto", {}),
        ({"dtype": "float16", "b": 3, "s": 2, "hq": 4, "hk": 2, "d": 16, "positions": 1, "half_table": 1}, "auto", {}),
        (
            {"dtype": "bfloat16", "b": 2, "s": 4, "hq": 4, "hk": 4, "d": 32, "heads_first": 1, "per_batch": 1},
            "auto",
            {},
        ),
    ],
    # heads first: the libraries' own layout, whose outputs the entries return as they are
    torch_case=(
        {"b": 2, "s": 9, "hq": 4, "hk": 2, "d": 16, "positions": 1, "heads_first": 1, "dtype": "float32"},
        1e-5,
    ),
    bad_inputs=[
        (
            (torch.randn(2, 3, 4), torch.randn(2, 3, 2, 8), *tables(3, 8, "cpu", torch.float32), None, False),
            ValueError,
            "q must be a 4-D",
        ),
        (
            (torch.randn(2, 3, 4, 8), torch.randn(2, 4, 2, 8), *tables(3, 8, "cpu", torch.float32), None, False),
            ValueError,
            "must share q's b, s, d",
        ),
        (
            (torch.randn(2, 3, 4, 8), torch.randn(2, 3, 2, 8), torch.randn(3, 6), torch.randn(3, 6), None, False),
            ValueError,
            "cos and sin must be",
        ),
    ],  # fmt: skip
    plans=[
        ("config", (32, 8, 128), {"hq": 32, "hk": 8, "half": 64}),
        ("config", (28, 4, 80), {"hq": 32, "hk": 4, "half": 64}),
    ],
    plan_errors=[],
    triton_compile=[
        ("_triton_kernel", "bf16", {"HQ": 32, "HK": 8, "HALF": 64, "POS": True}, {"num_warps": 4}),
        ("_triton_kernel", "fp32", {"HQ": 8, "HK": 1, "HALF": 32, "POS": False}),
    ],
    triton_types={"sign": "fp32"},
    cutile_kernels=[
        ("_cutile_kernel", "bfloat16", ["A4", "A4", "A3", "A3", "A2:int64", "A4", 1.0, True, 32, 8, 64], True),
        ("_cutile_kernel", "float32", ["A4", "A4", "A3", "A3", "A2:int32", "A4", -1.0, False, 8, 1, 32], False),
    ],
)
