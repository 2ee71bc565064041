"""attention: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel describes;
its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

O = softmax(Q Kᵀ / sqrt(d) + mask) V per (batch, head): q (b, h, sq, d), k and v (b, hkv, skv, d),
f16 or bf16. A config's `causal` (1) hides key j from query i when j > i + skv - sq (aligned to the
end of the keys); `bshd` (1) stores q, k and v as (b, s, h, d) and passes their transpose(1, 2)
views (strided in s and h), as a model's projections come out; `window` (with causal) lets query i
see only the last `window` keys up to its diagonal, j > i + skv - sq - window; `sinks` (1) adds a
per-head sink logit to each softmax's denominator (gpt-oss; op.py's docstring has the formula).
"""

from __future__ import annotations

import math

import torch

from kernels.attention import op
from tilekit.runtime.kernel import BadInput, FfiCase, KernelSpec, call, generator, shapes, sweep_grid, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random q, k, v ~ N(0, 1) (scores of unit variance at scale 1 / sqrt(d)), the sinks
    (None, or ~ N(1, 2²) per head in q's dtype, as a model stores them: sinks above, near and below
    a row's largest score), the mask flag, the scale and the window (-1: none): the entry's
    arguments in order.

    >>> cfg = {"dtype": "float16", "b": 2, "h": 4, "hkv": 2, "sq": 5, "skv": 7, "d": 64, "bshd": 1}
    >>> inputs = make_inputs(cfg, device="meta")
    >>> [(tuple(t.shape), t.stride()) for t in list(inputs.values())[:2]], inputs["causal"], inputs["scale"]
    ([((2, 4, 5, 64), (1280, 64, 256, 1)), ((2, 2, 7, 64), (896, 64, 128, 1))], 0, 0.125)
    >>> list(inputs)[3:], inputs["sinks"], inputs["window"]
    (['sinks', 'causal', 'scale', 'window'], None, -1)
    >>> inputs = make_inputs(dict(cfg, causal=1, window=3, sinks=1), device="meta")
    >>> inputs["sinks"].shape, inputs["sinks"].dtype, inputs["window"]
    (torch.Size([4]), torch.float16, 3)
    """
    g, dt = generator(device, seed), torch_dtype(cfg["dtype"])
    b, d = cfg["b"], cfg["d"]

    def tensor(heads, s):
        if cfg.get("bshd"):
            return torch.randn(b, s, heads, d, generator=g, device=device, dtype=torch.float32).to(dt).transpose(1, 2)
        return torch.randn(b, heads, s, d, generator=g, device=device, dtype=torch.float32).to(dt)

    q, k, v = tensor(cfg["h"], cfg["sq"]), tensor(cfg["hkv"], cfg["skv"]), tensor(cfg["hkv"], cfg["skv"])
    sinks = None
    if cfg.get("sinks"):
        sinks = (1.0 + 2.0 * torch.randn(cfg["h"], generator=g, device=device, dtype=torch.float32)).to(dt)
    return {
        "q": q,
        "k": k,
        "v": v,
        "sinks": sinks,
        "causal": int(cfg.get("causal", 0)),
        "scale": 1.0 / math.sqrt(d),
        "window": int(cfg.get("window", -1)),
    }


def score_chunks(q, k, v, sinks, causal, scale, window):
    """The float64 scores of attention's rows a few at a time, as (batch, heads, first row, s, v):
    s (group, rows, s_kv (+1 with sinks)) of the query heads `heads` (a slice: one key/value head's
    group) at rows first .. first + rows, scaled, -inf where the mask hides a key, the sink a last
    column; v that key/value head's (s_kv, d). Chunks of rows keep s under ~512 MiB. The reference
    here and attention_backward's saved forward share it."""
    b, h, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    group = h // hkv
    rows = max(1, (1 << 26) // max(1, group * skv))
    keys = torch.arange(skv, device=q.device)
    for bi in range(b):
        for g in range(hkv):
            kk, vv, heads = k[bi, g].double(), v[bi, g].double(), slice(g * group, (g + 1) * group)
            for r0 in range(0, sq, rows):
                s = q[bi, heads, r0 : r0 + rows].double() @ kk.T * scale
                if causal:
                    queries = torch.arange(r0, r0 + s.shape[1], device=q.device)
                    hidden = keys[None, :] > queries[:, None] + (skv - sq)
                    if window > 0:
                        hidden |= keys[None, :] <= queries[:, None] + (skv - sq) - window
                    s = s.masked_fill(hidden, -math.inf)
                if sinks is not None:  # a last column, dropped after the softmax
                    sink = sinks[heads].double()[:, None, None].expand(-1, s.shape[1], 1)
                    s = torch.cat((s, sink), dim=-1)
                yield bi, heads, r0, s, vv


def reference(inputs: dict) -> torch.Tensor:
    """float64 attention with materialized scores (score_chunks), on the inputs' device; a query that
    sees no key gets 0. The sink of head h is one more score column of its rows whose value row is
    zero; the window hides key j from query i unless j > i + skv - sq - window."""
    q, k, v, sinks, causal, scale, window = inputs.values()
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    for bi, heads, r0, s, vv in score_chunks(q, k, v, sinks, causal, scale, window):
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # all keys hidden (and no sink): 0
        out[bi, heads, r0 : r0 + s.shape[1]] = p[..., : vv.shape[0]] @ vv
    return out


def visible_pairs(sq: int, skv: int, causal: bool, window: int = -1) -> int:
    """(query, key) pairs the mask leaves: sq · skv without a mask. Under the causal mask query i
    sees keys max(0, t - w) <= j < t with t = i + skv - sq + 1 (w = window, or unbounded): min(t, w)
    keys when t > 0, t ranging over skv - sq + 1 .. skv. With F(n) = sum of min(t, w) for
    t = 1 .. n (n (n + 1) / 2 while n <= w, then w (w + 1) / 2 + (n - w) w), the pairs are
    F(skv) - F(max(0, skv - sq)): sq (sq + 1) / 2 for sq == skv without a window, about sq · w with
    one (sq ≫ w).

    >>> visible_pairs(4096, 4096, True) == 4096 * 4097 // 2, visible_pairs(1, 1000, True), visible_pairs(3, 2, True)
    (True, 1000, 3)
    >>> visible_pairs(4096, 4096, True, 1024) == 1024 * 1025 // 2 + (4096 - 1024) * 1024
    True
    >>> visible_pairs(5, 7, True, 2), visible_pairs(5, 7, True, 7) == visible_pairs(5, 7, True)
    (10, True)
    """
    if not causal:
        return sq * skv

    def upto(n: int) -> int:  # F(n)
        if window <= 0 or n <= window:
            return n * (n + 1) // 2
        return window * (window + 1) // 2 + (n - window) * window

    return upto(skv) - upto(max(0, skv - sq))


def flops(cfg: dict) -> int:
    """Two per multiply-add of Q Kᵀ and of P V over the visible pairs: 4 · b · h · d · pairs (the
    issue's 4 · b · h · s² · d halved for causal, up to the diagonal's s / 2 pairs; with a window
    only the pairs inside it, so TFLOP/s counts no skipped or masked work). Sinks add no FLOPs.

    >>> flops({"b": 4, "h": 32, "sq": 4096, "skv": 4096, "d": 128}) == 4 * 4 * 32 * 4096 * 4096 * 128
    True
    """
    pairs = visible_pairs(cfg["sq"], cfg["skv"], bool(cfg.get("causal")), cfg.get("window", -1))
    return 4 * cfg["b"] * cfg["h"] * cfg["d"] * pairs


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read q, k, v once, write o once.

    >>> bytes_moved({"dtype": "bfloat16", "b": 1, "h": 32, "hkv": 8, "sq": 4096, "skv": 4096, "d": 128}) == (2 * 32 + 2 * 8) * 4096 * 128 * 2
    True
    """
    elems = 2 * cfg["b"] * cfg["d"] * (cfg["h"] * cfg["sq"] + cfg["hkv"] * cfg["skv"])
    return elems * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


def f16(*shape):
    return torch.randn(*shape, dtype=torch.float16)


def qkv(b=1, h=4, hkv=2, sq=8, skv=8, d=64):
    return f16(b, h, sq, d), f16(b, hkv, skv, d), f16(b, hkv, skv, d)


SWEEP_SKV = (128, 512, 1024, 2048, 4096, 8192)
SWEEP_SQ = (1, *SWEEP_SKV)

SPEC = KernelSpec(
    op=op,
    dims={"b": 64, "h": 128, "hkv": 128, "sq": 1 << 17, "skv": 1 << 17, "d": 256},
    strides={"causal": "-causal", "bshd": "-bshd"},
    options={"window": "-window", "sinks": "-sinks"},
    # One query (decode, MHA and MQA), a tiny ragged causal GQA problem, 1000 and 4097 (each past a
    # tile), MQA (hkv = 1), sq != skv both ways (chunked prefill sees its prefix; sq > skv without a
    # mask), a (b, s, h, d) strided view, d = 64 and 128, causal and full. Small b · h keep the
    # float64 reference cheap.
    correctness_shapes=shapes(
        "b h hkv sq skv d causal",
        *((1, 2, 2, 1, 1, 64, 0), (1, 4, 1, 1, 1000, 128, 1), (2, 4, 2, 17, 17, 64, 1), (2, 4, 2, 17, 17, 128, 0)),
        *((1, 4, 4, 1000, 1000, 128, 1), (1, 2, 1, 4097, 4097, 64, 0), (1, 2, 2, 4097, 4097, 128, 1)),
        *((1, 8, 2, 1000, 4097, 128, 1), (1, 4, 1, 300, 129, 64, 0)),
    )
    + shapes("b h hkv sq skv d causal bshd", (2, 4, 2, 1000, 1000, 128, 1, 1), (1, 4, 2, 333, 333, 64, 0, 1))
    # Sliding windows (causal): one key (the diagonal only), odd widths across tile edges, a window
    # one key short of s_kv at 4097, one wider than s_kv (runs without one), chunked prefill (s_q <
    # s_kv) and decode (s_q = 1) with MQA. Sinks: with the full mask and s_q > s_kv, causal with
    # queries that see no key (o = 0: a sink has no value row), with windows.
    + shapes(
        "b h hkv sq skv d causal window",
        *((1, 2, 2, 200, 200, 64, 1, 1), (1, 4, 2, 1000, 1000, 128, 1, 200), (1, 2, 2, 4097, 4097, 128, 1, 4096)),
        (1, 2, 1, 100, 100, 64, 1, 1000),
    )
    + shapes("b h hkv sq skv d causal sinks", (2, 4, 2, 300, 129, 64, 0, 1), (1, 4, 2, 300, 129, 128, 1, 1))
    + shapes(
        "b h hkv sq skv d causal window sinks",
        *((1, 4, 4, 17, 17, 64, 1, 5, 1), (2, 4, 1, 333, 1000, 64, 1, 129, 1), (1, 8, 1, 1, 1000, 128, 1, 128, 1)),
    )
    # The decode path (s_q <= 16: the split cache, the group's heads packed): GQA 4 over a cache
    # past a tile (4097), a batch of 8; GQA 8 with 4 speculative queries; 16 queries of MHA; 3 ragged
    # queries without a mask; MQA of 32 heads; a window and sinks (gpt-oss's sliding layer), and 4
    # queries with a window across tile edges.
    + shapes(
        "b h hkv sq skv d causal",
        *((8, 32, 8, 1, 4097, 128, 1), (2, 32, 4, 4, 1000, 64, 1), (1, 16, 16, 16, 300, 128, 1)),
        *((3, 8, 2, 3, 129, 64, 0), (2, 32, 1, 1, 2000, 64, 1)),
    )
    + shapes(
        "b h hkv sq skv d causal window sinks", (2, 64, 8, 1, 4097, 64, 1, 128, 1), (1, 32, 8, 4, 2000, 128, 1, 1000, 1)
    )
    # ... in a model's (b, s, h, d) layout (the packed rows' pointers), and 16 queries over 5 keys
    # (causal: the first 11 see none, and get 0 from the combine)
    + shapes("b h hkv sq skv d causal bshd", (2, 32, 8, 4, 1000, 128, 1, 1), (1, 4, 2, 16, 5, 64, 1, 0)),
    # Llama-3-8B (32 query heads, 8 key/value heads, d = 128) prefill at 2k/4k/8k, causal; a d = 64
    # model (16 heads, 1024 tokens, causal: the row); a full-mask encoder (32 heads, d = 128).
    perf_configs=shapes(
        "dtype b h hkv sq skv d causal",
        *(("bfloat16", 4, 32, 8, s, s, 128, 1) for s in (2048, 4096)),
        ("bfloat16", 2, 32, 8, 8192, 8192, 128, 1),
        ("bfloat16", 16, 16, 16, 1024, 1024, 64, 1),
        ("bfloat16", 4, 32, 32, 4096, 4096, 128, 0),
    )
    # Mistral-7B (32 / 8 heads, d = 128, a 4096-key sliding window) at 8k tokens; gpt-oss-20b's
    # sliding layers (64 / 8 heads, d = 64, 128-key window, per-head sinks in bf16) at 4k.
    + shapes("dtype b h hkv sq skv d causal window", ("bfloat16", 2, 32, 8, 8192, 8192, 128, 1, 4096))
    + shapes("dtype b h hkv sq skv d causal window sinks", ("bfloat16", 4, 64, 8, 4096, 4096, 64, 1, 128, 1))
    # Decode, one query per sequence over the cache (issue 41): Llama-3-8B (GQA 4: 32 / 8 heads) at
    # batch 1 over 8k, 32k and 128k tokens, batch 16 over 8k, 64 over 4k, 256 over 1k; GQA 8 (64 / 8
    # heads) and MQA (32 / 1) over 8k; 4 speculative queries over 8k; gpt-oss-20b's sliding layer
    # (64 / 8 heads, d = 64, 128-key window, sinks) at batch 16 over 8k.
    + shapes(
        "dtype b h hkv sq skv d causal",
        *(("bfloat16", 1, 32, 8, 1, s, 128, 1) for s in (8192, 32768, 131072)),
        *(("bfloat16", 16, 32, 8, 1, 8192, 128, 1), ("bfloat16", 64, 32, 8, 1, 4096, 128, 1)),
        ("bfloat16", 256, 32, 8, 1, 1024, 128, 1),
        *(("bfloat16", 8, 64, 8, 1, 8192, 128, 1), ("bfloat16", 8, 32, 1, 1, 8192, 128, 1)),
        ("bfloat16", 8, 32, 8, 4, 8192, 128, 1),
    )
    + shapes("dtype b h hkv sq skv d causal window sinks", ("bfloat16", 16, 64, 8, 1, 8192, 64, 1, 128, 1)),
    # make sweep: Llama-3-8B's heads (GQA 32/8) and MHA, prefill lengths 128..8192 (S_q = S_kv) and
    # decode (S_q = 1) over the same caches, both head dims, causal and full
    sweep=sweep_grid(
        quick=dict(dtype=("bfloat16",), b=(4,), h=(32,), hkv=(8,), sq=SWEEP_SQ, skv=SWEEP_SKV, d=(128,), causal=(0, 1)),
        full=dict(
            dtype=op.DTYPES, b=(4,), h=(32,), hkv=(32, 8), sq=SWEEP_SQ, skv=SWEEP_SKV, d=(64, 128), causal=(0, 1)
        ),
        keep=lambda c: c["sq"] in (1, c["skv"]),
    ),
    # Against the float64 attention of the same (rounded) inputs. The output is a convex
    # combination of V's rows; the error is P rounded to the input dtype for the P V MMA and the
    # final rounding, each about u / sqrt(3) relative (u = 2^-8 bf16, 2^-11 f16): ~1.6e-3 / 2e-4 in
    # L2 for bf16 / f16, ~5x margin.
    tolerance={"bfloat16": (1.2e-2, 2.4e-2), "float16": (2e-3, 4e-3)},
    # One key (s_kv = 1) and no sink: P = 1 and dS = P (dP - Δ) = dO·v - dO·o = 0 exactly, so dQ and
    # dK are 0 and their rounding (dP from the MMA, Δ from the rounded o: ~1e-7) is all a relative
    # error could see (9.6e23 on the H100, 2026-12-05, against the float64 zero); dV = dO is checked
    # on every other shape.
    backward_skip=lambda cfg: (
        "s_kv = 1 without a sink: dq and dk are exactly 0, a relative error of their rounding says nothing"
        if cfg["skv"] == 1 and not cfg.get("sinks")
        else None
    ),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    flops=flops,
    out_shape=lambda cfg: (cfg["b"], cfg["h"], cfg["sq"], cfg["d"]),
    # 200 queries (two 128-row tiles, ragged) against 333 keys, causal (diagonal and tail tiles) and
    # GQA: every candidate of the long-query list; 40 queries: the short list.
    variant_shapes=shapes(
        "b h hkv sq skv d causal dtype", (1, 4, 2, 200, 333, 128, 1, "bfloat16"), (1, 4, 2, 40, 77, 64, 0, "float16")
    )
    # and the window's edge tiles (a 100-key window against both tile heights) with sinks; decode
    # shapes, where the candidates are the decode path's and the forward kernel's
    + shapes("b h hkv sq skv d causal window sinks dtype", (1, 4, 2, 300, 333, 128, 1, 100, 1, "bfloat16"))
    + shapes(
        "b h hkv sq skv d causal dtype", (2, 32, 8, 1, 1000, 128, 1, "bfloat16"), (1, 8, 2, 5, 333, 64, 1, "float16")
    ),
    # the long-query list's six candidates; the decode shapes' four of the split kernels, two of
    # the lean grid and the forward kernel's (op.variants)
    max_variants=7,
    # a one-key window's dq is exactly 0 (P = 1, dS = dP - Δ = 0): its error is judged against the
    # rounding floor, not relative to zero (harness.check_backward)
    gradient_floor=True,
    size_check=op.check_sizes,
    autotune_edges=shapes(
        "b h hkv sq skv d",
        *((1, 1, 1, 1, 1, 64), (4, 32, 8, 8192, 8192, 128), (64, 32, 8, 8192, 8192, 128), (1, 32, 1, 1, 131072, 128)),
        (1, 12, 12, 10, 10, 96),
    ),
    bad_inputs={
        "dtype_mix": BadInput(lambda: call(*qkv()[:2], qkv()[2].bfloat16()), TypeError, "share one dtype"),
        "float32": BadInput(lambda: call(*(t.float() for t in qkv())), TypeError, "share one dtype"),
        "three_dims": BadInput(
            lambda: call(*(t[0] for t in qkv())), ValueError, "q must be (b, h, s_q, d), a tensor of 4 dims"
        ),
        "kv_shapes": BadInput(lambda: call(*qkv()[:2], f16(1, 2, 9, 64)), ValueError, "k and v must both be"),
        "head_dim": BadInput(lambda: call(*qkv(d=96)), ValueError, "head dim d=96"),
        "gqa_group": BadInput(lambda: call(*qkv(h=4, hkv=3)), ValueError, "must divide the query heads"),
        "last_dim_stride": BadInput(
            lambda: call(f16(1, 4, 8, 128)[..., ::2], *qkv()[1:]), ValueError, "q must be contiguous in its last dim"
        ),
        "scale": BadInput(lambda: call(*qkv(), scale=-1.0), ValueError, "scale=-1.0 must be finite and > 0"),
        "sinks_not_a_tensor": BadInput(lambda: call(*qkv(), True), TypeError, "sinks must be a (4,) tensor"),
        "sinks_shape": BadInput(lambda: call(*qkv(), f16(2)), ValueError, "sinks must be (4,) of q's dtype"),
        "sinks_dtype": BadInput(
            lambda: call(*qkv(), torch.zeros(4, dtype=torch.float64)), ValueError, "got (4,) torch.float64"
        ),
        "sinks_device": BadInput(
            lambda: call(*qkv(), torch.zeros(4, dtype=torch.float16, device="meta")),
            ValueError,
            "q and sinks must be on one CUDA device",
        ),
        "window_zero": BadInput(
            lambda: call(*qkv(), causal=True, window=0), ValueError, "window=0 must be a positive number"
        ),
        "window_without_causal": BadInput(lambda: call(*qkv(), window=64), ValueError, "needs causal=True"),
        "cpu_tensor": BadInput(lambda: call(*qkv()), ValueError, "CUDA device"),
    },
    ffi_example={"b": 1, "h": 4, "hkv": 2, "sq": 8, "skv": 8, "d": 64, "dtype": "float16"},
    ffi_cases={
        "gqa_group": FfiCase(
            lambda: {"k": f16(1, 3, 8, 64), "v": f16(1, 3, 8, 64)}, message="the key/value heads must divide"
        ),
        "head_dim": FfiCase(
            lambda: dict(zip(("q", "k", "v", "out"), (*qkv(d=96), f16(1, 4, 8, 96)))),
            message="head dim d=96: the kernel supports d = 64 and 128",
        ),
        "kv_shapes": FfiCase(lambda: {"v": f16(1, 2, 9, 64)}, message="`k` [1, 2, 8, 64] and `v` [1, 2, 9, 64]"),
        "out_shape": FfiCase(lambda: {"out": f16(1, 4, 9, 64)}, message="`out` shape [1, 4, 9, 64] != `q` shape"),
        "aliased_out": FfiCase(lambda: (lambda q: {"q": q, "out": q})(f16(1, 4, 8, 64)), message="must not alias"),
        "tile_rows": FfiCase(variant={"bm": 32}, message="variant bm=32 bn=64: each must be 64 or 128"),
        "splits": FfiCase(variant={"splits": -17}, message="splits=-17: use 0 (the forward kernel)"),
        # the decode path with 3 splits over 8 keys of 4 query heads, 2 per key/value head: accepted
        "decode_splits": FfiCase(variant={"splits": 3}, code=-4),
        "depth": FfiCase(variant={"depth": 17}, message="variant depth=17: the decode path's load latency hint"),
        "depth_without_splits": FfiCase(variant={"splits": 0, "depth": 8}, message="1..=16 with splits != 0"),
        "decode_depth": FfiCase(variant={"splits": 3, "depth": 8}, code=-4),
        # (b, s, h, d) storage as (b, h, s, d) views, and MQA: accepted, read in place
        "bshd_views": FfiCase(
            lambda: {
                "q": f16(1, 8, 4, 64).transpose(1, 2),
                "k": f16(1, 8, 2, 64).transpose(1, 2),
                "v": f16(1, 8, 2, 64).transpose(1, 2),
                "out": f16(1, 8, 4, 64).transpose(1, 2),
            },
            code=-4,
        ),
        "mqa": FfiCase(lambda: {"k": f16(1, 1, 8, 64), "v": f16(1, 1, 8, 64)}, code=-4),
        "sinks_shape": FfiCase(lambda: {"sinks": f16(3)}, message="`sinks` is f16 [3] with strides [1]: pass a"),
        "sinks_dtype": FfiCase(lambda: {"sinks": f16(4).bfloat16()}, message="of q's dtype f16 or f32"),
        "window_without_causal": FfiCase(lambda: {"window": 4}, message="window=4 with causal=0"),
        "window_zero": FfiCase(lambda: {"causal": 1, "window": 0}, message="window=0 with causal=1"),
        # sinks of q's dtype and of f32, with a window: accepted
        "sinks_and_window": FfiCase(lambda: {"sinks": f16(4), "causal": 1, "window": 3}, code=-4),
        "f32_sinks": FfiCase(lambda: {"sinks": torch.randn(4)}, code=-4),
    },
)
