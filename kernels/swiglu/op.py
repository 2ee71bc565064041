"""swiglu, the cuTile Rust port: out = silu(a) * b, silu(a) = a * sigmoid(a), for the gate (a) and
up (b) projections of an MLP stored apart.

    y = swiglu(a, b, variant="auto", out=None)    # a, b: (..., H) CUDA f16/bf16/f32 -> y: (..., H)

`cutile_swiglu` (kernels/swiglu/ffi.rs) called through tilekit.runtime.port; `variant`: "auto" the
autotuned candidate of `variants` for this GPU, dtype and shape class, "default" ffi.rs's, a dict.
The knobs, defaults and candidates are silu_and_mul's (the same tiles over the same bytes per
element: two loads and a store), tilekit.runtime.gated's.
"""

from __future__ import annotations

from tilekit.runtime import gated

# op.py's contract names (tilekit.runtime.kernel): the gated family's
from tilekit.runtime.gated import DEFAULT_VARIANT, DTYPES, default_block, export_args, tune_key, variants  # noqa: F401

CDEF = """
int32_t cutile_swiglu(const TensorDesc* out, const TensorDesc* a, const TensorDesc* b,
                      int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                      int32_t device_id, uint64_t stream);
"""

# The entry swiglu(a, b, *, variant="auto", out=None): the gated family's split one.
swiglu = gated.split_entry(__name__, "swiglu", "silu")
