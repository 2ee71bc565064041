"""gelu_and_mul baselines: out[r, j] = gelu_tanh(x[r, j]) * x[r, H + j], j < H, x (m, 2H).

``torch_gelu_and_mul`` (``F.gelu(x[:, :H], approximate="tanh") * x[:, H:]``: two kernels),
``triton_gelu_and_mul`` and ``cutile_gelu_and_mul`` (the gated family's kernels with the tanh GELU,
tilekit.runtime.gated_baselines); variants and knobs are silu_and_mul's. No provider fits (why: below).
"""

import functools

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated, gated_baselines, providers
from tilekit.runtime.gated import CUTILE_OCCUPANCY  # noqa: F401 (the contract's name)
from tilekit.runtime.gated_baselines import FUSED_VARIANTS as VARIANTS

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL, ACT = "gelu_and_mul", "gelu_tanh"
config = functools.partial(gated.config, KERNEL, VARIANTS)
_check_inputs = functools.partial(gated_baselines.check_fused, KERNEL)
BACKENDS = {
    **gated_baselines.fused_entries(KERNEL, ACT, VARIANTS, lambda backend: unavailable_reason(backend)),
    **providers.backends(
        tilegym="TileGym 1.5.1's geglu(x, approximate='tanh') computes x[:, :H] * gelu(x[:, H:]): the GELU on "
        "the other half, another op (and it needs x contiguous)",
        liger="Liger's LigerGELUMulFunction(a, b) (Triton) takes gate and up apart and makes both contiguous: "
        "x's strided halves would be copied before its kernel, an unfair time",
        liger_cutile="Liger's cuTile LigerGELUMulFunction(a, b) copies x's strided halves (.contiguous()) alike",
    ),
}

cutile_gelu_and_mul, triton_gelu_and_mul, torch_gelu_and_mul = (BACKENDS[b] for b in ("cutile", "triton", "torch"))


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
