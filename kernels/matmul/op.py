"""matmul, the cuTile Rust port: C = A @ B in f16 or bf16 with f32 accumulation.

    c = matmul(a, b, variant="auto", out=None)   # a: (m, k), b: (k, n) CUDA f16/bf16
    y = matmul(x, w.t())                         # an nn.Linear weight w (n, k): read in place
    matmul_acc_(c, a, b)                         # c += a @ b in place (cuBLAS's beta = 1)

a and b are each row-major (last dim contiguous, any row stride) or column-major (the .t() of a
row-major matrix): tilekit.runtime.mma.layout reads which from the strides, as ffi.rs does.

`cutile_matmul` (kernels/matmul/ffi.rs) called through tilekit.runtime.port; `out` may be a column slice of
a wider buffer. `variant`: "auto" the autotuned candidate of `variants` for this GPU, dtype and shape
class, "default" the defaults (ffi_util::MmaVariant), a dict {"bm", "bn", "bk", "group", "persistent", "occupancy", "cga"}
and optionally "splits" (split-K, ffi.rs).
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import checks, mma, ops, port

# op.py's contract names (tilekit.runtime.kernel) that the GEMM family shares: dtypes, the problem class
# (tune_key(dtype, m, n, k, *, a_t, b_t)); matmul adds the split-K knob to its knobs and candidates
from tilekit.runtime.mma import DTYPES, tune_key  # noqa: F401

CDEF = """
int32_t cutile_matmul(const TensorDesc* c, const TensorDesc* a, const TensorDesc* b,
                      int32_t bm, int32_t bn, int32_t bk, int32_t group, int32_t programs,
                      int32_t occupancy, int32_t num_cta_in_cga, int32_t splits,
                      int32_t device_id, uint64_t stream);
int32_t cutile_matmul_acc(const TensorDesc* c, const TensorDesc* a, const TensorDesc* b,
                          int32_t bm, int32_t bn, int32_t bk, int32_t group, int32_t programs,
                          int32_t occupancy, int32_t num_cta_in_cga, int32_t splits,
                          int32_t device_id, uint64_t stream);
"""

DEFAULT_VARIANT = mma.DEFAULT_VARIANT | {"splits": -1}  # -1: no split (ffi.rs split_k)


def export_args(bm, bn, bk, group, persistent, occupancy, cga, splits=-1, *, sms: int) -> tuple[int, ...]:
    """The GEMM family's knobs (tilekit.runtime.mma.export_args), then `splits` (split-K; -1 or 1: none)."""
    return (*mma.export_args(bm, bn, bk, group, persistent, occupancy, cga, sms=sms), int(splits))


# Candidates (bm, bn, splits) at 128-deep K steps, occupancy 2, for products with few output tiles:
# the fastest of the H200 split sweep at 32-64 x 4096 x 4096 (kernels/matmul/NOTES.md, "Split-K"),
# 4 splits for longer K, and the 64 x 32 tile unsplit (256 tile blocks at 128 x 4096: "Load latency
# hints" there).
SPLITS = ((64, 32, 1), (64, 32, 2), (32, 64, 2), (64, 64, 2), (64, 64, 4))
# And (bm, bn, splits) at 64-deep K steps, occupancy 2, for few-tile products past m = 64 with K past
# 8192 (a down projection, K = 14336, at 128-512 tokens): two or three splits of the 64 x 128 tile,
# two of 128 x 128 (kernels/matmul/NOTES.md, "Llama-3-8B's products").
LONG_K_SPLITS = ((64, 128, 2), (64, 128, 3), (128, 128, 2))


def variants(m: int, n: int, k: int) -> list[dict]:
    """tilekit.runtime.mma.variants; for decode sizes (m <= 64) and products of up to 128 rows with fewer
    128 x 128 output tiles than SMs (m = 128 x n = 4096: 32) also split-K, which gives a 64 x 4096 x 4096
    product 256 tile blocks instead of 64-128 (kernels/matmul/NOTES.md, "Split-K"):

    >>> [(v["bm"], v["bn"], v["splits"]) for v in variants(64, 4096, 4096)][-2:], {v["splits"] for v in variants(4096, 4096, 4096)}
    ([(64, 64, 2), (64, 64, 4)], {1})
    >>> [(v["bm"], v["bn"], v["splits"]) for v in variants(128, 4096, 4096)][3:6], len(variants(128, 14336, 4096))
    ([(64, 64, 1), (64, 32, 1), (64, 32, 2)], 9)

    Past 128 rows the decode splits lose to the unsplit 64 x 128 tile (an H100 sweep at m = 256); past
    K = 8192 the few-tile list gets split 64 x 128 and 128 x 128 tiles:

    >>> [(v["bm"], v["bn"], v["bk"], v["splits"]) for v in variants(256, 4096, 14336)][4:]
    [(64, 128, 64, 2), (64, 128, 64, 3), (128, 128, 64, 2)]
    >>> len(variants(256, 6144, 4096)), len(variants(128, 4096, 14336))
    (4, 12)
    """
    found = [v | {"splits": 1} for v in mma.variants(m, n, k)]
    few_tiles = -(-m // 128) * -(-n // 128) < mma.H200_SMS
    split = SPLITS if m <= 64 or (few_tiles and m <= 128) else ()
    found += [mma.variant(bm, bn, 128, occupancy=2) | {"splits": s} for bm, bn, s in split]
    long_k = LONG_K_SPLITS if m > 64 and few_tiles and k > 8192 else ()
    return found + [mma.variant(bm, bn, 64, occupancy=2) | {"splits": s} for bm, bn, s in long_k]


@port.entry(layouts={"a": "(m, k)", "b": "(k, n)"})
def matmul(a: Tensor, b: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """C = A @ B; ValueError/TypeError on bad input, ffi.KernelError on a failed call. A product past
    i32 indexing is refused from the shapes alone, before autotune could try (and fail) every candidate:

    >>> a, b = (torch.empty(s, dtype=torch.bfloat16, device="meta") for s in ((16384, 4096), (4096, 151936)))
    >>> matmul(a, b)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: matmul: c spans 2489319424 elements for m=16384, ...
    """
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a must be (m, k) and b (k, n), got {tuple(a.shape)} and {tuple(b.shape)}")
    checks.dtypes("matmul", DTYPES, a=a, b=b)
    (m, k), n = a.shape, b.shape[1]
    a_t, b_t = mma.layout("matmul", "a", a), mma.layout("matmul", "b", b)
    checks.out_matches("matmul", out, (m, n), a)
    if out is not None:
        checks.contiguous_last_dim("matmul", out=out)  # ffi.rs: c's last dim has stride 1, even of one column
    mma.check_index_range("matmul", {"m": m, "n": n, "k": k}, a=a, b=b, c=out)
    checks.cuda("matmul", a=a, b=b)
    c = out if out is not None else torch.empty((m, n), dtype=a.dtype, device=a.device)
    if k == 0:
        return c.zero_()  # an empty sum
    port.run(__name__, variant, (m, n, k), c, a, b, key=lambda: tune_key(str(a.dtype)[6:], m, n, k, a_t=a_t, b_t=b_t))
    return c


# The gradients (issue 43): matmul on transposed views of the saved operands (tilekit.runtime.mma.backward).
ops.register_backward("matmul", mma.backward(matmul.op))


# -- C += A @ B in place: a weight's gradient summed over chunks of tokens ------------------------------


def _check_acc(c: Tensor, a: Tensor, b: Tensor) -> tuple[int, int, int, bool, bool]:
    """matmul_acc_'s checks, on real and fake tensors; (m, n, k, a_t, b_t)."""
    for name, t in (("c", c), ("a", a), ("b", b)):
        if not isinstance(t, Tensor) or t.dim() != 2:
            raise ValueError(f"matmul_acc_: {name} must be a 2-D tensor, got {getattr(t, 'shape', type(t).__name__)}")
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k or tuple(c.shape) != (m, n):
        raise ValueError(
            f"matmul_acc_: c must be (m, n), a (m, k) and b (k, n), got {tuple(c.shape)}, {tuple(a.shape)} and "
            f"{tuple(b.shape)}"
        )
    checks.dtypes("matmul_acc_", DTYPES, c=c, a=a, b=b)
    a_t, b_t = mma.layout("matmul_acc_", "a", a), mma.layout("matmul_acc_", "b", b)
    checks.contiguous_last_dim("matmul_acc_", c=c)
    for name, t in (("a", a), ("b", b)):
        if checks.overlap(c, t) != "none":
            raise ValueError(f"matmul_acc_: c and {name} share memory; c is written while {name} is read")
    mma.check_index_range("matmul_acc_", {"m": m, "n": n, "k": k}, a=a, b=b, c=c)
    return m, n, k, a_t, b_t


def _acc_in_place(c: Tensor, a: Tensor, b: Tensor, variant: str | dict = "auto") -> None:
    """The in-place op's implementation: c += a @ b (matmul_acc_ without the grad check)."""
    m, n, k, a_t, b_t = _check_acc(c, a, b)
    if port.is_fake(c):
        return
    checks.cuda("matmul_acc_", c=c, a=a, b=b)
    if k == 0:  # an empty sum adds nothing
        return
    key = tune_key(str(a.dtype)[6:], m, n, k, a_t=a_t, b_t=b_t) | {"acc": True}
    # mutated=(c,): the export reads c, so autotune's candidates accumulate into a copy (port.tuning_tensors)
    port.run(__name__, variant, (m, n, k), c, a, b, key=lambda: key, export="cutile_matmul_acc", mutated=(c,))


def _acc_fake(c: Tensor, a: Tensor, b: Tensor) -> None:
    """The in-place op on fake tensors (torch.compile's tracing): the checks alone."""
    _check_acc(c, a, b)


ops.define_in_place("matmul_acc_", _acc_in_place, _acc_fake, "(Tensor(a!) c, Tensor a, Tensor b) -> ()", ("c",))


def matmul_acc_(c: Tensor, a: Tensor, b: Tensor, *, variant: str | dict = "auto") -> Tensor:
    """In place: c += a @ b (f32 sums, one rounding: c's tile read and added before the store; cuBLAS's
    beta = 1, torch's c.addmm_(a, b)); returns c. The op torch.ops.tilekit.matmul_acc_ (which
    torch.compile keeps whole, with variant "auto"); no gradient: ValueError where an input requires
    grad. c (m, n) must share no memory with a (m, k) or b (k, n); a and b row- or column-major and
    `variant` as for matmul (autotune's candidates add into a copy of c: c is added to once).

    >>> c, a, b = (torch.empty(s, dtype=torch.bfloat16, device="meta") for s in ((4, 8), (4, 2), (2, 8)))
    >>> matmul_acc_(c, a, c[:2])
    Traceback (most recent call last):
    ValueError: matmul_acc_: c and b share memory; c is written while b is read
    """
    if torch.is_grad_enabled() and any(t.requires_grad for t in (c, a, b)):
        raise ValueError("matmul_acc_: in place, without a gradient; an input requires grad: use c + matmul(a, b)")
    if torch.compiler.is_compiling():
        torch.ops.tilekit.matmul_acc_(c, a, b)
    else:
        _acc_in_place(c, a, b, variant)
    return c
