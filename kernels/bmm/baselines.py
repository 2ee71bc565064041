"""bmm baselines: the implementations the cuTile Rust port (op.py) is timed against.

    C[i] = A[i] @ B[i]      A (batch, m, k), B (batch, k, n), C (batch, m, n); f16 or bf16, f32 accumulation

Each matrix of A and B is row-major or column-major (the transpose(1, 2) of a row-major batch), at
any batch stride (0: one matrix shared by every product). Entries (a, b) -> c: ``torch_bmm``
(cuBLAS: ``torch.bmm`` on the operands as given, a shared B as its stride-0 expanded view, which
ATen hands to cuBLAS's strided-batched GEMM), ``triton_bmm`` and ``cutile_bmm``: the GEMM family's
kernels of tilekit.runtime.gemm_baselines (matmul's too), the batch folded into the program id
(batch-major, each product's tiles in bands of GROUP_M tile rows); TileGym's ``tilegym.ops.bmm``.
"""

import functools

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gemm_baselines as gemm
from tilekit.runtime import providers

triton, _, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "bmm"
VARIANTS = gemm.VARIANTS  # "auto", "128x256x64", "256x128x64", "128x128x64", "persistent"
# The launch plans: (batch, m, n, k, sms, variant="auto", *, on_gpu=True) and (batch, m, n, sms, variant).
triton_config = functools.partial(gemm.triton_config, KERNEL)
cutile_config = functools.partial(gemm.cutile_config, KERNEL)


def tilegym_bmm(ops, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """TileGym's cuTile bmm (its default static-persistent kernel, which takes transposed operands):
    a column-major batch goes in as its row-major transpose(1, 2) with transpose_*=True (no copy); a
    B shared by the batch as its stride-0 view (TileGym indexes it per product, no copy).

    >>> class Ops:  # what TileGym's bmm receives
    ...     def bmm(self, a, b, **kw):
    ...         return tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), kw
    >>> tilegym_bmm(Ops(), torch.empty(2, 4, 3).transpose(1, 2), torch.empty(4, 5).expand(2, 4, 5))
    ((2, 4, 3), (12, 3, 1), (2, 4, 5), (0, 5, 1), {'transpose_a': True, 'transpose_b': False})
    """
    ta, tb = gemm.column_major(a), gemm.column_major(b)
    return ops.bmm(a.transpose(1, 2) if ta else a, b.transpose(1, 2) if tb else b, transpose_a=ta, transpose_b=tb)


BACKENDS = {
    **gemm.entries(KERNEL, 3, lambda backend: unavailable_reason(backend)),  # ours and cuBLAS
    **providers.backends(tilegym=tilegym_bmm),  # Liger-Kernel has no bmm
}


cutile_bmm, triton_bmm, torch_bmm = (BACKENDS[b] for b in ("cutile", "triton", "torch"))
_check_inputs = functools.partial(gemm.check_inputs, KERNEL, 3)  # a, b -> None, or the error


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
