"""gelu_and_mul baselines: out[r, j] = gelu_tanh(x[r, j]) * x[r, H + j], j < H, x (m, 2H).

``torch_gelu_and_mul`` (``F.gelu(x[:, :H], approximate="tanh") * x[:, H:]``: two kernels),
``triton_gelu_and_mul`` and ``cutile_gelu_and_mul`` (the gated family's kernels with the tanh GELU,
tilekit.runtime.gated_baselines); variants and knobs are silu_and_mul's. No provider fits (why: below).
"""

import functools

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated, gated_baselines, providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL, ACT = "gelu_and_mul", "gelu_tanh"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VARIANTS = ("auto", "tiled", "wide", "row")
config = functools.partial(gated.config, KERNEL, VARIANTS)
CUTILE_OCCUPANCY = gated.CUTILE_OCCUPANCY


def _check_inputs(x: torch.Tensor) -> int:
    return gated_baselines.check_fused(KERNEL, x, DTYPES)


def torch_gelu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """PyTorch eager: the tanh GELU of the gate half times the up half."""
    h = _check_inputs(x)
    return torch.nn.functional.gelu(x[:, :h], approximate="tanh") * x[:, h:]


cutile_gelu_and_mul, triton_gelu_and_mul = gated_baselines.fused_entries(
    KERNEL, ACT, VARIANTS, DTYPES, lambda backend: unavailable_reason(backend)
)


BACKENDS = {
    "cutile": cutile_gelu_and_mul,
    "triton": triton_gelu_and_mul,
    "torch": torch_gelu_and_mul,
    **providers.backends(
        tilegym="TileGym 1.5.1's geglu(x, approximate='tanh') computes x[:, :H] * gelu(x[:, H:]): the GELU on "
        "the other half, another op (and it needs x contiguous)",
        liger="Liger's LigerGELUMulFunction(a, b) (Triton) takes gate and up apart and makes both contiguous: "
        "x's strided halves would be copied before its kernel, an unfair time",
        liger_cutile="Liger's cuTile LigerGELUMulFunction(a, b) copies x's strided halves (.contiguous()) alike",
    ),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
