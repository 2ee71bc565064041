"""attention_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's
declaration). Touches no GPU at import.

The gradients of O = softmax(Q Kᵀ · scale + mask) V (kernels/attention) for an output gradient dO,
from the forward's O and per-row log-sum-exp: the rows of dQ (b, h, s_q, d), then dK and dV (b, h_kv,
s_kv, d), as one (b·h·s_q + 2·b·h_kv·s_kv, d) output. A config takes attention's keys (causal, bshd,
window, sinks: the sinks enter through O and lse only).
"""

from __future__ import annotations

import math

import torch

from kernels.attention import spec as forward
from kernels.attention_backward import op
from tilekit.runtime.kernel import BadInput, FfiCase, KernelSpec, call, generator, shapes, sweep_grid, torch_dtype

LN2 = math.log(2.0)
SWEEP = forward.SWEEP_SKV  # the sweep's training lengths


def saved(q, k, v, sinks, causal, scale, window) -> tuple:
    """The forward's (o, lse) as the training forward saves them, in float64 from the inputs as given
    (attention's score_chunks; o rounded to q's dtype and laid out as q; lse f32, base 2, +inf for a
    row that sees no key and no sink).

    >>> q = torch.zeros(1, 1, 2, 64); k = torch.zeros(1, 1, 3, 64)
    >>> o, lse = saved(q, k, k, None, 1, 0.125, -1)
    >>> [round(x, 4) for x in lse.flatten().tolist()]  # rows see 2 and 3 keys of equal score
    [1.0, 1.585]
    """
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    for bi, heads, r0, s, vv in forward.score_chunks(q, k, v, sinks, causal, scale, window):
        rows = slice(r0, r0 + s.shape[1])
        m = torch.logsumexp(s, -1, keepdim=True)  # -inf where a row sees nothing
        o[bi, heads, rows] = (torch.exp(s - m).nan_to_num(0.0)[..., : vv.shape[0]] @ vv).to(q.dtype)
        lse[bi, heads, rows] = (m[..., 0] / LN2).nan_to_num(math.inf, math.inf, math.inf).float()
    return o, lse


BIG = 1 << 36  # score elements x d past which the float64 forward and reference cost minutes on a GPU


def big(cfg: dict) -> bool:
    """Whether b · h · s_q · s_kv · d passes BIG (the perf configs: Llama-3-8B at 4 x 4096 tokens is
    2^38), where make_inputs takes o and lse from the port's training forward and the check compares
    reference_part's rows.

    >>> big({"b": 4, "h": 32, "sq": 4096, "skv": 4096, "d": 128}), big({"b": 1, "h": 8, "sq": 1000, "skv": 1000, "d": 128})
    (True, False)
    """
    return cfg["b"] * cfg["h"] * cfg["sq"] * cfg["skv"] * cfg["d"] > BIG


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """attention's inputs of the config (spec.make_inputs: q, k, v ~ N(0, 1), sinks, mask, scale,
    window), the forward's o and lse made from them and dO ~ N(0, 1) in q's layout: the entry's
    arguments in order (dout, q, k, v, o, lse, causal, scale, window). o and lse are `saved`'s
    (float64) for every config but the `big` ones on a GPU, where the float64 forward would take a
    minute: there the port's training forward makes them (kernels/attention/op.py attention_lse, as a
    training step does; that forward is tested on its own)."""
    fwd = forward.make_inputs(cfg, device=device, seed=seed)
    q, k, v, sinks, causal, scale, window = fwd.values()
    if device == "meta":
        o, lse = torch.empty_like(q), torch.empty(q.shape[:3], device=device)
    elif big(cfg) and q.is_cuda:
        from kernels.attention.op import attention_lse

        o, lse = attention_lse(q, k, v, sinks, causal=bool(causal), scale=scale, window=window)
    else:
        o, lse = saved(q, k, v, sinks, causal, scale, window)
    g = generator(device, None if seed is None else seed + 1)
    dout = torch.empty_like(q)
    dout.copy_(torch.randn(q.shape, generator=g, device=device, dtype=torch.float32))
    return {
        "dout": dout,
        "q": q,
        "k": k,
        "v": v,
        "o": o,
        "lse": lse,
        "causal": causal,
        "scale": scale,
        "window": window,
    }


def reference(inputs: dict) -> torch.Tensor:
    """float64 gradients from the inputs as given (o and lse the forward's: the FlashAttention-2
    formula applied to them), as the port's rows: P = exp(S · scale - lse · ln 2) under the mask,
    dV = Pᵀ dO, dS = P ⊙ (dO Vᵀ - rowsum(dO ⊙ O)), dQ = dS K · scale, dK = dSᵀ Q · scale, dK and dV
    summed over each GQA group's heads. tests.py checks it against autograd of attention's reference."""
    dout, q, k, v, o, lse, causal, scale, window = inputs.values()
    b, h, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    group = h // hkv
    dq = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    dk = torch.zeros(k.shape, dtype=torch.float64, device=q.device)
    dv = torch.zeros(k.shape, dtype=torch.float64, device=q.device)
    keys, queries = torch.arange(skv, device=q.device), torch.arange(sq, device=q.device)
    hidden = torch.zeros(sq, skv, dtype=torch.bool, device=q.device)
    if causal:
        hidden = keys[None, :] > queries[:, None] + (skv - sq)
        if window > 0:
            hidden |= keys[None, :] <= queries[:, None] + (skv - sq) - window
    for bi in range(b):
        for head in range(h):
            kv = head // group
            qq, kk, vv = q[bi, head].double(), k[bi, kv].double(), v[bi, kv].double()
            do, oo = dout[bi, head].double(), o[bi, head].double()
            p = torch.exp(qq @ kk.T * scale - lse[bi, head].double()[:, None] * LN2).masked_fill(hidden, 0.0)
            delta = (do * oo).sum(-1, keepdim=True)
            ds = p * (do @ vv.T - delta)
            dq[bi, head] = ds @ kk * scale
            dk[bi, kv] += ds.T @ qq * scale
            dv[bi, kv] += p.T @ do
    return torch.cat([t.reshape(-1, d) for t in (dq, dk, dv)])


def reference_part(inputs: dict):
    """For a `big` config, (rows, their float64 reference): the gradients of two (batch, key/value
    head) groups, (0, 0) and (b - 1, h_kv - 1) (the first and the farthest offsets), each the
    reference of its slice of the inputs; None otherwise (the whole reference)."""
    dout, q, k, v, o, lse, causal, scale, window = inputs.values()
    (b, h, sq, d), (hkv, skv) = q.shape, k.shape[1:3]
    if not big({"b": b, "h": h, "sq": sq, "skv": skv, "d": d}):
        return None
    group, nq, nk = h // hkv, b * h * sq, b * hkv * skv
    rows, refs = [], []
    for bi, g in dict.fromkeys([(0, 0), (b - 1, hkv - 1)]):
        heads, kv = slice(g * group, (g + 1) * group), slice(g, g + 1)
        part = {"dout": dout[bi : bi + 1, heads], "q": q[bi : bi + 1, heads], "k": k[bi : bi + 1, kv],
                "v": v[bi : bi + 1, kv], "o": o[bi : bi + 1, heads], "lse": lse[bi : bi + 1, heads],
                "causal": causal, "scale": scale, "window": window}  # fmt: skip
        refs.append(reference(part))
        first_q, first_k = (bi * h + g * group) * sq, (bi * hkv + g) * skv
        rows += [torch.arange(first_q, first_q + group * sq), torch.arange(nq + first_k, nq + first_k + skv)]
        rows.append(torch.arange(nq + nk + first_k, nq + nk + first_k + skv))
    return torch.cat(rows).to(q.device), torch.cat(refs)


def flops(cfg: dict) -> int:
    """2.5 times the forward's (kernels/attention/spec.py flops): the five products of the visible
    pairs FlashAttention counts for a backward (S again, dP, dV, dQ, dK), as FlashAttention, cuDNN and
    TileGym report backward TFLOP/s; the port computes S and dP twice (once per kernel), which this
    does not count.

    >>> flops({"b": 1, "h": 32, "sq": 4096, "skv": 4096, "d": 128, "causal": 1}) == 10 * 32 * 128 * 4096 * 4097 // 2
    True
    """
    return 5 * forward.flops(cfg) // 2


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read q, o, dO (b, h, s_q, d), k, v (b, h_kv, s_kv, d) and lse (f32 b, h, s_q)
    once, write dQ, dK, dV once."""
    elem = torch.finfo(torch_dtype(cfg["dtype"])).bits // 8
    b, h, hkv, sq, skv, d = (cfg[k] for k in ("b", "h", "hkv", "sq", "skv", "d"))
    return elem * d * (4 * b * h * sq + 4 * b * hkv * skv) + 4 * b * h * sq


def f16(*shape):
    return torch.randn(*shape, dtype=torch.float16)


def grads_args(b=1, h=4, hkv=2, sq=8, skv=8, d=64):
    q, k, v = forward.qkv(b, h, hkv, sq, skv, d)
    return f16(b, h, sq, d), q, k, v, f16(b, h, sq, d), torch.zeros(b, h, sq)


SPEC = KernelSpec(
    op=op,
    dims=dict(forward.SPEC.dims),
    strides={"causal": "-causal", "bshd": "-bshd"},
    options={"window": "-window", "sinks": "-sinks"},
    # Tiles past the edges both ways (17, 1000, 333), GQA and MQA, causal (the diagonal tiles of both
    # kernels) and full, s_q != s_kv both ways (chunked prefill; queries that see no key), one
    # query (decode's shape: one row tile per head), a (b, s, h, d) layout, both head dims; windows
    # of one key, across tile edges and wider than s_kv; sinks (through o and lse) with and without
    # a window. Small b · h keep the float64 reference cheap.
    correctness_shapes=shapes(
        "b h hkv sq skv d causal",
        *(
            (1, 2, 2, 17, 17, 64, 1),
            (2, 4, 2, 17, 17, 128, 0),
            (1, 4, 1, 1, 1000, 128, 1),
            (1, 4, 4, 1000, 1000, 128, 1),
        ),
        *((1, 8, 2, 333, 1000, 128, 1), (1, 4, 1, 300, 129, 64, 0), (1, 4, 2, 300, 129, 64, 1)),
        (1, 2, 2, 2100, 2100, 64, 1),
    )
    + shapes("b h hkv sq skv d causal bshd", (2, 4, 2, 333, 333, 128, 1, 1))
    + shapes(
        "b h hkv sq skv d causal window",
        *((1, 2, 2, 200, 200, 64, 1, 1), (1, 4, 2, 1000, 1000, 128, 1, 200), (1, 2, 1, 100, 100, 64, 1, 1000)),
    )
    + shapes("b h hkv sq skv d causal sinks", (1, 4, 2, 300, 129, 128, 1, 1), (2, 4, 2, 200, 77, 64, 0, 1))
    + shapes("b h hkv sq skv d causal window sinks", (2, 4, 1, 333, 1000, 64, 1, 129, 1)),
    # Llama-3-8B (32 query / 8 key-value heads, d = 128) causal training at 16k tokens a step (4 x
    # 4096, 2 x 8192), Llama-3-70B's heads (64 / 8) at 8192; a d = 64 model; a full-mask
    # encoder (32 heads, 4096); Mistral-7B's 4096-key window at 8192.
    perf_configs=shapes(
        "dtype b h hkv sq skv d causal",
        ("bfloat16", 4, 32, 8, 4096, 4096, 128, 1),
        ("bfloat16", 2, 32, 8, 8192, 8192, 128, 1),
        ("bfloat16", 1, 64, 8, 8192, 8192, 128, 1),
        ("bfloat16", 16, 16, 16, 1024, 1024, 64, 1),
        ("bfloat16", 2, 32, 32, 4096, 4096, 128, 0),
    )
    + shapes("dtype b h hkv sq skv d causal window", ("bfloat16", 2, 32, 8, 8192, 8192, 128, 1, 4096)),
    # Against the float64 formula on the same (rounded) inputs: P and dS rounded to the input dtype
    # for their products, dQ, dK, dV rounded at the end, each ~u / sqrt(3) relative (u = 2^-8 bf16,
    # 2^-11 f16), over sums of up to s_q · group terms: about twice the forward's, the forward's
    # bounds with 2x margin.
    # make sweep: training lengths 128..8192 (S_q = S_kv) of Llama-3-8B's heads (GQA 32/8) and MHA, both
    # head dims, causal and full, batch 1 and 4
    sweep=sweep_grid(
        quick=dict(dtype=("bfloat16",), b=(4,), h=(32,), hkv=(8,), sq=SWEEP, skv=SWEEP, d=(128,), causal=(0, 1)),
        full=dict(dtype=op.DTYPES, b=(1, 4), h=(32,), hkv=(32, 8), sq=SWEEP, skv=SWEEP, d=(64, 128), causal=(0, 1)),
        keep=lambda c: c["sq"] == c["skv"],
    ),
    tolerance={"bfloat16": (2.4e-2, 4.8e-2), "float16": (4e-3, 8e-3)},
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    flops=flops,
    out_shape=lambda cfg: (op.out_rows(*(cfg[k] for k in ("b", "h", "hkv", "sq", "skv"))), cfg["d"]),
    variant_shapes=shapes(
        "b h hkv sq skv d causal dtype", (1, 4, 2, 200, 333, 128, 1, "bfloat16"), (1, 4, 2, 40, 77, 64, 0, "float16")
    )
    + shapes("b h hkv sq skv d causal window sinks dtype", (1, 4, 2, 300, 333, 128, 1, 100, 1, "bfloat16")),
    max_variants=6,
    size_check=op.check_sizes,
    saved_inputs={"o": None, "lse": "float32"},
    reference_part=reference_part,
    autotune_edges=shapes("b h hkv sq skv d", *((1, 1, 1, 1, 1, 64), (4, 32, 8, 8192, 8192, 128))),
    bad_inputs={
        "o_shape": BadInput(
            lambda: call(*grads_args()[:4], f16(1, 4, 9, 64), torch.zeros(1, 4, 8)), ValueError, "o must have q's shape"
        ),
        "lse_dtype": BadInput(
            lambda: call(*grads_args()[:5], torch.zeros(1, 4, 8, dtype=torch.float16)),
            ValueError,
            "lse must be the forward's f32 (1, 4, 8)",
        ),
        "head_dim": BadInput(lambda: call(*grads_args(d=96)), ValueError, "head dim d=96"),
        "cpu_tensor": BadInput(lambda: call(*grads_args()), ValueError, "CUDA device"),
    },
    ffi_example={"b": 1, "h": 4, "hkv": 2, "sq": 8, "skv": 8, "d": 64, "dtype": "float16"},
    ffi_cases={
        "o_shape": FfiCase(lambda: {"o": f16(1, 4, 9, 64)}, message="`o` is f16 [1, 4, 9, 64]"),
        "lse_dtype": FfiCase(lambda: {"lse": torch.zeros(1, 4, 8, dtype=torch.float16)}, message="`lse` is f16"),
        "out_rows": FfiCase(lambda: {"out": f16(40, 64)}, message="`out` is f16 [40, 64]"),
        "tile_rows": FfiCase(variant={"block": 256}, message="variant block=256 step=64 kv_step=64"),
        "kv_step": FfiCase(variant={"kv_step": 16}, message="kv_step=16: each must be 32, 64 or 128"),
        "block64_warps8": FfiCase(variant={"block": 64, "warps": 8}, message="variant block=64 warps=8: refused"),
        # the two kernels' own steps: accepted
        "split_steps": FfiCase(variant={"block": 128, "step": 64, "kv_step": 32}, code=-4),
        "window_without_causal": FfiCase(lambda: {"causal": 0, "window": 4}, message="window=4 with causal=0"),
        "gqa_group": FfiCase(
            lambda: {"k": f16(1, 3, 8, 64), "v": f16(1, 3, 8, 64)}, message="the key/value heads must divide"
        ),
        # (b, s, h, d) views of q, o and dout, and MQA: accepted
        "bshd_views": FfiCase(lambda: {t: f16(1, 8, 4, 64).transpose(1, 2) for t in ("q", "o", "dout")}, code=-4),
    },
)
