"""rope: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel describes;
its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU at import.

Per token and head of q (b, s, hq, d) and k (b, s, hk, d): y = (x1 c - x2 s, x2 c + x1 s) with (c, s)
the first d/2 columns of the token's cos/sin row; the one output is q's heads then k's, in q's layout
(kernels/rope/op.py). A config's options: `heads_first` (q and k as the (b, h, s, d) views of
(b, s, h, d) memory a Hugging Face model holds), `qkv` (q and k slices of one fused projection
output, (b, s, hq + 2 hk, d)), `positions` (a table of s + 1000 rows and random position ids per
sequence: decode at any position), `f32_table`, `half_table` (vLLM's d/2-wide table), `per_batch`
(one table per sequence, Hugging Face's (b, s, d)).
"""

from __future__ import annotations

import torch

from kernels.rope import op
from tilekit.runtime.kernel import BadInput, FfiCase, KernelSpec, call, generator, shapes, sweep_grid, torch_dtype

THETA = 500000.0  # Llama-3's rope base
EXTRA_ROWS = 1000  # a positions config's table: s + this many rows


def tables(rows: int, d: int, device, dtype, half: bool = False, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama's (rows, d) cos and sin tables of positions start, start + 1, ... (the frequencies twice,
    as Hugging Face builds them), or their (rows, d/2) first halves (vLLM's)."""
    inv_freq = 1.0 / THETA ** (torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)
    angles = torch.arange(start, start + rows, device=device, dtype=torch.float64)[:, None] * inv_freq[None, :]
    if not half:
        angles = torch.cat((angles, angles), -1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random q and k ~ N(0, 1) in the config's layout, Llama-3's cos/sin tables (float32 or
    the dtype; from position 1: position 0's sin is all zeros, which would test half the formula
    there), position ids where the config has them (random rows of a longer table)."""
    g = generator(device, seed)
    dt = torch_dtype(cfg["dtype"])
    b, s, hq, hk, d = (cfg[k] for k in ("b", "s", "hq", "hk", "d"))
    if cfg.get("qkv"):
        qkv = torch.randn(b, s, hq + 2 * hk, d, generator=g, device=device).to(dt)
        q, k = qkv[:, :, :hq], qkv[:, :, hq : hq + hk]
    else:
        q = torch.randn(b, s, hq, d, generator=g, device=device).to(dt)
        k = torch.randn(b, s, hk, d, generator=g, device=device).to(dt)
    if cfg.get("heads_first"):
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    table_dtype = torch.float32 if cfg.get("f32_table") else dt
    positions = None
    if cfg.get("positions"):
        cos, sin = tables(s + EXTRA_ROWS, d, device, table_dtype, cfg.get("half_table", False), start=1)
        high = torch.randint(0, EXTRA_ROWS, (b, 1), generator=g, device=device)
        positions = high + torch.arange(s, device=device)[None, :]  # each sequence from its own offset
    else:
        cos, sin = tables(s, d, device, table_dtype, cfg.get("half_table", False), start=1)
        if cfg.get("per_batch"):
            shift = torch.randn(b, 1, 1, generator=g, device=device)  # per-sequence tables, not one repeated
            cos, sin = ((t.float()[None] + 0.01 * shift).to(table_dtype) for t in (cos, sin))
    return {
        "q": q,
        "k": k,
        "cos": cos,
        "sin": sin,
        "position_ids": positions,
        "heads_first": bool(cfg.get("heads_first")),
    }


def reference(inputs: dict) -> torch.Tensor:
    """float64: Hugging Face's q * cos + rotate_half(q) * sin (and k's), with the tables' first halves
    twice, the rows looked up by position, the heads joined in q's layout."""
    q, k, cos, sin, ids, heads_first = inputs.values()
    q, k = (t.transpose(1, 2) if heads_first else t for t in (q, k))  # (b, s, h, d)
    b, s, _, d = q.shape
    half = d // 2
    c, sn = ((t if t.dim() == 3 else t[None]).double()[..., :half] for t in (cos, sin))
    rows = torch.arange(s, device=q.device)[None, :].expand(b, s) if ids is None else ids.expand(b, s)
    batch = (
        torch.arange(b, device=q.device)[:, None]
        if c.shape[0] > 1
        else torch.zeros(b, 1, dtype=torch.long, device=q.device)
    )
    c, sn = (t[batch, rows][:, :, None, :] for t in (c, sn))  # (b, s, 1, d/2)
    x = torch.cat((q, k), 2).double()
    x1, x2 = x[..., :half], x[..., half:]
    y = torch.cat((x1 * c - x2 * sn, x2 * c + x1 * sn), -1)
    return y.transpose(1, 2) if heads_first else y


def out_shape(cfg: dict) -> tuple:
    heads = cfg["hq"] + cfg["hk"]
    if cfg.get("heads_first"):
        return (cfg["b"], heads, cfg["s"], cfg["d"])
    return (cfg["b"], cfg["s"], heads, cfg["d"])


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: q and k read once, the output written once, and the table rows the tokens use
    read once (the first d/2 columns of cos and sin; one row per position of each table)."""
    size = torch.finfo(torch_dtype(cfg["dtype"])).bits // 8
    table_size = 4 if cfg.get("f32_table") else size
    b, s, heads, d = cfg["b"], cfg["s"], cfg["hq"] + cfg["hk"], cfg["d"]
    tables_used = b if cfg.get("positions") or cfg.get("per_batch") else 1
    return 2 * b * s * heads * d * size + tables_used * s * d * table_size


def _qk(hq=4, hk=2, d=8, **dtypes):
    def make():
        q = torch.randn(2, 3, hq, d, dtype=dtypes.get("q", torch.float32))
        k = torch.randn(2, 3, hk, d, dtype=dtypes.get("k", torch.float32))
        cos, sin = tables(16, d, "cpu", dtypes.get("cos", torch.float32))
        return call(q, k, cos, sin, dtypes.get("ids"))

    return make


SPEC = KernelSpec(
    op=op,
    dims={"b": 1 << 10, "s": 1 << 17, "hq": op.MAX_HEADS, "hk": op.MAX_HEADS, "d": op.MAX_HEAD_DIM},
    options={
        "heads_first": "-hf",
        "qkv": "-qkv",
        "positions": "-pos",
        "f32_table": "-f32tab",
        "half_table": "-halftab",
        "per_batch": "-perbatch",
    },
    perf_id_sep="x",
    # one token; odd head counts, MQA and an odd token count; GQA in a model's transposed layout;
    # q and k slices of a fused projection; decode positions past the table's start with a vLLM
    # half-width float32 table; per-sequence tables; d = 64 and 256; a long prefill
    correctness_shapes=shapes("b s hq hk d", (1, 1, 1, 1, 2), (3, 17, 5, 1, 80))
    + shapes("b s hq hk d heads_first", (2, 300, 32, 8, 128, 1))
    + shapes("b s hq hk d qkv", (2, 129, 28, 4, 128, 1))
    + shapes("b s hq hk d positions half_table f32_table", (7, 1, 32, 8, 128, 1, 1, 1))
    + shapes("b s hq hk d positions heads_first", (4, 33, 16, 16, 64, 1, 1))
    + shapes("b s hq hk d per_batch", (3, 100, 8, 2, 256, 1))
    + shapes("b s hq hk d heads_first", (1, 8192, 64, 8, 128, 1)),
    # Hugging Face's layout (q, k as (b, h, s, d) views of the projections' (b, s, h, d)): Llama-3-8B
    # prefill and training batches, Llama-3-70B's and Qwen2-7B's heads, a d = 64 model; decode steps
    # (batch 1, 64, 256) at their positions in a full-width bf16 cos/sin cache, the lookup vLLM and
    # FlashInfer make (the port looks the rows up; the baselines take them gathered,
    # baselines.per_token, so they do one dependent load less)
    perf_configs=shapes(
        "dtype b s hq hk d heads_first",
        ("bfloat16", 1, 4096, 32, 8, 128, 1),
        ("bfloat16", 4, 4096, 32, 8, 128, 1),
        ("bfloat16", 8, 2048, 64, 8, 128, 1),
        ("bfloat16", 4, 4096, 28, 4, 128, 1),
        ("bfloat16", 16, 1024, 64, 8, 64, 1),
        ("float16", 4, 4096, 32, 8, 128, 1),
    )
    + shapes(
        "dtype b s hq hk d positions",
        ("bfloat16", 1, 1, 32, 8, 128, 1),
        ("bfloat16", 64, 1, 32, 8, 128, 1),
        ("bfloat16", 256, 1, 32, 8, 128, 1),
    )
    # the same decode steps as a Hugging Face model makes them: its rotary module's per-token tables
    # (b, 1, d), which is what tilekit.runtime.modules' swap hands the port (NOTES.md, "Decode")
    + shapes(
        "dtype b s hq hk d per_batch heads_first",
        ("bfloat16", 1, 1, 32, 8, 128, 1, 1),
        ("bfloat16", 64, 1, 32, 8, 128, 1, 1),
        ("bfloat16", 256, 1, 32, 8, 128, 1, 1),
    ),
    # make sweep: decode steps to long prefills, Llama's 32/8 and 70B's 64/8 heads, MQA and MHA-like
    # counts, d 64 and 128, both layouts (quick: bf16 Llama heads)
    sweep=sweep_grid(
        quick=dict(
            dtype=("bfloat16",), b=(1, 4), s=(1, 1024, 4096), hq=(32, 64), hk=(8,), d=(128,), heads_first=(None, 1)
        ),
        full=dict(
            dtype=("bfloat16", "float16"),
            b=(1, 4, 16),
            s=(1, 512, 4096),
            hq=(8, 32, 64),
            hk=(1, 8),
            d=(64, 128),
            heads_first=(None, 1),
        ),
        keep=lambda cfg: cfg["b"] * cfg["s"] <= 16384,
    ),
    tolerance={"float16": (2e-3, 1e-2), "bfloat16": (1.6e-2, 6e-2), "float32": (1e-5, 1e-5)},
    make_inputs=make_inputs,
    constant_inputs=("cos", "sin"),  # a model's rotary tables: no gradient (rope_backward's op refuses one)
    input_dtypes=lambda cfg: (
        {"position_ids": "int64"} | ({"cos": "float32", "sin": "float32"} if cfg.get("f32_table") else {})
    ),
    reference=reference,
    out_shape=out_shape,
    bytes_moved=bytes_moved,
    # (2, 9, 12, 6, 64): k's 6 heads in two tile blocks of 4 under heads 4, the last one half empty
    variant_shapes=shapes(
        "b s hq hk d dtype",
        (3, 17, 5, 1, 80, "float16"),
        (2, 64, 32, 8, 128, "bfloat16"),
        (2, 9, 12, 6, 64, "bfloat16"),
    )
    + shapes("b s hq hk d positions dtype", (8, 1, 64, 8, 64, 1, "float32")),
    size_check=op.check_size,
    autotune_edges=shapes("b s hq hk d", (1, 1, 1, 1, 2), (1, 1, 256, 256, 512), (1024, 131072, 8, 8, 2)),
    ffi_example={"b": 2, "s": 3, "hq": 4, "hk": 2, "d": 8, "dtype": "float32"},
    bad_inputs={
        "dtype_mix": BadInput(_qk(k=torch.float16), TypeError, "share one dtype"),
        "odd_head_dim": BadInput(_qk(d=7), ValueError, "must be even"),
        "table_dtype": BadInput(_qk(cos=torch.float16), TypeError, "cos and sin must be q's dtype"),
        "short_table": BadInput(
            lambda: call(torch.randn(1, 40, 2, 8), torch.randn(1, 40, 1, 8), *tables(16, 8, "cpu", torch.float32)),
            ValueError,
            "pass position_ids",
        ),
        "float_ids": BadInput(_qk(ids=torch.zeros(3)), TypeError, "position_ids must be an int32 or int64 tensor"),
        "ids_shape": BadInput(_qk(ids=torch.zeros(4, dtype=torch.long)), ValueError, "position_ids must be (s,)"),
        "k_tokens": BadInput(
            lambda: call(torch.randn(2, 3, 4, 8), torch.randn(2, 4, 2, 8), *tables(16, 8, "cpu", torch.float32)),
            ValueError,
            "q and k must share b, s and d",
        ),
        "table_width": BadInput(
            lambda: call(torch.randn(2, 3, 4, 8), torch.randn(2, 3, 2, 8), torch.randn(16, 6), torch.randn(16, 6)),
            ValueError,
            "w = d = 8 or d/2 = 4",
        ),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(2, 3, 5, 8)}, message="it must be [2, 3, 6, 8]"),
        "out_overlap": FfiCase(
            lambda: {"out": torch.empty(400).as_strided((2, 3, 6, 8), (48, 8, 8, 1))}, message="would overlap"
        ),
        "k_shape": FfiCase(lambda: {"k": torch.randn(2, 4, 2, 8)}, message="it must be [2, 3, hk, 8]"),
        "table_rows": FfiCase(
            lambda: {"cos": torch.randn(1, 2, 8), "sin": torch.randn(1, 2, 8)}, message="pass position ids"
        ),
        "table_dtype": FfiCase(
            lambda: {"cos": torch.ones(1, 16, 8, dtype=torch.int32), "sin": torch.ones(1, 16, 8, dtype=torch.int32)},
            code=-2,
            message="cos is i32; rope supports f32, f16, bf16",
        ),
        "bad_warps": FfiCase(variant={"warps": 6}, message="warps"),
        "bad_heads": FfiCase(variant={"heads": 3}, message="heads per tile block must be -1"),
    },
)
