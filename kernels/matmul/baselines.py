"""matmul baselines: the implementations the cuTile Rust port (op.py) is timed against.

    C = A @ B      A (m, k), B (k, n), C (m, n); f16 or bf16 in and out, f32 accumulation

A and B are 2-D, each row-major (last dim contiguous, row strides may be larger) or column-major
(the .t() of a row-major matrix: an nn.Linear weight as a model passes it). Entries (a, b) -> c:
``torch_matmul`` (cuBLAS), ``triton_matmul`` (``tl.dot``) and ``cutile_matmul`` (``ct.mma``): the
GEMM family's kernels of tilekit.runtime.gemm_baselines on the batch of one (a[None], b[None]), with its
variants "128x256x64", "256x128x64", "128x128x64", "persistent" and "auto" (each backend's own
autotune over its candidates, TRITON_AUTOTUNE / CUTILE_AUTOTUNE there). Opt-in entries from other
libraries (tilekit.runtime.providers): tilegym (its cuTile matmul; Liger has none).
"""

import functools

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gemm_baselines as gemm
from tilekit.runtime import providers

triton, _, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "matmul"
VARIANTS = gemm.VARIANTS
# The launch plans of one product: (m, n, k, sms, variant="auto", *, on_gpu=True) and (m, n, sms, variant).
triton_config = functools.partial(gemm.triton_config, KERNEL, 1)
cutile_config = functools.partial(gemm.cutile_config, KERNEL, 1)


def tilegym_matmul(ops, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """TileGym's cuTile matmul. A column-major operand goes in as its row-major .t() with
    trans_*=True (no copy); static_persistent=True is the documented default of tilegym.ops.matmul
    (its cuTile path without it refuses transposed operands).

    >>> class Ops:  # what TileGym's matmul receives
    ...     def matmul(self, a, b, **kw):
    ...         return tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), kw
    >>> tilegym_matmul(Ops(), torch.empty(4, 3).t(), torch.empty(4, 8)[:, :5])  # a: (3, 4) column-major
    ((4, 3), (3, 1), (4, 5), (8, 1), {'trans_a': True, 'trans_b': False, 'static_persistent': True})
    """
    ta, tb = gemm.column_major(a), gemm.column_major(b)
    return ops.matmul(a.t() if ta else a, b.t() if tb else b, trans_a=ta, trans_b=tb, static_persistent=True)


BACKENDS = {
    **gemm.entries(KERNEL, 2, lambda backend: unavailable_reason(backend)),  # ours and cuBLAS
    **providers.backends(tilegym=tilegym_matmul),  # Liger-Kernel has no matmul
}


cutile_matmul, triton_matmul, torch_matmul = (BACKENDS[b] for b in ("cutile", "triton", "torch"))
_check_inputs = functools.partial(gemm.check_inputs, KERNEL, 2)  # a, b -> None, or the error


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
