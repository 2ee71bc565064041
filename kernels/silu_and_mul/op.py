"""silu_and_mul, the cuTile Rust port: out = silu(x[..., :H]) * x[..., H:], silu(a) = a * sigmoid(a).

    y = silu_and_mul(x, variant="auto", out=None)    # x: (..., 2H) CUDA f16/bf16/f32 -> y: (..., H)

`cutile_silu_and_mul` (kernels/silu_and_mul/ffi.rs) called through tilekit.runtime.port; `variant`: "auto"
the autotuned candidate of `variants` for this GPU, dtype and shape class, "default" ffi.rs's, a dict.
"""

from __future__ import annotations

from tilekit.runtime import gated

# op.py's contract names (tilekit.runtime.kernel): the gated family's (swiglu's, gelu_and_mul's too)
from tilekit.runtime.gated import DEFAULT_VARIANT, DTYPES, default_block, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_silu_and_mul(const TensorDesc* out, const TensorDesc* x,
                            int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                            int32_t device_id, uint64_t stream);
"""


# The entry silu_and_mul(x, *, variant="auto", out=None): the gated family's fused one.
silu_and_mul = gated.fused_entry(__name__, "silu_and_mul", "silu")
