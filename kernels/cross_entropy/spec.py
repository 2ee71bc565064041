"""cross_entropy: what to test and time, and how to judge it (tilekit.runtime.kernel's
declaration). Touches no GPU at import.

Each row's cross-entropy loss of (m, n) logits against (m,) class ids, with ignore_index and label
smoothing ε: lse - (1 - ε) x[t] - (ε / n) sum(x), 0 where the target is ignore_index; (m,) float32.
"""

from __future__ import annotations

import torch

from kernels.cross_entropy import op
from tilekit.runtime.kernel import BadInput, FfiCase, call, generator, row_kernel, shapes, torch_dtype

IGNORE_INDEX = -100
IGNORED_EVERY = 7  # rows 3, 10, 17, ... of every input are ignored (the tests' ignored labels)


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs: logits N(0, 2^2) (in rows of row_stride where the shape has one), targets
    uniform over the n classes (int64, or the shape's `target` dtype) with every IGNORED_EVERY-th row
    from the fourth ignored (the shape's `ignore`: -100 by default), the shape's `smoothing` (0)."""
    g, dt, m, n = generator(device, seed), torch_dtype(cfg["dtype"]), cfg["m"], cfg["n"]
    stride = cfg.get("row_stride", n)
    logits = (2 * torch.randn(m, stride, generator=g, device=device)).to(dt)[:, :n]
    target, ignore = targets(cfg, m, n, g, device)
    return {"logits": logits, "target": target, "ignore_index": ignore, "label_smoothing": cfg.get("smoothing", 0.0)}


def targets(cfg: dict, m: int, n: int, g, device) -> tuple:
    """(target, ignore_index) of m rows over n classes as the tests draw them: uniform from `g`, every
    IGNORED_EVERY-th row from the fourth ignored, ignore_index the shape's `ignore` (-100), the dtype
    its `target` (int64); kernels/fused_linear_cross_entropy/spec.py draws its targets so too."""
    ignore = cfg.get("ignore", IGNORE_INDEX)
    target = torch.randint(0, n, (m,), generator=g, device=device)
    target[3::IGNORED_EVERY] = ignore
    return target.to(torch_dtype(cfg.get("target", "int64"))), ignore


def reference(inputs: dict) -> torch.Tensor:
    """float64 losses of the inputs as given (differentiable in the logits: the gradient test's
    reference)."""
    x, t, ignore, eps = (
        inputs["logits"].double(),
        inputs["target"].long(),
        inputs["ignore_index"],
        inputs["label_smoothing"],
    )
    kept = t != ignore
    picked = x.gather(1, torch.where(kept, t, 0)[:, None])[:, 0]
    loss = torch.logsumexp(x, 1) - (1 - eps) * picked - eps / x.shape[1] * x.sum(1)
    return torch.where(kept, loss, torch.zeros_like(loss))


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: read the logits and the targets once, write a float32 loss per row."""
    m, n = cfg["m"], cfg["n"]
    itemsize = torch.finfo(torch_dtype(cfg["dtype"])).bits // 8
    return m * n * itemsize + m * (torch.iinfo(torch_dtype(cfg.get("target", "int64"))).bits // 8) + 4 * m


SPEC = row_kernel(
    op,
    out_shape=lambda cfg: (cfg["m"],),
    out_dtype="float32",
    input_dtypes=lambda cfg: {"target": cfg.get("target", "int64")},
    options={"target": "t", "smoothing": "ls", "ignore": "ii"},
    # a row tile past m, rows off 16 bytes, padded rows, one column tile and many (uneven), int32
    # targets, ignore_index 0 (a real class), label smoothing, and the vocabularies of Llama-3
    # (128256), Qwen2 (151936) and Gemma-3 (262144)
    correctness_shapes=shapes(
        "m n row_stride target smoothing ignore",
        (1, 1),
        (3, 1000),
        (257, 4097, 4104),
        (64, 16384, 16384, "int32"),
        (33, 4000, 4004, "int64", 0.0, 0),
        (9, 40000, 40000, "int64", 0.1),
        (16, 128256),
        (8, 151936, 151936, "int32", 0.05, 5),
        (4, 262144),
    ),
    # the loss of a training step's tokens over the vocabularies of Llama-3 (4096 tokens), Qwen2 and
    # Gemma-3, and Llama-2/Mistral's 32000; bf16 and f32 logits
    perf_configs=shapes(
        "dtype m n",
        ("bfloat16", 4096, 128256),
        ("float32", 4096, 128256),
        ("bfloat16", 4096, 151936),
        ("bfloat16", 2048, 262144),
        ("bfloat16", 8192, 32000),
    ),
    # the losses of f16/bf16 logits within their dtype's rounding (Liger, TileGym and PyTorch return
    # them in the logits' dtype; the port's float32 ones are held to 1e-5 by tests.py)
    tolerance={"float16": (1e-3, 1e-3), "bfloat16": (4e-3, 4e-3), "float32": (1e-5, 2e-5)},
    # the gradient (cross_entropy_backward's, through autograd) in the logits' dtype: row_kernel's
    backward_tolerance={"float16": (2e-3, 1e-2), "bfloat16": (1.6e-2, 6e-2), "float32": (1e-5, 1e-5)},
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    variant_shapes=shapes("m n dtype", (37, 1000, "float16"), (5, 40000, "bfloat16"), (3, 9000, "float32")),
    bad_inputs={
        "target_shape": BadInput(
            lambda: call(torch.randn(4, 8), torch.zeros(5, dtype=torch.long)), ValueError, "a class id per row"
        ),
        "target_float": BadInput(lambda: call(torch.randn(4, 8), torch.zeros(4)), TypeError, "int32 or int64"),
        "smoothing": BadInput(
            lambda: call(torch.randn(4, 8), torch.zeros(4, dtype=torch.long), -100, 1.5), ValueError, "[0, 1]"
        ),
        "ignore_index": BadInput(
            lambda: call(torch.randn(4, 8), torch.zeros(4, dtype=torch.long), 2**31), ValueError, "fit in int32"
        ),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(5)}, message="contiguous [4] f32"),
        "target_shape": FfiCase(lambda: {"target": torch.zeros(5, dtype=torch.long)}, message="a class per row"),
        "target_dtype": FfiCase(lambda: {"target": torch.zeros(4)}, code=-2, message="i32, i64"),
        "smoothing": FfiCase(lambda: {"label_smoothing": 2.0}, message="[0, 1]"),
        "block_not_pow2": FfiCase(variant={"block": 24}, message="block must be a power of two"),
        "form_2": FfiCase(variant={"form": 2, "rows": 1}, code=-4),  # version 2's entry, valid here
        "form_2_rows": FfiCase(variant={"form": 2, "rows": 2, "block": 16}, message="needs rows=1"),
        "form_3": FfiCase(variant={"form": 3, "rows": 1}, code=-4),  # version 3's entry, valid here
        "form_3_rows": FfiCase(variant={"form": 3, "rows": 2, "block": 16}, message="needs rows=1"),
        "form_4": FfiCase(variant={"form": 4, "rows": 1}, code=-4),  # version 4's entry, valid here
        "form_4_rows": FfiCase(
            variant={"form": 4, "rows": 2, "block": 16}, message="form=4 (rows split) block=16 rows=2"
        ),
        "form_5": FfiCase(variant={"form": 5}, message="variant form=5"),
        "strided_target": FfiCase(lambda: {"target": torch.zeros(8, dtype=torch.long)[::2]}, code=-4),
    },
)
