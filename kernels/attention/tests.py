"""attention's tests beyond the generated suite (tilekit.testing.suite adds the test_* to
tests/kernels/test_attention.py), and BASELINE_CASES, what tests/kit/test_baselines.py checks of
baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import math
import re

import pytest
import torch

from kernels.attention import op
from kernels.attention.spec import SPEC
from tilekit.testing import harness
from tilekit.runtime.baseline_cases import TOL, BaselineCases, Has


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


def test_op_decode_with_one_split_cutile_rs(cuda):
    """One split of the cache: without sinks the split kernel stores out itself (ffi.rs `direct`, no
    workspace, no combine), with sinks and a window the combine folds a single split (SP = 1); and a
    batch of 64 with auto splits (512 key/value heads on 132 SMs: one split each)."""
    one = {"bm": 64, "bn": 64, "occupancy": -1, "warps": -1, "splits": 1}
    for cfg in (
        {"b": 4, "h": 32, "hkv": 8, "sq": 1, "skv": 1000, "d": 128, "causal": 1, "dtype": "bfloat16"},
        {"b": 2, "h": 64, "hkv": 8, "sq": 3, "skv": 333, "d": 64, "causal": 1, "window": 100, "sinks": 1,
         "dtype": "float16"},
    ):  # fmt: skip
        _run(cfg, variant=one)
    auto = dict(one, splits=-1)
    _run({"b": 64, "h": 32, "hkv": 8, "sq": 1, "skv": 300, "d": 128, "causal": 1, "dtype": "bfloat16"}, variant=auto)


def test_op_decode_with_many_splits_cutile_rs(cuda):
    """More splits than one combine tile holds at the whole head dim (ffi.rs combine_tile), over 102
    key tiles of 64: asking 60 gives 51 splits of 2 tiles (padded to 64, folded in 64-wide chunks of
    d = 128), asking 200 gives 102 of one (padded to 128: 32-wide chunks of d = 128, with sinks, and
    of d = 64): split counts that are not powers of two."""
    base = {"b": 1, "h": 8, "hkv": 2, "sq": 1, "skv": 6500, "causal": 1, "dtype": "bfloat16"}
    for d, splits, sinks in ((128, 60, 0), (128, 200, 1), (64, 200, 0)):
        cfg = dict(base, d=d, **({"sinks": 1} if sinks else {}))
        _run(cfg, variant={"bm": 64, "bn": 64, "occupancy": -1, "warps": -1, "splits": splits})


def test_op_default_variant_and_scale_cutile_rs(cuda):
    """`variant="default"` (every knob -1: ffi.rs's defaults) is a valid launch, and `scale` is used."""
    cfg = {"b": 2, "h": 4, "hkv": 2, "sq": 200, "skv": 200, "d": 128, "causal": 1, "dtype": "float16"}
    _run(cfg, variant="default")
    inputs = dict(SPEC.make_inputs(cfg), scale=0.3)
    out = SPEC.entry(*inputs.values())
    harness.check(SPEC, "cutile_rs", dict(cfg, scale=0.3), inputs, out)


def test_op_f32_sinks_and_a_minus_inf_sink_cutile_rs(cuda):
    """f32 sinks (the kernel's S = f32) against the reference; a sink of -inf is no sink at all
    (the kernel's m starts at the lowest finite f32, so exp2(-inf - m) = 0, never NaN)."""
    cfg = {"b": 1, "h": 4, "hkv": 2, "sq": 200, "skv": 300, "d": 64, "causal": 1, "window": 70, "sinks": 1}
    cfg["dtype"] = "bfloat16"
    inputs = SPEC.make_inputs(cfg)
    inputs["sinks"] = inputs["sinks"].float() + 0.3  # not representable in bf16
    out = SPEC.entry(*inputs.values())
    harness.check(SPEC, "cutile_rs", dict(cfg, sinks="f32"), inputs, out)
    minus_inf = dict(inputs, sinks=torch.full((4,), -math.inf, device="cuda"))
    no_sink = dict(inputs, sinks=None)
    torch.testing.assert_close(SPEC.entry(*minus_inf.values()), SPEC.entry(*no_sink.values()), rtol=1e-2, atol=1e-2)


def test_key_tiles_visit_every_visible_key_and_mask_only_partial_tiles():
    """op.key_tiles (kernel.rs's key_tiles and window_tiles, mirrored) brute-forced on the CPU:
    tiles outside [first, visited) hold no visible (query, key), every tile inside holds one, and
    [lo, hi) are exactly the tiles every row sees in full (the kernel runs them unmasked)."""
    for sq, skv, causal in ((1000, 1000, 1), (17, 4097, 1), (300, 129, 1), (1, 1000, 1), (333, 1000, 1), (70, 50, 0)):
        diag = skv - sq if causal else skv
        for window in (-1, 1, 63, 64, 65, 128, 200, 999) if causal else (-1,):
            for bm, bn in ((64, 64), (128, 64), (64, 128), (128, 128)):
                tm, tn = -(-sq // bm), -(-skv // bn)
                i, j = torch.arange(tm * bm)[:, None], torch.arange(tn * bn)[None, :]
                seen = (j < skv) & (j <= i + diag) & ((j > i + diag - window) if window > 0 else True)
                tiles = seen.view(tm, bm, tn, bn)
                some, every = tiles.any(dim=3).any(dim=1), tiles.all(dim=3).all(dim=1)
                for mt in range(tm):
                    first, lo, hi, visited = op.key_tiles(mt, bm, bn, skv, diag, window)
                    what = f"sq={sq} skv={skv} window={window} {bm}x{bn} mt={mt}"
                    assert [first <= t < visited for t in range(tn)] == some[mt].tolist(), what
                    assert [lo <= t < hi for t in range(tn)] == every[mt].tolist(), what


def _emulate(inputs: dict, bm: int, bn: int) -> torch.Tensor:
    """kernel.rs's program in float64 on the CPU: per query tile the key tiles op.key_tiles lists,
    the mask only on [first, lo) and [hi, visited), the online softmax in base 2 from m = max(sink ·
    log2(e), lowest f32) and l = exp2(sink · log2(e) - m) (m = lowest, l = 0 without sinks), then
    o = acc / max(l, 1)."""
    q, k, v, sinks, causal, scale, window = inputs.values()
    (b, h, sq, d), (hkv, skv) = q.shape, k.shape[1:3]
    diag, c, lowest = (skv - sq if causal else skv), scale * math.log2(math.e), -3.4028234663852886e38
    out = torch.zeros(b, h, sq, d, dtype=torch.float64)
    for bi in range(b):
        for hi_ in range(h):
            qq, kk, vv = q[bi, hi_].double(), k[bi, hi_ // (h // hkv)].double(), v[bi, hi_ // (h // hkv)].double()
            for mt in range(-(-sq // bm)):
                rows = torch.arange(mt * bm, (mt + 1) * bm)
                sink = -math.inf if sinks is None else float(sinks[hi_]) * math.log2(math.e)
                m = torch.full((bm,), max(sink, lowest), dtype=torch.float64)
                total = torch.exp2(sink - m)
                acc = torch.zeros(bm, d, dtype=torch.float64)
                qt = torch.zeros(bm, d, dtype=torch.float64)
                qt[: min(bm, sq - mt * bm)] = qq[mt * bm : (mt + 1) * bm]
                first, lo, hi, visited = op.key_tiles(mt, bm, bn, skv, diag, window)
                for j in range(first, visited):
                    keys = torch.arange(j * bn, (j + 1) * bn)
                    kt, vt = torch.zeros(bn, d, dtype=torch.float64), torch.zeros(bn, d, dtype=torch.float64)
                    kt[: min(bn, skv - j * bn)], vt[: min(bn, skv - j * bn)] = (
                        kk[j * bn : (j + 1) * bn],
                        vv[j * bn : (j + 1) * bn],
                    )
                    s = qt @ kt.T
                    if not lo <= j < hi:
                        seen = (keys[None, :] < skv) & (keys[None, :] <= rows[:, None] + diag)
                        if window > 0:
                            seen &= keys[None, :] > rows[:, None] + diag - window
                        s = s.masked_fill(~seen, -math.inf)
                    m_new = torch.maximum(m, s.max(dim=1).values * c)
                    p = torch.exp2(s * c - m_new[:, None])
                    alpha = torch.exp2(m - m_new)
                    total, acc, m = total * alpha + p.sum(dim=1), acc * alpha[:, None] + p @ vt, m_new
                o = acc / total.clamp(min=1.0)[:, None]
                out[bi, hi_, mt * bm : (mt + 1) * bm] = o[: min(bm, sq - mt * bm)]
    return out


def test_the_kernels_tile_walk_emulated_on_the_cpu_matches_the_reference():
    """The masking and sink logic of kernel.rs, emulated tile by tile in float64 (_emulate), equals
    SPEC.reference to rounding on windows across tile edges, sinks, s_q != s_kv both ways and
    queries that see no key: a wrong tile bound or mask shows here, before any GPU."""
    cases = (
        dict(sq=150, skv=150, causal=1, window=40, sinks=1),
        dict(sq=70, skv=200, causal=1, window=1, sinks=0),
        dict(sq=200, skv=90, causal=1, window=100, sinks=1),
        dict(sq=100, skv=130, causal=0, sinks=1),
        dict(sq=1, skv=300, causal=1, window=65, sinks=1),
    )
    for case in cases:
        cfg = dict(b=1, h=2, hkv=1, d=64, dtype="float32", **case)
        inputs = SPEC.make_inputs(cfg, device="cpu", seed=0)
        ref = SPEC.reference(inputs)
        for bm, bn in ((64, 64), (128, 64), (64, 128)):
            got = _emulate(inputs, bm, bn)
            assert torch.allclose(got, ref, rtol=1e-9, atol=1e-9), (case, bm, bn, (got - ref).abs().max())


def _emulate_decode(inputs: dict, bn: int, asked: int, subs: int = 1) -> torch.Tensor:
    """kernel.rs's decode path in float64 on the CPU: per (batch, key/value head) the group's query
    heads × s_q queries as rows (row r: head g = r // SQ, query i = r % SQ, SQ = s_q rounded up to a
    power of two), each split of op.decode_split walking its key tiles with every tile masked, its
    partial (m, l, acc) from m = lowest f32, l = 0 (with `subs` > 1 attention_decode_batched's: each
    bn-key step cut into `subs` sub-tiles, one online softmax a sub-tile position, folded into the
    split's partial after the walk as the combine folds splits); then the combine's one fold per real row over
    the splits padded to a power of two: M = max(m, sink · log2 e), L = Σ l 2^(m - M) + 2^(sink -
    M), o = Σ acc 2^(m - M) / max(L, 1)."""
    q, k, v, sinks, causal, scale, window = inputs.values()
    (b, h, sq, d), (hkv, skv) = q.shape, k.shape[1:3]
    group, sq_pad = h // hkv, 1 << max(0, (sq - 1).bit_length())
    rows = max(16, 1 << max(0, (group * sq_pad - 1).bit_length()))
    diag, c, lowest = (skv - sq if causal else skv), scale * math.log2(math.e), -3.4028234663852886e38
    first, end, splits, per = op.decode_split(skv, bn, diag, window, asked)
    g, i = torch.arange(rows) // sq_pad, torch.arange(rows) % sq_pad
    real = (g < group) & (i < sq)
    out = torch.zeros(b, h, sq, d, dtype=torch.float64)
    for bi in range(b):
        for kh in range(hkv):
            qt = torch.zeros(rows, d, dtype=torch.float64)
            qt[real] = q[bi, kh * group + g[real], i[real]].double()
            parts = []
            sub = bn // subs
            for split in range(splits):
                m = torch.full((subs, rows), lowest, dtype=torch.float64)
                total, acc = (
                    torch.zeros(subs, rows, dtype=torch.float64),
                    torch.zeros(subs, rows, d, dtype=torch.float64),
                )
                for j in range(first + split * per, min(first + (split + 1) * per, end)):
                    for n in range(subs):
                        k0 = j * bn + n * sub
                        keys = torch.arange(k0, k0 + sub)
                        kt, vt = torch.zeros(sub, d, dtype=torch.float64), torch.zeros(sub, d, dtype=torch.float64)
                        kt[: max(0, min(sub, skv - k0))] = k[bi, kh, k0 : k0 + sub].double()
                        vt[: max(0, min(sub, skv - k0))] = v[bi, kh, k0 : k0 + sub].double()
                        seen = (keys[None, :] < skv) & (keys[None, :] <= i[:, None] + diag)
                        if window > 0:
                            seen &= keys[None, :] > i[:, None] + diag - window
                        s = (qt @ kt.T).masked_fill(~seen, -math.inf)
                        m_new = torch.maximum(m[n], s.max(dim=1).values * c)
                        p = torch.exp2(s * c - m_new[:, None])
                        alpha = torch.exp2(m[n] - m_new)
                        total[n], acc[n], m[n] = (
                            total[n] * alpha + p.sum(dim=1),
                            acc[n] * alpha[:, None] + p @ vt,
                            m_new,
                        )
                # the sub-tiles' partials into the split's: M = max m, w = 2^(m - M)
                big = m.max(dim=0).values
                w = torch.exp2(m - big)
                parts.append((big, (total * w).sum(dim=0), (acc * w[:, :, None]).sum(dim=0)))
            # the combine, one fold per row over SP = splits rounded up to a power of two, the
            # padding splits read as the views pad (zeros) and masked out
            sp = 1 << max(0, (splits - 1).bit_length())
            pad = sp - splits
            ms = torch.stack([m for m, _, _ in parts] + [torch.zeros(rows, dtype=torch.float64)] * pad)
            ls = torch.stack([t for _, t, _ in parts] + [torch.zeros(rows, dtype=torch.float64)] * pad)
            accs = torch.stack([a for _, _, a in parts] + [torch.zeros(rows, d, dtype=torch.float64)] * pad)
            split_real = (torch.arange(sp) < splits)[:, None]
            ms = torch.where(split_real, ms, lowest)
            big_m, sink_l = ms.max(dim=0).values, torch.zeros(rows, dtype=torch.float64)
            if sinks is not None:
                sink = sinks[kh * group + g.clamp(max=group - 1)].double() * math.log2(math.e)
                big_m = torch.maximum(big_m, sink)
                sink_l = torch.exp2(sink - big_m)
            w = torch.where(split_real, torch.exp2(ms - big_m), 0.0)
            big_l = (ls * w).sum(dim=0) + sink_l
            o = (accs * w[:, :, None]).sum(dim=0) / big_l.clamp(min=1.0)[:, None]
            out[bi, kh * group + g[real], i[real]] = o[real]
    return out


def test_the_decode_path_emulated_on_the_cpu_matches_the_reference():
    """The decode kernels' packing, split walk, masks, window start and combine with sinks,
    emulated in float64 (_emulate_decode), equal SPEC.reference to rounding: GQA and MQA groups,
    1 to 16 queries (padded to a power of two), caches that end mid-tile, windows across tile
    edges and sinks (one of -inf), queries that see no key, one split, more splits than tiles, the
    largest packing (8 heads × 16 queries), and the sub-tiled split kernel (bn 16: 64-key steps of
    four sub-tiles, sub-tiles past the cache and ones a row sees no key of)."""
    cases = (
        dict(b=2, h=8, hkv=2, sq=1, skv=300, causal=1),
        dict(b=1, h=8, hkv=1, sq=3, skv=129, causal=0, sinks=1),
        dict(b=1, h=4, hkv=2, sq=5, skv=260, causal=1, window=70, sinks=1),
        dict(b=1, h=2, hkv=2, sq=16, skv=5, causal=1, sinks=1),
        dict(b=1, h=6, hkv=2, sq=4, skv=200, causal=1, window=1),
        # 128 rows (8 heads × 16 queries), 11 splits of 64 keys
        dict(b=1, h=8, hkv=1, sq=16, skv=700, causal=1, sinks=1),
    )
    for n, case in enumerate(cases):
        cfg = dict(d=64, dtype="float32", **case)
        inputs = SPEC.make_inputs(cfg, device="cpu", seed=1)
        if n == 2:  # a sink of -inf is no sink: it must weigh nothing in the combine
            inputs["sinks"][1] = -math.inf
        ref = SPEC.reference(inputs)
        for bn, asked, subs in ((64, 1, 1), (64, 3, 1), (64, 11, 1), (128, 100, 1), (32, 7, 1), (64, 3, 4), (64, 1, 4)):
            got = _emulate_decode(inputs, bn, asked, subs)
            assert torch.allclose(got, ref, rtol=1e-9, atol=1e-9), (case, bn, asked, (got - ref).abs().max())


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
        # sinks and windows: the window's edge tiles skipped and masked, queries that see no key
        (dict(b=1, h=2, hkv=1, sq=130, skv=150, d=64, causal=1, window=40, sinks=1, dtype="float16"), "64x64", {}),
        (dict(b=1, h=2, hkv=2, sq=150, skv=100, d=64, causal=1, window=1, dtype="bfloat16"), "128x64", {}),
        (dict(b=1, h=2, hkv=1, sq=40, skv=70, d=64, causal=0, sinks=1, dtype="float16"), "auto", {}),
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
    # the perf shapes' auto plans, pinned (the decode configs' few queries: 64-row tiles)
    + [("tile_plan", (c["sq"], c["d"]), Has(variant="128x64" if c["sq"] > 64 else "64x64")) for c in SPEC.perf_configs],
    plan_errors=[("tile_plan", (10, 64, "fastest"), {}, "variant must be one of")],
    triton_compile=[
        (
            "_triton_attention_kernel",
            dt,
            dict(LOWEST=-3.4e38, BM=bm, BN=bn, D=d, HAS_SINKS=extra, HAS_WINDOW=extra),
            dict(num_warps=w, num_stages=3),
        )
        for dt, bm, bn, d, w, extra in (
            ("bf16", 128, 64, 128, 8, False),
            ("fp16", 128, 64, 64, 4, False),
            ("bf16", 64, 128, 128, 4, False),
            ("bf16", 128, 64, 64, 4, True),
        )
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
    from tilekit.runtime.baseline_support import NotServed

    def refuse(*args, **kwargs):
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", refuse)
    q = SimpleNamespace(shape=(1, 4, 17, 64), is_cuda=True, device="cpu")
    k = SimpleNamespace(shape=(1, 2, 17, 64))
    for entry, name in ((baselines.torch_attention, "CUDNN_ATTENTION"), (baselines.torch_flash_attention, "FLASH")):
        try:
            entry(q, k, k, None, 1)
        except NotServed as e:
            assert f"SDPA's {name}" in str(e) and "No available kernel" in str(e)
        else:
            raise AssertionError(f"{name}: refused shape was not NotServed")


# -- decode over a paged cache (op.attention_paged) ---------------------------------------------------


def paged_case(b, h, hkv, sq, d, page, lens, *, dtype="bfloat16", window=-1, sinks=False, fused=False, device="cuda"):
    """Inputs of op.attention_paged: b sequences of lengths `lens` in pages of `page` keys, laid out
    in a shuffled order with spare pages, each table row one column wider than its longest sequence
    needs and -1 past each sequence's pages (hidden wherever a key tile reads them); with `fused` k
    and v are the two halves of
    one (pages, page, 2 h_kv, d) buffer (strided views). A dict of the entry's arguments."""
    g = torch.Generator(device=device).manual_seed(1234 + b * 7 + sq)
    dt = torch.bfloat16 if dtype == "bfloat16" else torch.float16
    width = max(-(-n // page) for n in lens) + 1
    pages = b * width + 3

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(dt)

    if fused:
        kv = randn(pages, page, 2 * hkv, d)
        k_cache, v_cache = kv[:, :, :hkv], kv[:, :, hkv:]
    else:
        k_cache, v_cache = randn(pages, page, hkv, d), randn(pages, page, hkv, d)
    order = torch.randperm(pages, generator=g, device=device)[: b * width].view(b, width).to(torch.int32)
    used = (
        torch.arange(width, device=device)[None, :]
        < torch.tensor([-(-n // page) for n in lens], device=device)[:, None]
    )
    table = torch.where(used, order, torch.full_like(order, -1))
    sink = (1.0 + 2.0 * torch.randn(h, generator=g, device=device)).to(dt) if sinks else None
    return {
        "q": randn(b, sq, h, d).transpose(1, 2),  # a model's (b, s, h, d) layout, read in place
        "k_cache": k_cache,
        "v_cache": v_cache,
        "block_table": table,
        "seqlens": torch.tensor(lens, dtype=torch.int32, device=device),
        "sinks": sink,
        "scale": 1.0 / math.sqrt(d),
        "window": window,
    }


def paged_reference(case: dict) -> torch.Tensor:
    """float64 attention of each sequence over its keys gathered from the pages (SPEC.reference,
    causal, the queries at the sequence's end); a sequence of no key gets 0."""
    q, k_cache, v_cache, table, lens = (case[n] for n in ("q", "k_cache", "v_cache", "block_table", "seqlens"))
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    page = k_cache.shape[1]
    for i, n in enumerate(lens.tolist()):
        if n == 0:
            continue
        ids = table[i, : -(-n // page)].long()
        assert bool((ids >= 0).all()), f"sequence {i}: {n} keys need pages its table row does not list"

        def keys(cache):
            return cache[ids].reshape(-1, *cache.shape[2:])[:n].transpose(0, 1)[None]  # (1, h_kv, n, d)

        one = {"q": q[i : i + 1], "k": keys(k_cache), "v": keys(v_cache), "sinks": case["sinks"], "causal": 1}
        out[i : i + 1] = SPEC.reference(one | {"scale": case["scale"], "window": case["window"]})
    return out


def test_paged_reference_is_the_contiguous_reference_of_the_gathered_keys():
    """On the CPU: sequences of equal length whose pages are gathered back to a (b, h_kv, s_kv, d)
    cache give SPEC.reference's result on it (the helpers the GPU tests judge the kernel with)."""
    case = paged_case(2, 4, 2, 3, 64, 16, [40, 40], window=20, sinks=True, device="cpu")
    page_ids = case["block_table"][:, :3].long()

    def contiguous(cache):
        return cache[page_ids].reshape(2, 48, 2, 64)[:, :40].transpose(1, 2)

    whole = {"q": case["q"], "k": contiguous(case["k_cache"]), "v": contiguous(case["v_cache"])}
    whole |= {"sinks": case["sinks"], "causal": 1, "scale": case["scale"], "window": 20}
    assert torch.equal(paged_reference(case), SPEC.reference(whole))
    assert (case["block_table"][:, 3] == -1).all()  # the spare column


def test_attention_paged_refuses_bad_input_naming_it():
    """The checks, on the CPU (they run before the CUDA check)."""
    case = paged_case(2, 8, 2, 1, 64, 16, [20, 5], device="cpu")

    def call(**change):
        return op.attention_paged(**(case | change))

    for change, message in (
        ({"block_table": case["block_table"].long()}, "block_table must be an int32 (2, width) tensor"),
        ({"seqlens": case["seqlens"][:1]}, "seqlens must be an int32 (2,) tensor"),
        ({"v_cache": case["v_cache"][..., :32]}, "k_cache and v_cache must both be"),
        ({"q": torch.zeros(2, 8, 32, 64, dtype=torch.bfloat16)}, "s_q <= 16"),
        ({"scale": 0.0}, "scale=0.0 must be finite and > 0"),
        ({"window": 0}, "window=0"),
        ({"sinks": torch.zeros(3)}, "sinks must be (8,)"),
        ({}, "CUDA device"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            call(**change)
    assert hasattr(torch.ops.tilekit, "attention_paged")


PAGED_CASES = {
    # Llama-3-8B's heads, vLLM's 16-key pages (four a key tile), ragged lengths: 0 keys, fewer than a
    # tile, a page's end, a long one
    "gqa4-page16": dict(b=4, h=32, hkv=8, sq=1, d=128, page=16, lens=[0, 5, 32, 1000]),
    # a page of a tile, GQA 8, 4 speculative queries (one sequence shorter than them), f16, fused k/v
    "gqa8-page64-sq4": dict(b=3, h=64, hkv=8, sq=4, d=64, page=64, lens=[3, 300, 129], dtype="float16", fused=True),
    # pages of several tiles, MQA, a window and sinks (gpt-oss's sliding layers)
    "mqa-page256-window": dict(b=2, h=32, hkv=1, sq=1, d=128, page=256, lens=[2000, 700], window=128, sinks=True),
    # 16-key pages under 64-key tiles whose last tile ends past the table's capacity (11 pages, 176
    # keys: tile 2's piece 2 reads the spare -1 column, piece 3 the capped last one), a window that
    # skips the first tiles (first tile 1 at 64 keys, 3 at 32), sinks, f16, fused k/v
    "gqa4-page16-window-sinks": dict(
        b=2, h=32, hkv=8, sq=2, d=64, page=16, lens=[150, 33], dtype="float16", window=40, sinks=True, fused=True
    ),
    # odd page size, window across pages, 3 queries of GQA 4 with sinks
    "page7-window-sinks": dict(b=2, h=8, hkv=2, sq=3, d=64, page=7, lens=[50, 9], window=10, sinks=True),
}
PAGED_VARIANTS = {
    "auto": "auto",
    "one-split": {"bm": -1, "bn": 64, "occupancy": -1, "warps": -1, "splits": 1, "depth": -1},
    "many-splits": {"bm": -1, "bn": 32, "occupancy": 2, "warps": -1, "splits": 40, "depth": -1},
}


@pytest.mark.parametrize("variant", list(PAGED_VARIANTS))
@pytest.mark.parametrize("case", list(PAGED_CASES))
def test_op_paged_matches_the_gathered_reference_cutile_rs(cuda, case, variant):
    """Every case under autotune's pick, one split (the split kernel stores out itself where there are
    no sinks) and 40 splits of 32-key tiles (most of them past the short sequences' ends)."""
    inputs = paged_case(**PAGED_CASES[case])
    out = op.attention_paged(**inputs, variant=PAGED_VARIANTS[variant], validate=True)
    torch.cuda.synchronize()
    tol = SPEC.tolerance[PAGED_CASES[case].get("dtype", "bfloat16")]
    harness.check_close(out, paged_reference(inputs), tol, f"attention_paged {case} {variant}")
    if PAGED_CASES[case]["lens"][0] == 0:
        assert bool((out[0] == 0).all())


def test_op_paged_compiles_and_captures_cutile_rs(cuda):
    """torch.compile(fullgraph=True) calls the op; a CUDA graph replays it after one warm call, over
    new queries and lengths written into the captured tensors (each inside the pages its table row
    lists: sequence 0 has none)."""
    inputs = paged_case(**PAGED_CASES["gqa4-page16"])
    expected = paged_reference(inputs)
    tol = SPEC.tolerance["bfloat16"]

    def step(q, lens):
        return op.attention_paged(q, inputs["k_cache"], inputs["v_cache"], inputs["block_table"], lens)

    harness.check_close(torch.compile(step, fullgraph=True)(inputs["q"], inputs["seqlens"]), expected, tol, "compiled")
    q, lens = inputs["q"].clone(), inputs["seqlens"].clone()
    step(q, lens)  # warm: JIT and autotune outside capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step(q, lens)
    lens_now = torch.tensor([0, 3, 17, 999], dtype=torch.int32, device="cuda")
    shorter = dict(inputs, q=torch.randn_like(q), seqlens=lens_now)
    q.copy_(shorter["q"])
    lens.copy_(shorter["seqlens"])
    graph.replay()
    torch.cuda.synchronize()
    harness.check_close(out, paged_reference(shorter), tol, "graph replay")


def test_op_paged_validate_names_a_bad_page_and_length_cutile_rs(cuda):
    inputs = paged_case(**PAGED_CASES["gqa4-page16"])
    bad = inputs["block_table"].clone()
    bad[3, 2] = inputs["k_cache"].shape[0]
    with pytest.raises(ValueError, match=r"block_table\[3, 2\] = .* is not a page of the cache"):
        op.attention_paged(**(inputs | {"block_table": bad}), validate=True)
    too_long = inputs["seqlens"].clone()
    too_long[1] = 16 * inputs["block_table"].shape[1] + 1
    with pytest.raises(ValueError, match=r"seqlens\[1\] = .* is outside"):
        op.attention_paged(**(inputs | {"seqlens": too_long}), validate=True)
