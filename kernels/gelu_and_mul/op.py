"""gelu_and_mul, the cuTile Rust port: out = gelu(x[..., :H]) * x[..., H:] with the tanh GELU,
gelu(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) (GeGLU: Gemma's MLP).

    y = gelu_and_mul(x, variant="auto", out=None)    # x: (..., 2H) CUDA f16/bf16/f32 -> y: (..., H)

`cutile_gelu_and_mul` (kernels/gelu_and_mul/ffi.rs) through tilekit.runtime.port; `variant` and the
autotune space are the gated family's (silu_and_mul's).
"""

from __future__ import annotations

from tilekit.runtime import gated
from tilekit.runtime.gated import DEFAULT_VARIANT, DTYPES, default_block, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_gelu_and_mul(const TensorDesc* out, const TensorDesc* x,
                            int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                            int32_t device_id, uint64_t stream);
"""


# The entry gelu_and_mul(x, *, variant="auto", out=None): the gated family's fused one.
gelu_and_mul = gated.fused_entry(__name__, "gelu_and_mul", "gelu_tanh")
