"""layer_norm, the cuTile Rust port: y = (x - mean) * rsqrt(var + eps) * weight + bias over the last dim.

    from kernels.layer_norm.op import layer_norm
    y = layer_norm(x, weight, bias, eps=1e-5)    # x: (..., n) CUDA f16/bf16/f32; weight, bias: (n,) or None

Calls `cutile_layer_norm` (kernels/layer_norm/ffi.rs) through tilekit.port, into an output allocated
with torch.empty (or `out`); a weight or bias of None is sent as a null descriptor (absent: not
scaled, not shifted). `variant="auto"` (the default) uses the autotuned (block, rows, occupancy,
programs_per_sm) for this GPU, dtype and shape class (over `variants`); a dict picks one explicitly.
"""

from __future__ import annotations

from torch import Tensor

from tilekit import autotune, checks, port

CDEF = """
int32_t cutile_layer_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* weight,
                          const TensorDesc* bias, float eps, int32_t block, int32_t rows,
                          int32_t occupancy, int32_t programs, int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1, "programs_per_sm": 0}  # ffi.rs picks


def export_args(block: int, rows: int, occupancy: int, programs_per_sm: int = 0, *, sms: int) -> tuple[int, ...]:
    """A variant's arguments of the export, (block, rows, occupancy, programs), on a GPU with `sms` SMs
    (programs_per_sm > 0: the persistent kernel). Pure: the CPU tests check `variants` through it."""
    programs = programs_per_sm * sms if programs_per_sm > 0 else 0
    return int(block), int(rows), int(occupancy), int(programs)


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
        if x.dim() < 1 or t.dim() != 1 or t.shape[0] != x.shape[-1]:
            raise ValueError(
                f"layer_norm: {name} must be ({x.shape[-1]},) or None for x of shape {tuple(x.shape)}, "
                f"got {tuple(t.shape)}"
            )
    checks.dtypes("layer_norm", DTYPES, x=x, **params)
    checks.contiguous_last_dim("layer_norm", x=x, **params)
    checks.out_matches("layer_norm", out, x.shape, x)
    checks.cuda("layer_norm", x=x, **params)
    return port.rows(__name__, x, out, x.shape[-1], weight, bias, float(eps), variant=variant)


# -- autotune: the port's variants (ffi.rs: block = tile width, rows per tile block, occupancy) --


def tune_key(dtype: str, m: int, n: int) -> dict:
    """Problem class: exact n (it decides tiling), m rounded up to a power of two."""
    return {"dtype": dtype, "n": n, "m_class": autotune.pow2(m)}


def variants(m: int, n: int) -> list[dict]:
    """Candidate (block, rows, occupancy, programs_per_sm): rms_norm's space (NOTES.md says why),
    the same bytes per element and one more reduction. Rows are capped at m (rounded up to a power
    of two) and 64, as ffi.rs's default is:

    >>> [(v["block"], v["rows"], v["occupancy"], v["programs_per_sm"]) for v in variants(32768, 8192)][:4]
    [(8192, 1, 4, 0), (8192, 1, 2, 0), (8192, 2, 4, 0), (8192, 2, 2, 0)]
    >>> [(v["block"], v["rows"], v["occupancy"]) for v in variants(256, 768) if v["programs_per_sm"] == 0][-2:]
    [(1024, 1, 4), (1024, 1, 2)]
    """
    pow2 = 1 << max(4, (n - 1).bit_length())
    max_rows = min(64, autotune.pow2(m))  # ffi.rs accepts 1..=64 rows per tile block
    shapes = [(pow2, max(1, elems // pow2)) for elems in (8192, 16384)] if pow2 <= 16384 else []
    shapes += [(pow2, 2)] if pow2 == 16384 else []
    shapes += [(block, 8192 // block) for block in (2048, 4096) if block < n]
    shapes += [(pow2, 1)] if m <= 512 and pow2 <= 16384 else []  # decode batches: a tile block per row
    out = autotune.unique(
        {"block": b, "rows": min(r, max_rows), "occupancy": o, "programs_per_sm": 0} for b, r in shapes for o in (4, 2)
    )
    # persistent: the first tile on SMs x occupancy tile blocks, each loading w and b once
    return out + ([dict(out[0], occupancy=o, programs_per_sm=o) for o in (4, 2)] if pow2 <= 16384 else [])
