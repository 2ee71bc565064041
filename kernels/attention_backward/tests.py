"""attention_backward's tests beyond the generated suite: the reference against autograd of attention's
float64 reference, the query-tile ranges against every (query, key) pair, the sink gradient, the
training op end to end on the GPU, and BASELINE_CASES, what tests/kit/test_baselines.py checks of
baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import math

import pytest
import torch

from kernels.attention import spec as forward
from kernels.attention_backward import op
from kernels.attention_backward.spec import SPEC, saved
from tilekit.runtime.baseline_cases import BaselineCases
from tilekit.testing import harness

CASES = [
    dict(b=1, h=4, hkv=2, sq=7, skv=7, d=64, causal=1),
    dict(b=2, h=4, hkv=1, sq=5, skv=9, d=64, causal=1, window=3),
    dict(b=1, h=2, hkv=2, sq=9, skv=4, d=64, causal=1, sinks=1),  # queries that see no key: the sink alone
    dict(b=1, h=4, hkv=2, sq=6, skv=5, d=64, causal=0, sinks=1, bshd=1),
]


def _autograd(cfg):
    """(inputs of the backward, float64 autograd gradients of attention's reference w.r.t. q, k, v,
    sinks) for one CPU config."""
    fwd = forward.make_inputs(dict(cfg, dtype="float16"), device="cpu", seed=3)
    q, k, v, sinks, causal, scale, window = fwd.values()
    o, lse = saved(q, k, v, sinks, causal, scale, window)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    s = sinks.double().requires_grad_() if sinks is not None else None
    y = forward.reference({"q": leaves[0], "k": leaves[1], "v": leaves[2], "sinks": s, "causal": causal,
                           "scale": scale, "window": window})  # fmt: skip
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    y.backward(dout)
    inputs = {"dout": dout, "q": q, "k": k, "v": v, "o": y.detach(), "lse": lse, "causal": causal,
              "scale": scale, "window": window}  # fmt: skip
    return inputs, [t.grad for t in leaves], (s.grad if s is not None else None), sinks


@pytest.mark.parametrize("cfg", CASES, ids=[str(i) for i in range(len(CASES))])
def test_reference_is_autograd_of_attention(cfg):
    """The FlashAttention-2 formula on the exact o (and lse in f32) gives autograd's dq, dk, dv."""
    inputs, grads, _, _ = _autograd(cfg)
    d = cfg["d"]
    expected = torch.cat([g.reshape(-1, d) for g in grads])
    torch.testing.assert_close(SPEC.reference(inputs), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cfg", [c for c in CASES if c.get("sinks")], ids=["no-key", "full"])
def test_sink_gradient_is_autograd_of_attention(cfg):
    inputs, _, dsinks, sinks = _autograd(cfg)
    ds = op.sink_gradient(sinks.double(), inputs["dout"], inputs["o"], inputs["lse"].double())
    torch.testing.assert_close(ds, dsinks, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bm,bn", [(64, 128), (128, 64), (32, 128), (64, 64)])
@pytest.mark.parametrize(
    "sq,skv,causal,window", [(300, 300, 1, -1), (100, 333, 1, 40), (333, 100, 1, 1), (77, 200, 0, -1)]
)
def test_query_tiles_cover_exactly_the_visible_pairs(bm, bn, sq, skv, causal, window):
    """Every query that sees a key of the key tile lies in the walked range [lo, hi), whose first and
    last tiles see some of its keys; the unmasked tiles [full_lo, full_hi) see all of them (padding
    past s_q and s_kv aside)."""
    diag = skv - sq if causal else skv
    i = torch.arange(sq)[:, None]
    j = torch.arange(skv)[None, :]
    visible = j <= i + diag
    if window > 0:
        visible &= j > i + diag - window
    for nt in range(-(-skv // bn)):
        lo, full_lo, full_hi, hi = op.query_tiles(nt, bm, bn, sq, diag, window)
        assert lo <= full_lo <= full_hi <= hi <= -(-sq // bm)
        keys = slice(nt * bn, (nt + 1) * bn)
        rows = visible[:, keys].any(1)
        covered = torch.zeros(sq, dtype=torch.bool)
        covered[lo * bm : hi * bm] = True
        assert not (rows & ~covered).any(), (nt, lo, hi)
        for mt in range(full_lo, full_hi):
            assert visible[mt * bm : (mt + 1) * bm, keys].all(), (nt, mt)
        if lo < hi:  # tight: the first and the last tile walked see some key of the tile
            assert rows[lo * bm : (lo + 1) * bm].any() and rows[(hi - 1) * bm : hi * bm].any(), (nt, lo, hi)


def test_rows_of_the_output_split_into_the_three_gradients():
    q, k = torch.empty(2, 4, 5, 64), torch.empty(2, 2, 7, 64)
    g = torch.arange(SPEC.out_shape(dict(b=2, h=4, hkv=2, sq=5, skv=7, d=64))[0])[:, None].expand(-1, 64)
    dq, dk, dv = op.split(g.contiguous(), q, k)
    assert dq[1, 3, 4, 0] == 2 * 4 * 5 - 1 and dk[0, 0, 0, 0] == 40 and dv[0, 0, 0, 0] == 40 + 28


def test_op_training_step_matches_autograd_of_the_float64_reference_cutile_rs(cuda):
    """attention with inputs that require grad runs torch.ops.tilekit.attention_train (the forward
    that keeps lse), and backward() gives q, k, v and sinks their gradients within the tolerance;
    the op itself (torch.ops.tilekit.attention, lse remade by a forward) gives the same."""
    from kernels.attention.op import attention

    cfg = dict(b=2, h=8, hkv=2, sq=300, skv=300, d=128, causal=1, window=100, sinks=1, dtype="bfloat16")
    inputs = forward.make_inputs(cfg)
    q, k, v, sinks, causal, scale, window = inputs.values()
    leaves = [t.detach().requires_grad_() for t in (q, k, v, sinks)]
    dout = torch.randn(q.shape, device=q.device, dtype=q.dtype)
    attention(*leaves, causal=True, window=window).backward(dout)
    ref_leaves = [t.detach().double().requires_grad_() for t in (q, k, v, sinks)]
    ref = forward.reference(
        dict(zip(("q", "k", "v", "sinks"), ref_leaves)) | {"causal": 1, "scale": scale, "window": window}
    )
    ref.backward(dout.double())
    tol = SPEC.tolerance["bfloat16"]
    for name, leaf, r in zip("q k v sinks".split(), leaves, ref_leaves):
        harness.check_close(leaf.grad, r.grad, tol, f"attention training d{name}")
    again = [t.detach().requires_grad_() for t in (q, k, v, sinks)]
    torch.ops.tilekit.attention(*again, True, None, window).backward(dout)
    for name, a, leaf in zip("q k v sinks".split(), again, leaves):
        torch.testing.assert_close(a.grad, leaf.grad, rtol=0, atol=0, msg=f"op's d{name}")


def test_op_lse_is_the_rows_log_sum_exp_cutile_rs(cuda):
    """attention_lse's lse against the float64 one (saved): base 2, sinks in, +inf where a row sees nothing."""
    from kernels.attention.op import attention_lse

    cfg = dict(b=1, h=4, hkv=2, sq=200, skv=77, d=64, causal=1, dtype="float16")
    q, k, v, sinks, causal, scale, window = forward.make_inputs(cfg).values()
    _, lse = attention_lse(q, k, v, sinks, causal=True)
    _, expected = saved(q, k, v, sinks, causal, scale, window)
    assert bool(torch.isinf(lse[:, :, : 200 - 77]).all()) and math.isfinite(lse[:, :, 200 - 77 :].max().item())
    torch.testing.assert_close(lse, expected, rtol=1e-5, atol=1e-5)


def _f16(*shape):
    return torch.randn(*shape).half()


BASELINE_CASES = BaselineCases(
    SPEC,
    # Ragged causal GQA (diagonal and tail tiles of both kernels), s_q != s_kv both ways (queries that
    # see no key), MQA with one query, a (b, s, h, d) view, a window across tile edges, both head dims.
    interpreted=[
        (dict(b=1, h=2, hkv=1, sq=17, skv=17, d=64, causal=1, dtype="float16"), "auto", {}),
        (dict(b=1, h=2, hkv=2, sq=100, skv=130, d=64, causal=1, bshd=1, dtype="bfloat16"), "64x64", {}),
        (dict(b=1, h=2, hkv=1, sq=130, skv=70, d=64, causal=1, dtype="float16"), "64x64", {}),
        (dict(b=1, h=2, hkv=1, sq=1, skv=70, d=128, causal=0, dtype="bfloat16"), "auto", {}),
        (dict(b=1, h=2, hkv=1, sq=130, skv=150, d=64, causal=1, window=40, sinks=1, dtype="float16"), "64x64", {}),
    ],
    torch_case=({"b": 1, "h": 4, "hkv": 2, "sq": 33, "skv": 33, "d": 64, "causal": 1, "dtype": "bfloat16"}, 3e-2),
    bad_inputs=[
        (
            (
                _f16(1, 2, 8, 64),
                _f16(1, 2, 8, 64),
                _f16(1, 2, 8, 64),
                _f16(1, 2, 8, 64),
                _f16(1, 2, 9, 64),
                torch.zeros(1, 2, 8),
            ),
            ValueError,
            "dout and o must be q's",
        ),  # fmt: skip
        ((*(_f16(1, 2, 8, 64),) * 5, torch.zeros(1, 2, 8).half()), ValueError, "lse must be f32"),
        ((*(_f16(1, 2, 8, 96),) * 5, torch.zeros(1, 2, 8)), ValueError, "d be 64 or 128"),
    ],
    plans=[
        ("tile_plan", (), {"variant": "128x64", "block": 128, "step": 64, "num_warps": 8}),
        ("tile_plan", ("64x64",), {"variant": "64x64", "block": 64, "step": 64, "num_warps": 4}),
    ],
    plan_errors=[("tile_plan", ("fastest",), {}, "variant must be one of")],
    triton_compile=[
        (kernel, dt, dict(BM=bm, BN=bn, D=d, HAS_WINDOW=window), dict(num_warps=w))
        for dt, block, step, d, w, window in (("bf16", 128, 64, 128, 8, False), ("fp16", 64, 64, 64, 4, True))
        for kernel, bm, bn in (("_triton_dq_kernel", block, step), ("_triton_dkdv_kernel", step, block))
    ],
    triton_types={"c": "fp32", "scale": "fp32"},
    triton_ptx_has="mma",
    cutile_kernels=[
        ("_cutile_dq_kernel", dt, ["A4"] * 5 + ["A3:float32"] * 2 + ["A4", 0, 0.18, 0.125, 4, bm, bn, d], cubin)
        for dt, bm, bn, d, cubin in (("bfloat16", 128, 64, 128, True), ("float16", 64, 64, 64, False))
    ]
    + [
        (
            "_cutile_dkdv_kernel",
            dt,
            ["A4"] * 4 + ["A3:float32"] * 2 + ["A4"] * 2 + [0, 0.18, 0.125, 4, bm, bn, d],
            cubin,
        )
        for dt, bm, bn, d, cubin in (("bfloat16", 64, 128, 128, True), ("float16", 64, 64, 64, False))
    ],
)


def test_reference_part_is_the_whole_references_rows(monkeypatch):
    """Where a config is `big`, the check compares the rows of two (batch, key/value head) groups:
    exactly those rows of the whole reference."""
    from kernels.attention_backward import spec

    cfg = dict(b=2, h=4, hkv=2, sq=9, skv=11, d=64, causal=1, dtype="float16")
    inputs = spec.make_inputs(cfg, device="cpu", seed=0)
    assert spec.reference_part(inputs) is None
    monkeypatch.setattr(spec, "BIG", 0)
    rows, part = spec.reference_part(inputs)
    assert len(rows) == 2 * (2 * 9 + 2 * 11)
    torch.testing.assert_close(part, spec.reference(inputs)[rows], rtol=0, atol=0)
