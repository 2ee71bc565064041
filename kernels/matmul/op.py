"""matmul, the cuTile Rust port: C = A @ B in f16 or bf16 with f32 accumulation.

    c = matmul(a, b, variant="auto", out=None)   # a: (m, k), b: (k, n) CUDA f16/bf16
    y = matmul(x, w.t())                         # an nn.Linear weight w (n, k): read in place

a and b are each row-major (last dim contiguous, any row stride) or column-major (the .t() of a
row-major matrix): `layout` reads which from the strides, as ffi.rs does.

`cutile_matmul` (kernels/matmul/ffi.rs) called through tilekit.port; `out` may be a column slice of
a wider buffer. `variant`: "auto" the autotuned candidate of `variants` for this GPU, dtype and shape
class, "default" the defaults (ffi_util::MmaVariant), a dict {"bm", "bn", "bk", "group", "persistent", "occupancy", "cga"}.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit import autotune, checks, port

# op.py's contract names (tilekit.kernel) that the GEMM family shares: dtypes, knobs, candidates
from tilekit.mma import DEFAULT_VARIANT, DTYPES, INDEX_LIMIT, export_args, variants  # noqa: F401

CDEF = """
int32_t cutile_matmul(const TensorDesc* c, const TensorDesc* a, const TensorDesc* b,
                      int32_t bm, int32_t bn, int32_t bk, int32_t group, int32_t programs,
                      int32_t occupancy, int32_t num_cta_in_cga,
                      int32_t device_id, uint64_t stream);
"""


def check_index_range(m, n, k, lda=None, ldb=None, ldc=None, *, a_t: bool = False, b_t: bool = False):
    """ValueError unless every operand (a (m, k), b (k, n), c (m, n); row strides default to the column
    counts; a column-major one, a_t / b_t, as the matrix it is the .t() of) spans at most INDEX_LIMIT
    elements, as ffi.rs enforces (-6). Pure: it runs before autotune,
    and on the CPU for any size. A column slice spans (rows - 1) * stride + cols elements:

    >>> check_index_range(1, 1 << 30, 1, ldc=1 << 31)
    >>> check_index_range(2, 8, 8, lda=(1 << 31) - 8)
    Traceback (most recent call last):
    ValueError: matmul: a (2 x 8, row stride 2147483640) spans 2147483648 elements for m=2, n=8, k=8; the kernel indexes each operand with i32 (at most 2147483647 elements): split the product into smaller blocks

    The entry refuses such a product from the shapes alone (meta tensors: nothing is allocated),
    before autotune could try (and fail) every candidate:

    >>> a, b = (torch.empty(s, dtype=torch.bfloat16, device="meta") for s in ((16384, 4096), (4096, 151936)))
    >>> matmul(a, b)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: matmul: c (16384 x 151936, row stride 151936) spans 2489319424 elements for m=16384, ...
    """
    for name, rows, cols, ld, t in (("a", m, k, lda, a_t), ("b", k, n, ldb, b_t), ("c", m, n, ldc, False)):
        rows, cols = (cols, rows) if t else (rows, cols)
        if rows <= 0 or cols <= 0:
            continue  # nothing is indexed
        ld = cols if rows == 1 or ld is None else ld
        extent = (rows - 1) * ld + cols
        if extent > INDEX_LIMIT:
            raise ValueError(
                f"matmul: {name} ({rows} x {cols}, row stride {ld}) spans {extent} elements for m={m}, n={n}, k={k}; "
                f"the kernel indexes each operand with i32 (at most {INDEX_LIMIT} elements): split the product into "
                "smaller blocks"
            )


def matmul(a: Tensor, b: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """C = A @ B; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a must be (m, k) and b (k, n), got {tuple(a.shape)} and {tuple(b.shape)}")
    checks.dtypes("matmul", DTYPES, a=a, b=b)
    (m, k), n = a.shape, b.shape[1]
    (a_t, lda), (b_t, ldb) = layout("a", a), layout("b", b)
    checks.out_matches("matmul", out, (m, n), a)
    if out is not None:
        checks.contiguous_last_dim("matmul", out=out)  # ffi.rs: c's last dim has stride 1, even of one column
    check_index_range(m, n, k, lda, ldb, out.stride(0) if out is not None else n, a_t=a_t, b_t=b_t)
    checks.cuda("matmul", a=a, b=b)
    c = out if out is not None else torch.empty((m, n), dtype=a.dtype, device=a.device)
    if k == 0:
        return c.zero_()  # an empty sum
    port.run(__name__, variant, (m, n, k), c, a, b, key=tune_key(str(a.dtype)[6:], m, n, k, a_t=a_t, b_t=b_t))
    return c


def layout(name: str, t: Tensor) -> tuple[bool, int]:
    """(column-major?, leading stride) of an operand, as ffi.rs's layout() reads it: row-major when its
    last dim is contiguous (or has one element), else column-major when its first dim is.

    >>> w = torch.empty(4096, 1024)
    >>> layout("b", w), layout("b", w.t()), layout("b", w[:, :512].t())
    ((False, 1024), (True, 1024), (True, 1024))
    >>> layout("a", w[::2, ::2])
    Traceback (most recent call last):
    ValueError: matmul: a must be contiguous in its last dim (row-major) or its first (the .t() of a row-major matrix), got strides (2048, 2); pass a.contiguous()
    """
    rows, cols = t.shape
    if t.stride(1) == 1 or cols == 1:
        return False, (cols if rows == 1 else t.stride(0))
    if t.stride(0) == 1 or rows == 1:
        return True, t.stride(1)
    raise ValueError(
        f"matmul: {name} must be contiguous in its last dim (row-major) or its first (the .t() of a row-major "
        f"matrix), got strides {t.stride()}; pass {name}.contiguous()"
    )


# -- autotune: the problem class (the candidates, ffi_util::MmaVariant knobs: tilekit.mma.variants) --


def tune_key(dtype: str, m: int, n: int, k: int, *, a_t: bool = False, b_t: bool = False) -> dict:
    """Problem class: every dim rounded up to a power of two, and the layout when an operand is
    column-major (named only then, so row-major classes keep their cached choices).

    >>> tune_key("bfloat16", 1000, 1025, 4096), tune_key("bfloat16", 16, 4096, 4096, b_t=True)["layout"]
    ({'dtype': 'bfloat16', 'm_class': 1024, 'n_class': 2048, 'k_class': 4096}, 'nt')
    """
    key = {"dtype": dtype, "m_class": autotune.pow2(m), "n_class": autotune.pow2(n), "k_class": autotune.pow2(k)}
    return key | ({"layout": "nt"[a_t] + "nt"[b_t]} if a_t or b_t else {})
