"""cross_entropy_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's
declaration). Touches no GPU at import.

The gradient of cross_entropy's per-row losses of (m, n) logits for their gradient dloss ((m,) or
(1,) float32): per row dloss (softmax(x) - ε / n - (1 - ε) onehot(t)), 0 where t is ignore_index;
(m, n) in the logits' dtype. A config's `dloss` option "mean" gives one dloss for every row, 1 / the
rows counted: the gradient of a mean loss, what a training step asks for.
"""

from __future__ import annotations

import torch

from kernels.cross_entropy import spec as forward
from kernels.cross_entropy_backward import op
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, row_kernel, shapes, torch_dtype


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """cross_entropy's inputs (kernels/cross_entropy/spec.py) and dloss: N(0, 1) per row, or with
    the `dloss` option "mean" 1 / (rows not ignored) for every row, (1,)."""
    inputs = forward.make_inputs(cfg, device=device, seed=seed)
    m = cfg["m"]
    if cfg.get("dloss") == "mean":
        ignored = inputs["target"] == inputs["ignore_index"]
        counted = m if ignored.is_meta else max(1, m - int(ignored.sum()))  # meta: the declaration's checks
        dloss = torch.full((1,), 1.0 / counted, device=device)
    else:
        g = generator(device, None if seed is None else seed + 1)
        dloss = torch.randn(m, generator=g, device=device)
    logits, target, ignore_index, label_smoothing = inputs.values()
    return {
        "logits": logits,
        "target": target,
        "dloss": dloss,
        "ignore_index": ignore_index,
        "label_smoothing": label_smoothing,
    }


def reference(inputs: dict) -> torch.Tensor:
    """float64 gradient of the inputs as given."""
    x, t, ii, eps = (
        inputs["logits"].double(),
        inputs["target"].long(),
        inputs["ignore_index"],
        inputs["label_smoothing"],
    )
    m, n = x.shape
    kept = t != ii
    onehot = torch.zeros_like(x).scatter_(1, torch.where(kept, t, 0)[:, None], 1.0)
    g = inputs["dloss"].double().expand(m) * kept
    return (torch.softmax(x, 1) - (1 - eps) * onehot - eps / n) * g[:, None]


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read the logits once and write the gradient once (the issue's count for the
    loss and gradient of a training step), plus the targets and dloss."""
    m, n = cfg["m"], cfg["n"]
    itemsize = torch.finfo(torch_dtype(cfg["dtype"])).bits // 8
    target = torch.iinfo(torch_dtype(cfg.get("target", "int64"))).bits // 8
    return 2 * m * n * itemsize + m * target + 4 * (1 if cfg.get("dloss") == "mean" else m)


SPEC = row_kernel(
    op,
    options={"target": "t", "smoothing": "ls", "ignore": "ii", "dloss": "d"},
    input_dtypes=lambda cfg: {"target": cfg.get("target", "int64"), "dloss": "float32"},
    # cross_entropy's shapes (kernels/cross_entropy/spec.py: ragged tiles, padded rows, int32 targets,
    # ignore_index a real class, smoothing, vocabularies), with one dloss for every row on some
    correctness_shapes=shapes(
        "m n row_stride target smoothing ignore dloss",
        (1, 1),
        (3, 1000),
        (257, 4097, 4104),
        (64, 16384, 16384, "int32", 0.0, -100, "mean"),
        (33, 4000, 4004, "int64", 0.0, 0),
        (9, 40000, 40000, "int64", 0.1, -100, "mean"),
        (16, 128256),
        (8, 151936, 151936, "int32", 0.05, 5),
        (4, 262144, 262144, "int64", 0.0, -100, "mean"),
    ),
    # a training step's loss gradient (a mean) over the vocabularies of Llama-3, Qwen2, Gemma-3 and
    # Llama-2/Mistral; bf16 and f32 logits
    perf_configs=shapes(
        "dtype m n dloss",
        ("bfloat16", 4096, 128256, "mean"),
        ("float32", 4096, 128256, "mean"),
        ("bfloat16", 4096, 151936, "mean"),
        ("bfloat16", 2048, 262144, "mean"),
        ("bfloat16", 8192, 32000, "mean"),
    ),
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    # (300 x 24577: 1200 tickets, 672 past version 4's lag of 528 on an H200 (936 past 264), so its
    # tile blocks both sum a chunk and store one, over ragged, unaligned rows)
    variant_shapes=shapes(
        "m n dtype", (37, 1000, "float16"), (5, 40000, "bfloat16"), (3, 9000, "float32"), (300, 24577, "bfloat16")
    ),
    bad_inputs={
        "dloss_shape": BadInput(
            lambda: call(torch.randn(4, 8), torch.zeros(4, dtype=torch.long), torch.zeros(3)), ValueError, "(4,)"
        ),
        "dloss_dtype": BadInput(
            lambda: call(torch.randn(4, 8), torch.zeros(4, dtype=torch.long), torch.zeros(4).half()),
            ValueError,
            "float32",
        ),
        "target_shape": BadInput(
            lambda: call(torch.randn(4, 8), torch.zeros(5, dtype=torch.long), torch.zeros(4)), ValueError, "per row"
        ),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 7)}, message="shape"),
        "dloss_len": FfiCase(lambda: {"dloss": torch.zeros(3)}, message="1 or m=4"),
        "one_dloss": FfiCase(lambda: {"dloss": torch.zeros(1)}, code=-4),
        "block_not_pow2": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        "form_3": FfiCase(variant={"form": 3, "rows": 1}, code=-4),  # version 3's entry, valid here
        "form_4": FfiCase(variant={"form": 4, "rows": 1}, code=-4),  # version 4's, valid here
    },
)
