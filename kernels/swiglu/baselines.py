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

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated, gated_baselines, providers
from tilekit.runtime.gated import CUTILE_OCCUPANCY  # noqa: F401 (the contract's name)
from tilekit.runtime.gated_baselines import SPLIT_VARIANTS as VARIANTS

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL, ACT = "swiglu", "silu"

# silu_and_mul's plans (tilekit.runtime.gated): (m, h, sms, variant="auto", *, block, rows[, num_warps]).
triton_config = functools.partial(gated.triton_config, KERNEL, VARIANTS)
cutile_config = functools.partial(gated.cutile_config, KERNEL, VARIANTS)
_check_inputs = functools.partial(gated_baselines.check_split, KERNEL)  # (a, b): None, or the error

# Ours and torch's (F.silu(a) * b: two kernels, rounding silu(a) to a's dtype first): the gated
# family's split entries, with SiLU. TileGym: its cuTile swiglu(a, b), what tilegym.ops.get_swiglu() returns under the cutile backend
# (one row per program, strided rows as given). Liger's LigerSiLUMulFunction (Triton and cuTile
# alike) makes a and b .contiguous() before its kernel: a copy of strided inputs, which the perf
# configs (contiguous) never pay.
BACKENDS = {
    **gated_baselines.split_entries(KERNEL, ACT, VARIANTS, lambda backend: unavailable_reason(backend)),
    **providers.backends(
        tilegym=lambda ops, a, b: ops.cutile.swiglu.swiglu(a, b),
        liger=lambda ops, a, b: ops.swiglu.LigerSiLUMulFunction.apply(a, b),
        liger_cutile=lambda ops, a, b: ops.swiglu.LigerSiLUMulFunction.apply(a, b),
    ),
}

cutile_swiglu, triton_swiglu, torch_swiglu = (BACKENDS[b] for b in ("cutile", "triton", "torch"))


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
