"""swiglu baselines: the implementations the cuTile Rust port (op.py) is timed against.

    out[r, j] = silu(a[r, j]) * b[r, j],   silu(a) = a * sigmoid(a)

a (gate) and b (up) are (m, H), f16/bf16/f32, last dim contiguous, each in rows of its own stride;
out is (m, H) in a's dtype. Entries (a, b) -> out: ``torch_swiglu`` (``F.silu(a) * b``: two
kernels, rounding silu(a) to the input dtype before the product, so it rounds twice),
``triton_swiglu`` and ``cutile_swiglu`` (ours, f32 inside: the gated family's split kernels,
tilekit.runtime.gated_baselines, with SiLU), and the providers' (below). Plans are silu_and_mul's
tiled ones: "tiled" (~4K-element output tiles, "auto"), "wide" (~8K).
"""

import functools

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated, gated_baselines, providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "swiglu"
ACT = "silu"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VARIANTS = ("auto", "tiled", "wide")
CUTILE_OCCUPANCY = gated.CUTILE_OCCUPANCY


# silu_and_mul's plans (tilekit.runtime.gated): (m, h, sms, variant="auto", *, block, rows[, num_warps]).
triton_config = functools.partial(gated.triton_config, KERNEL, VARIANTS)
cutile_config = functools.partial(gated.cutile_config, KERNEL, VARIANTS)


def _check_inputs(a: torch.Tensor, b: torch.Tensor) -> None:
    gated_baselines.check_split(KERNEL, a, b, DTYPES)


def torch_swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch eager: silu(a), rounded to a's dtype, times b (rounded again)."""
    _check_inputs(a, b)
    return torch.nn.functional.silu(a) * b


# Our Triton and cuTile Python entries: the gated family's split kernels with SiLU.
cutile_swiglu, triton_swiglu = gated_baselines.split_entries(
    KERNEL, ACT, VARIANTS, DTYPES, lambda backend: unavailable_reason(backend)
)


# TileGym: its cuTile swiglu(a, b), what tilegym.ops.get_swiglu() returns under the cutile backend
# (one row per program, strided rows as given). Liger's LigerSiLUMulFunction (Triton and cuTile
# alike) makes a and b .contiguous() before its kernel: a copy of strided inputs, which the perf
# configs (contiguous) never pay.
BACKENDS = {
    "cutile": cutile_swiglu,
    "triton": triton_swiglu,
    "torch": torch_swiglu,
    **providers.backends(
        tilegym=lambda ops, a, b: ops.cutile.swiglu.swiglu(a, b),
        liger=lambda ops, a, b: ops.swiglu.LigerSiLUMulFunction.apply(a, b),
        liger_cutile=lambda ops, a, b: ops.swiglu.LigerSiLUMulFunction.apply(a, b),
    ),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
