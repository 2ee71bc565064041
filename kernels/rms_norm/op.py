"""rms_norm, the cuTile Rust port: y = x * rsqrt(mean(x^2, -1) + eps) * weight.

    from kernels.rms_norm.op import rms_norm
    y = rms_norm(x, weight, eps=1e-6)            # x: (..., n) CUDA f16/bf16/f32, weight: (n,)

Calls `cutile_rms_norm` (kernels/rms_norm/ffi.rs) through tilekit.port, into an output allocated
with torch.empty (or `out`). `variant="auto"` (the default) uses the autotuned (block, rows,
occupancy) for this GPU, dtype and shape class (over `variants`); a dict picks one explicitly.
"""

from __future__ import annotations

from torch import Tensor

from tilekit import checks, norm, port

# op.py's contract names (tilekit.kernel): the row normalizations' (layer_norm's too), and
# rms_norm's own split below
from tilekit.norm import DEFAULT_VARIANT, DTYPES, tune_key  # noqa: F401

CDEF = """
int32_t cutile_rms_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* weight,
                        float eps, int32_t block, int32_t rows, int32_t occupancy,
                        int32_t programs, int32_t tail, int32_t warps, int32_t split,
                        int32_t device_id, uint64_t stream);
"""

# Rows past 16384 columns split across tile blocks that exchange their sums of squares (split=1,
# ffi.rs `rms_norm_split_exchange`: one read of x where the looped entries read it twice): one
# tile block per 8192-wide column tile at occupancy 4, per 4096-wide one at occupancy 8.
SPLIT_CANDIDATES = [
    {"block": 8192, "rows": 1, "occupancy": 4, "programs_per_sm": 0, "split": 1},
    {"block": 4096, "rows": 1, "occupancy": 8, "programs_per_sm": 0, "split": 1},
]


def export_args(
    block: int,
    rows: int,
    occupancy: int,
    programs_per_sm: int = 0,
    pointer: int = 0,
    tail: int = 0,
    warps: int | None = None,
    split: int = 0,
    *,
    sms: int,
) -> tuple[int, ...]:
    """`tilekit.norm.export_args` and rms_norm's `split` (1: a row's column tiles on as many tile
    blocks; ffi.rs).

    >>> export_args(8192, 1, 4, split=1, sms=132), export_args(4096, 1, 4, pointer=1, sms=132)
    ((8192, 1, 4, 0, 0, -1, 1), (4096, 1, 4, -2, 0, -1, 0))
    """
    args = norm.export_args(block, rows, occupancy, programs_per_sm, pointer, tail, warps, sms=sms)
    return (*args, int(split))


def variants(m: int, n: int) -> list[dict]:
    """`tilekit.norm.variants`, and for rows past 16384 columns the split candidates:

    >>> [(v["block"], v["occupancy"]) for v in variants(16384, 18944) if v.get("split")], len(variants(16384, 18944))
    ([(8192, 4), (4096, 8)], 15)
    >>> [v for v in variants(16384, 16384) if v.get("split")]
    []
    """
    return norm.variants(m, n) + (SPLIT_CANDIDATES if n > 16384 else [])


def rms_norm(
    x: Tensor, weight: Tensor, eps: float = 1e-6, *, variant: str | dict = "auto", out: Tensor | None = None
) -> Tensor:
    """RMSNorm over the last dim; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    if x.dim() < 1 or weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(
            f"rms_norm: weight must be ({x.shape[-1]},) for x of shape {tuple(x.shape)}, got {tuple(weight.shape)}"
        )
    checks.dtypes("rms_norm", DTYPES, x=x, weight=weight)
    checks.contiguous_last_dim("rms_norm", x=x)
    checks.out_matches("rms_norm", out, x.shape, x)
    checks.cuda("rms_norm", x=x, weight=weight)
    return port.rows(__name__, x, out, x.shape[-1], weight, float(eps), variant=variant)
