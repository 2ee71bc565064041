"""attention's tests beyond the generated suite (tilekit.suite adds the test_* to
tests/kernels/test_attention.py), and BASELINE_CASES, what tests/kit/test_baselines.py checks of
baselines.py on the CPU (tilekit.baseline_cases)."""

import torch

from kernels.attention.spec import SPEC
from tilekit import harness
from tilekit.baseline_cases import TOL, BaselineCases, Has


def _run(cfg: dict, variant="auto") -> tuple[dict, torch.Tensor]:
    inputs = SPEC.make_inputs(cfg)
    out = SPEC.make_out(cfg, inputs)
    SPEC.run_port(inputs, out=out, variant=variant)
    harness.check(SPEC, "cutile_rs", dict(cfg, variant=variant), inputs, out)
    return inputs, out


def test_op_queries_that_see_no_key_get_zero_cutile_rs(cuda):
    """Causal with sq > skv: the first sq - skv queries see no key (0); the tiles of the first 128
    queries see none at all, so their key loop is empty."""
    cfg = {"b": 1, "h": 2, "hkv": 1, "sq": 300, "skv": 129, "d": 64, "causal": 1, "dtype": "bfloat16"}
    _, out = _run(cfg, variant={"bm": 64, "bn": 64, "occupancy": -1, "warps": -1})
    assert bool((out[:, :, : 300 - 129] == 0).all())


def test_op_default_variant_and_scale_cutile_rs(cuda):
    """`variant="default"` (every knob -1: ffi.rs's defaults) is a valid launch, and `scale` is used."""
    cfg = {"b": 2, "h": 4, "hkv": 2, "sq": 200, "skv": 200, "d": 128, "causal": 1, "dtype": "float16"}
    _run(cfg, variant="default")
    inputs = dict(SPEC.make_inputs(cfg), scale=0.3)
    out = SPEC.entry(*inputs.values())
    harness.check(SPEC, "cutile_rs", dict(cfg, scale=0.3), inputs, out)


BASELINE_CASES = BaselineCases(
    SPEC,
    # Ragged tiny causal GQA (diagonal and tail tiles), sq != skv both ways (a prefix of keys seen in
    # full; queries that see no key), one query of MQA, a (b, s, h, d) view, d = 64 and 128.
    interpreted=[
        (dict(b=1, h=2, hkv=1, sq=17, skv=17, d=64, causal=1, dtype="float16"), v, {}) for v in ("auto", "64x64")
    ]
    + [
        (dict(b=1, h=2, hkv=2, sq=100, skv=130, d=64, causal=1, bshd=1, dtype="bfloat16"), "128x64", {}),
        (dict(b=1, h=1, hkv=1, sq=130, skv=70, d=64, causal=1, dtype="float16"), "64x64", {}),
        (dict(b=1, h=2, hkv=1, sq=1, skv=70, d=128, causal=0, dtype="bfloat16"), "auto", {}),
        (dict(b=2, h=2, hkv=1, sq=65, skv=65, d=128, causal=0, dtype="float16"), "128x128", {}),
    ],
    torch_case=(
        {"b": 1, "h": 4, "hkv": 2, "sq": 33, "skv": 40, "d": 64, "causal": 1, "dtype": "bfloat16"},
        TOL["bfloat16"],
    ),
    bad_inputs=[
        ((torch.randn(2, 8, 64).half(),) * 3, ValueError, r"q must be \(b, h, sq, d\)"),
        ((torch.randn(1, 2, 8, 64),) * 3, TypeError, "share one dtype"),
        ((torch.randn(1, 3, 8, 64).half(), *(torch.randn(1, 2, 8, 64).half(),) * 2), ValueError, "hkv must divide h"),
        ((torch.randn(1, 2, 8, 96).half(),) * 3, ValueError, "d be 64 or 128"),
        ((torch.randn(1, 2, 8, 128).half()[..., ::2],) * 3, ValueError, "contiguous in their last dim"),
    ],
    plans=[
        ("tile_plan", (4096, 128), {"variant": "128x64", "bm": 128, "bn": 64, "num_warps": 8, "num_stages": 3}),
        ("tile_plan", (1024, 64), Has(variant="128x64", num_warps=4)),
        ("tile_plan", (1, 128), Has(variant="64x64", bm=64, bn=64)),
        ("tile_plan", (4096, 128, "128x128"), Has(bm=128, bn=128)),
    ]
    # the perf shapes' auto plans, pinned
    + [("tile_plan", (c["sq"], c["d"]), Has(variant="128x64")) for c in SPEC.perf_configs],
    plan_errors=[("tile_plan", (10, 64, "fastest"), {}, "variant must be one of")],
    triton_compile=[
        ("_triton_attention_kernel", dt, dict(LOWEST=-3.4e38, BM=bm, BN=bn, D=d), dict(num_warps=w, num_stages=3))
        for dt, bm, bn, d, w in (("bf16", 128, 64, 128, 8), ("fp16", 128, 64, 64, 4), ("bf16", 64, 128, 128, 4))
    ],
    triton_types={"qk_scale_log2": "fp32"},
    triton_ptx_has="mma",
    cutile_kernels=[
        ("_cutile_attention_kernel", dt, ["A4", "A4", "A4", "A4", 0, 0.18, 4, bm, 64, d], dt == "bfloat16")
        for dt in ("bfloat16", "float16")
        for bm, d in ((128, 128), (64, 64))
    ],
)


def test_a_shape_an_sdpa_backend_does_not_serve_is_not_served_not_another_backend(monkeypatch):
    """On a GPU, `torch` / `torch_flash` run SDPA restricted to cuDNN / FlashAttention-2; when that
    backend has no kernel for the shape, the case is NotServed (a skip), never torch's other choice."""
    from types import SimpleNamespace

    from kernels.attention import baselines  # here, not at import: see the module docstring
    from tilekit.baseline_support import NotServed

    def refuse(*args, **kwargs):
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", refuse)
    q = SimpleNamespace(shape=(1, 4, 17, 64), is_cuda=True, device="cpu")
    k = SimpleNamespace(shape=(1, 2, 17, 64))
    for entry, name in ((baselines.torch_attention, "CUDNN_ATTENTION"), (baselines.torch_flash_attention, "FLASH")):
        try:
            entry(q, k, k, 1)
        except NotServed as e:
            assert f"SDPA's {name}" in str(e) and "No available kernel" in str(e)
        else:
            raise AssertionError(f"{name}: refused shape was not NotServed")
