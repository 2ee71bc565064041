"""silu_and_mul, the cuTile Rust port: out = silu(x[..., :H]) * x[..., H:], silu(a) = a * sigmoid(a).

    y = silu_and_mul(x, variant="auto", out=None)    # x: (..., 2H) CUDA f16/bf16/f32 -> y: (..., H)

`cutile_silu_and_mul` (kernels/silu_and_mul/ffi.rs) called through tilekit.runtime.port; `variant`: "auto"
the autotuned candidate of `variants` for this GPU, dtype and shape class, "default" ffi.rs's, a dict.
"""

from __future__ import annotations

from torch import Tensor

from tilekit.runtime import checks, port

# op.py's contract names (tilekit.runtime.kernel): the gated family's (swiglu's too)
from tilekit.runtime.gated import DEFAULT_VARIANT, DTYPES, default_block, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_silu_and_mul(const TensorDesc* out, const TensorDesc* x,
                            int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                            int32_t device_id, uint64_t stream);
"""


@port.entry(layouts={"x": "(..., 2H)"})
def silu_and_mul(x: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """silu(gate) * up, x = [gate | up]; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if x.shape[-1] % 2 != 0:
        raise ValueError(f"silu_and_mul: x must be (..., 2H) with an even last dim, got shape {tuple(x.shape)}")
    checks.dtypes("silu_and_mul", DTYPES, x=x)
    checks.contiguous_last_dim("silu_and_mul", size_one_ok=True, x=x)
    checks.out_matches("silu_and_mul", out, (*x.shape[:-1], x.shape[-1] // 2), x)
    checks.cuda("silu_and_mul", x=x)
    return port.rows(__name__, x, out, x.shape[-1] // 2, variant=variant)
