"""fused_linear_cross_entropy: what to test and time, and how to judge it (tilekit.runtime.kernel's
declaration). Touches no GPU at import.

The gradients of the cross-entropy of the logits h Wᵀ (h (m, H), W (V, H) as nn.Linear stores it)
whose rows each count `scale` ((1,) float32: 1 / the rows counted for a mean, 1 for a sum): with
G = scale (softmax(h Wᵀ) - ε / V - (1 - ε) onehot(t)) per row, 0 where t is ignore_index, dh = G W
and dW = Gᵀ h, stacked into one (m + V, H) tensor in h's dtype.
"""

from __future__ import annotations

import math

import torch

from kernels.cross_entropy import spec as rows_spec
from kernels.fused_linear_cross_entropy import op
from tilekit.runtime.kernel import BadInput, FfiCase, KernelSpec, call, generator, shapes, sweep_grid, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs: h N(0, 1) and W N(0, 1 / H) (logits of unit scale), in rows of
    `h_stride` / `w_stride` where the shape has them; targets as cross_entropy's spec draws them
    (uniform over the V classes, every 7th row from the fourth ignored, the shape's `target` dtype,
    `ignore` and `smoothing`; without its (m, V) logits); scale 1 / the rows counted (a mean's), or 1
    with the shape's `reduction` "sum".

    >>> cfg = {"dtype": "float16", "m": 5, "vocab": 7, "hidden": 4, "h_stride": 6}
    >>> inputs = make_inputs(cfg, device="cpu", seed=1)
    >>> [(k, tuple(v.shape), v.stride()) for k, v in inputs.items() if k in ("h", "weight")], inputs["scale"].item()
    ([('h', (5, 4), (6, 1)), ('weight', (7, 4), (4, 1))], 0.25)
    """
    g, dt = generator(device, seed), torch_dtype(cfg["dtype"])
    m, vocab, hidden = cfg["m"], cfg["vocab"], cfg["hidden"]
    h = torch.randn(m, cfg.get("h_stride", hidden), generator=g, device=device).to(dt)[:, :hidden]
    w = torch.randn(vocab, cfg.get("w_stride", hidden), generator=g, device=device) / math.sqrt(max(hidden, 1))
    target, ignore = rows_spec.targets(cfg, m, vocab, g, device)
    if cfg.get("reduction") == "sum" or target.is_meta:
        scale = torch.ones(1, device=device)
    else:
        scale = torch.full((1,), 1.0 / max(1, int((target != ignore).sum())), device=device)
    return {
        "h": h,
        "weight": w.to(dt)[:, :hidden],
        "target": target,
        "scale": scale,
        "ignore_index": ignore,
        "label_smoothing": cfg.get("smoothing", 0.0),
    }


REFERENCE_ROWS = 1024  # rows of float64 logits at a time (8 GB at 8192 x 128256 at once)


def reference(inputs: dict) -> torch.Tensor:
    """float64 [dh; dW] of the inputs as given, REFERENCE_ROWS rows of logits at a time."""
    h, w = inputs["h"].double(), inputs["weight"].double()
    t, ii, eps = inputs["target"].long(), inputs["ignore_index"], inputs["label_smoothing"]
    (m, hidden), vocab = h.shape, w.shape[0]
    grads = torch.zeros((m + vocab, hidden), dtype=torch.float64, device=h.device)
    for r in range(0, m, REFERENCE_ROWS):
        h_c, t_c = h[r : r + REFERENCE_ROWS], t[r : r + REFERENCE_ROWS]
        x = h_c @ w.t()
        kept = t_c != ii
        onehot = torch.zeros_like(x).scatter_(1, torch.where(kept, t_c, 0)[:, None], 1.0)
        g = (torch.softmax(x, 1) - (1 - eps) * onehot - eps / vocab) * (inputs["scale"].double() * kept)[:, None]
        grads[r : r + len(h_c)] = g @ w
        grads[m:] += g.t() @ h_c
    return grads


def flops(cfg: dict) -> int:
    """The three products, two per multiply-add: logits h Wᵀ, dh = G W, dW = Gᵀ h.

    >>> flops({"m": 4096, "vocab": 128256, "hidden": 4096}) / 1e12
    12.91...
    """
    return 3 * 2 * cfg["m"] * cfg["vocab"] * cfg["hidden"]


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read h, W and the targets once, write dh and dW once (the logits never leave
    the chip in the ideal; they do here, chunk by chunk: NOTES.md)."""
    m, vocab, hidden = cfg["m"], cfg["vocab"], cfg["hidden"]
    itemsize = torch.finfo(torch_dtype(cfg["dtype"])).bits // 8
    target = torch.iinfo(torch_dtype(cfg.get("target", "int64"))).bits // 8
    return 2 * (m + vocab) * hidden * itemsize + m * target + 4


def h16(*shape):
    return torch.randn(*shape, dtype=torch.float16)


def _args(m=4, vocab=16, hidden=8, dtype=torch.float16):
    return (
        torch.randn(m, hidden, dtype=dtype),
        torch.randn(vocab, hidden, dtype=dtype),
        torch.zeros(m, dtype=torch.long),
        torch.ones(1),
    )


SPEC = KernelSpec(
    op=op,
    dims={"m": 1 << 16, "vocab": 1 << 18, "hidden": 1 << 14},
    strides={"h_stride": "ldh", "w_stride": "ldw"},
    options={"target": "t", "smoothing": "ls", "ignore": "ii", "reduction": "r"},
    input_dtypes=lambda cfg: {"target": cfg.get("target", "int64"), "scale": "float32"},
    # one row; a ragged last chunk (the default chunk is 1024 rows: 1500 and 2600 make 2 and 3, the
    # last shorter); odd V and H (no tile multiple); padded rows of h and W; int32 targets,
    # ignore_index a real class, smoothing, a sum; vocabularies of Llama-3 (128256) and Qwen2 (151936)
    # at a few rows; a Llama-sized H. Moderate sizes keep the float64 reference cheap.
    correctness_shapes=shapes(
        "m vocab hidden h_stride w_stride target smoothing ignore reduction",
        (1, 1000, 64),
        (17, 1000, 72),
        (257, 4097, 136, 144, 144),
        (1500, 5000, 128, 128, 128, "int32", 0.0, -100, "sum"),
        (33, 40000, 96, 96, 96, "int64", 0.1),
        (2600, 3001, 256, 256, 256, "int64", 0.0, 0),
        (16, 128256, 64),
        (8, 151936, 128, 128, 128, "int32", 0.05, 5, "sum"),
        (64, 32000, 4096),
    ),
    # a training step's LM head (and loss) over the vocabularies of Llama-3 (4096 tokens, H 4096),
    # Qwen2-7B (H 3584, V 151936), Gemma-3 (V 262144, H 2560 at 2048 tokens) and Llama-2/Mistral's 32000
    perf_configs=shapes(
        "dtype m vocab hidden",
        ("bfloat16", 4096, 128256, 4096),
        ("bfloat16", 8192, 128256, 4096),
        ("bfloat16", 4096, 151936, 3584),
        ("bfloat16", 2048, 262144, 2560),
        ("bfloat16", 8192, 32000, 4096),
        ("float16", 4096, 128256, 4096),
    ),
    tolerance={"bfloat16": (1.6e-2, 6e-2), "float16": (4e-3, 2e-2)},
    # dh and dW judged apart: dh is 2-10 % of the stacked norm on these shapes
    out_blocks=lambda cfg: {"dh": (0, cfg["m"]), "dW": (cfg["m"], cfg["m"] + cfg["vocab"])},
    # dW's elements are sums over the m rows and dh's over the V classes: judged against the RMS scale
    max_error_scale="rms",
    make_inputs=make_inputs,
    reference=reference,
    out_shape=lambda cfg: (cfg["m"] + cfg["vocab"], cfg["hidden"]),
    bytes_moved=bytes_moved,
    flops=flops,
    perf_id_sep="x",
    # one chunk of 512 rows (odd V, H); three chunks of 1024 with a short last; V past 4096 (version 2's tiles)
    variant_shapes=shapes(
        "m vocab hidden dtype", (300, 1000, 72, "bfloat16"), (2100, 5003, 64, "float16"), (40, 9000, 64, "bfloat16")
    ),
    # make sweep: a training step's tokens (one to eight chunks of 1024) over the vocabularies of
    # GPT-2 (50257), Llama-2, Llama-3, Qwen2 and Gemma-3 and the hidden sizes of small to 8B models
    sweep=sweep_grid(
        quick=dict(
            dtype=("bfloat16",), m=(1024, 4096, 8192), vocab=(32000, 128256, 151936, 262144), hidden=(2048, 4096)
        ),
        full=dict(
            dtype=op.DTYPES,
            m=(512, 1024, 2048, 4096, 8192),
            vocab=(32000, 50257, 128256, 151936, 262144),
            hidden=(1024, 2048, 3584, 4096),
        ),
    ),
    size_check=lambda **dims: op.check_sizes("fused_linear_cross_entropy", **dims),
    autotune_edges=shapes("m vocab hidden", (1, 1, 1), (65536, 262144, 8191), (4096, 262144, 8192)),
    bad_inputs={
        "weight_width": BadInput(
            lambda: call(h16(4, 8), h16(16, 7), torch.zeros(4, dtype=torch.long), torch.ones(1)),
            ValueError,
            "(V, H) with H = 8",
        ),
        "scale_shape": BadInput(
            lambda: call(*_args()[:3], torch.ones(4)), ValueError, "scale must be float32 of shape (1,)"
        ),
        "float32": BadInput(lambda: call(*_args(dtype=torch.float32)), TypeError, "float16"),
        "target_shape": BadInput(
            lambda: call(*_args()[:2], torch.zeros(5, dtype=torch.long), torch.ones(1)), ValueError, "(4,)"
        ),
        "no_classes": BadInput(
            lambda: call(h16(4, 8), h16(0, 8), torch.zeros(4, dtype=torch.long), torch.ones(1)),
            ValueError,
            "no classes",
        ),
    },
    ffi_example={"m": 4, "vocab": 16, "hidden": 8, "dtype": "float16"},
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": h16(19, 8)}, message="(m + V, H) = (20, 8)"),
        "weight_width": FfiCase(lambda: {"weight": h16(16, 4)}, message="(V, H) with H = 8"),
        "scale_shape": FfiCase(lambda: {"scale": torch.ones(4)}, message="it must be (1,)"),
        "chunk": FfiCase(variant={"chunk": 0}, message="chunk=0"),
        "tile_not_pow2": FfiCase(variant={"mma_bm": 96}, message="bm=96"),
        "form": FfiCase(variant={"form": 5}, message="form=5"),
        # padded rows of h and W, and a 2-row chunk: accepted, so the call reaches device set-up
        "padded_rows": FfiCase(
            lambda: {"h": h16(4, 12)[:, :8], "weight": h16(16, 10)[:, :8]}, variant={"chunk": 2}, code=-4
        ),
    },
)
