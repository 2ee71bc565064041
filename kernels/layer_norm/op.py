"""layer_norm, the cuTile Rust port: y = (x - mean) * rsqrt(var + eps) * weight + bias over the last dim.

    from kernels.layer_norm.op import layer_norm
    y = layer_norm(x, weight, bias, eps=1e-5)    # x: (..., n) CUDA f16/bf16/f32; weight, bias: (n,) or None

Calls `cutile_layer_norm` (kernels/layer_norm/ffi.rs) through tilekit.runtime.port, into an output allocated
with torch.empty (or `out`); a weight or bias of None is sent as a null descriptor (absent: not
scaled, not shifted). `variant="auto"` (the default) uses the autotuned (block, rows, occupancy,
programs_per_sm) for this GPU, dtype and shape class (over `variants`); a dict picks one explicitly.
The knobs and defaults are rms_norm's (the same bytes per element and one more reduction,
NOTES.md): tilekit.runtime.norm's; so are the candidates, plus two for whole rows of 4096 and more.
"""

from __future__ import annotations

from torch import Tensor

from tilekit.runtime import checks, norm, port
from tilekit.runtime.norm import DEFAULT_VARIANT, export_args, tune_key

__all__ = ["CDEF", "DEFAULT_VARIANT", "DTYPES", "export_args", "layer_norm", "tune_key", "variants"]

CDEF = """
int32_t cutile_layer_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* weight,
                          const TensorDesc* bias, float eps, int32_t block, int32_t rows,
                          int32_t occupancy, int32_t programs, int32_t tail, int32_t warps,
                          int32_t form, int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")


@port.entry(layouts={"x": "(..., n)", "weight": "(n,)", "bias": "(n,)"}, in_place=("x",))
def layer_norm(
    x: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    *,
    variant: str | dict = "auto",
    out: Tensor | None = None,
) -> Tensor:
    """LayerNorm over the last dim; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    params = {k: t for k, t in (("weight", weight), ("bias", bias)) if t is not None}
    for name, t in params.items():
        if t.shape[0] != x.shape[-1]:
            raise ValueError(
                f"layer_norm: {name} must be ({x.shape[-1]},) or None for x of shape {tuple(x.shape)}, "
                f"got {tuple(t.shape)}"
            )
    checks.dtypes("layer_norm", DTYPES, x=x, **params)
    checks.contiguous_last_dim("layer_norm", x=x, **params)
    checks.out_matches("layer_norm", out, x.shape, x)
    checks.cuda("layer_norm", x=x, **params)
    return port.rows(__name__, x, out, x.shape[-1], weight, bias, float(eps), variant=variant)


# rms_norm's candidates (body-and-tail tiles included). The whole-row tiles at occupancy 1 and at the
# compiler's choice, which serve Liger's cuTile layer_norm, were timed on the H200 and never won
# (NOTES.md); they are no longer offered.
variants = norm.variants
