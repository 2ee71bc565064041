"""silu_and_mul baselines: the implementations the cuTile Rust port (op.py) is timed against.

    out[r, j] = silu(x[r, j]) * x[r, H + j],   silu(a) = a * sigmoid(a),   j < H

x is (m, 2H), f16/bf16/f32, last dim contiguous; out is (m, H) in x's dtype. Entries x -> out:
``torch_silu_and_mul`` (``F.silu(x[:, :H]) * x[:, H:]``: two kernels, rounding to x's dtype in
between), ``triton_silu_and_mul`` and ``cutile_silu_and_mul`` (ours, f32 inside: the gated family's
kernels, tilekit.runtime.gated_baselines, with SiLU). Their variants: "tiled" (one ROWS x BLOCK
output tile of ~4K elements per program, column tile fastest), "wide" (~8K-element tiles), "row"
(one program per row, BLOCK-wide chunks: the classic form), "auto" = "tiled". The rule is `config`
(tilekit.runtime.gated, pure); every knob can be forced by keyword. Opt-in entries from other
libraries (tilekit.runtime.providers): tilegym and liger; liger_cutile says why not.
"""

import functools

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated, gated_baselines, providers
from tilekit.runtime.gated import CUTILE_OCCUPANCY  # noqa: F401 (the contract's name)
from tilekit.runtime.gated_baselines import FUSED_VARIANTS as VARIANTS

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL, ACT = "silu_and_mul", "silu"

# The launch plans (tilekit.runtime.gated, swiglu's too): (m, h[, sms], variant="auto", *, block, rows[, num_warps]).
config = functools.partial(gated.config, KERNEL, VARIANTS)
triton_config = functools.partial(gated.triton_config, KERNEL, VARIANTS)
cutile_config = functools.partial(gated.cutile_config, KERNEL, VARIANTS)
_check_inputs = functools.partial(gated_baselines.check_fused, KERNEL)  # x -> H, or the error

# Ours and torch's (F.silu(x[:, :H]) * x[:, H:]): the gated family's, with SiLU.
BACKENDS = {
    **gated_baselines.fused_entries(KERNEL, ACT, VARIANTS, lambda backend: unavailable_reason(backend)),
    **providers.backends(
        tilegym=lambda ops, x: ops.silu_and_mul(x),
        liger=lambda ops, x: ops.swiglu.LigerFusedGateUpSiLUMulFunction.apply(x, False),
        liger_cutile="Liger's cuTile swiglu has only LigerSiLUMulFunction(a, b), which would copy both "
        "strided halves of x (.contiguous()) before its kernel: an unfair time; it fits the two-tensor swiglu op",
    ),
}

cutile_silu_and_mul, triton_silu_and_mul, torch_silu_and_mul = (BACKENDS[b] for b in ("cutile", "triton", "torch"))


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
