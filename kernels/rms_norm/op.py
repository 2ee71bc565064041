"""rms_norm, the cuTile Rust port: y = x * rsqrt(mean(x^2, -1) + eps) * weight.

    from kernels.rms_norm.op import rms_norm
    y = rms_norm(x, weight, eps=1e-6)            # x: (..., n) CUDA f16/bf16/f32, weight: (n,)

Calls `cutile_rms_norm` (kernels/rms_norm/ffi.rs) through tilekit.runtime.port, into an output allocated
with torch.empty (or `out`). `variant="auto"` (the default) uses the autotuned (block, rows,
occupancy) for this GPU, dtype and shape class (over `variants`); a dict picks one explicitly.
Its gradient (autograd through torch.ops.tilekit.rms_norm) is the port kernels/rms_norm_backward,
whose op.py gives it (`forward_gradients`; tilekit.runtime.ops finds it).
"""

from __future__ import annotations

from torch import Tensor

from tilekit.runtime import checks, port

# op.py's contract names (tilekit.runtime.kernel): the row normalizations' (layer_norm's too)
from tilekit.runtime.norm import DEFAULT_VARIANT, DTYPES, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_rms_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* weight,
                        float eps, int32_t block, int32_t rows, int32_t occupancy,
                        int32_t programs, int32_t tail, int32_t warps, int32_t form,
                        int32_t device_id, uint64_t stream);
"""


@port.entry(layouts={"x": "(..., n)", "weight": "(n,)"}, in_place=("x",))
def rms_norm(
    x: Tensor, weight: Tensor, eps: float = 1e-6, *, variant: str | dict = "auto", out: Tensor | None = None
) -> Tensor:
    """RMSNorm over the last dim; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if weight.shape[0] != x.shape[-1]:
        raise ValueError(
            f"rms_norm: weight must be ({x.shape[-1]},) for x of shape {tuple(x.shape)}, got {tuple(weight.shape)}"
        )
    checks.dtypes("rms_norm", DTYPES, x=x, weight=weight)
    checks.contiguous_last_dim("rms_norm", x=x)
    checks.out_matches("rms_norm", out, x.shape, x)
    checks.cuda("rms_norm", x=x, weight=weight)
    return port.rows(__name__, x, out, x.shape[-1], weight, float(eps), variant=variant)
