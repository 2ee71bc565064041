"""swiglu, the cuTile Rust port: out = silu(a) * b, silu(a) = a * sigmoid(a), for the gate (a) and
up (b) projections of an MLP stored apart.

    y = swiglu(a, b, variant="auto", out=None)    # a, b: (..., H) CUDA f16/bf16/f32 -> y: (..., H)

`cutile_swiglu` (kernels/swiglu/ffi.rs) called through tilekit.runtime.port; `variant`: "auto" the
autotuned candidate of `variants` for this GPU, dtype and shape class, "default" ffi.rs's, a dict.
The knobs, defaults and candidates are silu_and_mul's (the same tiles over the same bytes per
element: two loads and a store), tilekit.runtime.gated's.
"""

from __future__ import annotations

from torch import Tensor

from tilekit.runtime.gated import DEFAULT_VARIANT, default_block, export_args, tune_key, variants
from tilekit.runtime import checks, port

__all__ = ["CDEF", "DEFAULT_VARIANT", "DTYPES", "default_block", "export_args", "swiglu", "tune_key", "variants"]

CDEF = """
int32_t cutile_swiglu(const TensorDesc* out, const TensorDesc* a, const TensorDesc* b,
                      int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                      int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")


@port.entry(layouts={"a": "(..., H)", "b": "(..., H)"}, in_place=("a", "b"))
def swiglu(a: Tensor, b: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """silu(a) * b; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if a.shape != b.shape:
        raise ValueError(f"swiglu: a and b must have one shape (..., H), got {tuple(a.shape)} and {tuple(b.shape)}")
    checks.dtypes("swiglu", DTYPES, a=a, b=b)
    checks.contiguous_last_dim("swiglu", a=a, b=b)
    checks.out_matches("swiglu", out, a.shape, a)
    checks.cuda("swiglu", a=a, b=b)
    b2 = b if b.dim() == 2 else b.reshape(-1, b.shape[-1])  # port.rows flattens a (and out) alike
    return port.rows(__name__, a, out, a.shape[-1], b2, variant=variant)
