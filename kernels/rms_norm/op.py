"""rms_norm, the cuTile Rust port: y = x * rsqrt(mean(x^2, -1) + eps) * weight.

    from kernels.rms_norm.op import rms_norm
    y = rms_norm(x, weight, eps=1e-6)            # x: (..., n) CUDA f16/bf16/f32, weight: (n,)

Calls `cutile_rms_norm` in libcutile_kernels.so (kernels/rms_norm/ffi.rs) on x's device and that
device's current torch stream. The output is allocated here with torch.empty; Rust only borrows.
`variant="auto"` (the default) uses the autotuned (block, rows, occupancy) for this GPU, dtype
and shape class (tilekit.autotune over `variants`); a dict picks one explicitly.
"""

from __future__ import annotations

import functools

import torch

from tilekit import autotune, checks, ffi

# The single source of truth for the export's signature (checked against `nm -D` by make symbols).
CDEF = """
int32_t cutile_rms_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* weight,
                        float eps, int32_t block, int32_t rows, int32_t occupancy,
                        int32_t programs, int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1, "programs_per_sm": 0}  # ffi.rs picks


def export_args(block: int, rows: int, occupancy: int, programs_per_sm: int = 0, *, sms: int) -> tuple[int, ...]:
    """A variant's arguments of the export, (block, rows, occupancy, programs), on a GPU with `sms`
    SMs: programs_per_sm > 0 selects the persistent kernel on SMs x programs_per_sm tile blocks.
    Pure, so the CPU tests check `variants` through exactly what launch passes."""
    programs = programs_per_sm * sms if programs_per_sm > 0 else 0
    return int(block), int(rows), int(occupancy), int(programs)


def launch(
    x2: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    y2: torch.Tensor,
    block: int,
    rows: int,
    occupancy: int,
    programs_per_sm: int = 0,
) -> None:
    """One call of the export on 2-D views with one variant; raises ffi.KernelError on a non-zero code."""
    device_id, stream = ffi.stream_args(x2)
    sms = _sm_count(device_id) if programs_per_sm > 0 else 0
    lib = ffi.library()
    d_out, d_x, d_w = lib.pack(y2), lib.pack(x2), lib.pack(weight)
    lib.call(
        "rms_norm",
        "cutile_rms_norm",
        d_out,
        d_x,
        d_w,
        float(eps),
        *export_args(block, rows, occupancy, programs_per_sm, sms=sms),
        device_id,
        stream,
    )


@functools.lru_cache(maxsize=None)
def _sm_count(device_id: int) -> int:
    return torch.cuda.get_device_properties(device_id).multi_processor_count


def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    variant: str | dict = "auto",
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """RMSNorm over the last dim. Raises ValueError/TypeError on bad input and ffi.KernelError
    on a non-zero return code."""
    if x.dim() < 1 or weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(
            f"rms_norm: weight must be ({x.shape[-1]},) for x of shape {tuple(x.shape)}, got {tuple(weight.shape)}"
        )
    checks.dtypes("rms_norm", DTYPES, x=x, weight=weight)
    checks.contiguous_last_dim("rms_norm", x=x)
    checks.out_matches("rms_norm", out, x.shape, x)
    checks.cuda("rms_norm", x=x, weight=weight)
    n = x.shape[-1]
    x2 = x if x.dim() == 2 else x.reshape(-1, n)
    y = out if out is not None else torch.empty(x.shape, dtype=x.dtype, device=x.device)
    y2 = y if y.dim() == 2 else y.view(-1, n)
    if x2.numel() == 0:
        return y
    m, dtype = x2.shape[0], str(x.dtype).removeprefix("torch.")
    variant = autotune.pick(
        "rms_norm",
        variant,
        default=DEFAULT_VARIANT,
        key=tune_key(dtype, m, n),
        candidates=variants(m, n),
        make_call=lambda v: lambda: launch(x2, weight, eps, y2, **v),
    )
    launch(x2, weight, eps, y2, **variant)
    return y


# -- autotune: the port's variants (ffi.rs: block = tile width, rows per tile block, occupancy) --

MAX_ROWS = 64  # ffi.rs accepts 1..=64 rows per tile block


def tune_key(dtype: str, m: int, n: int) -> dict:
    """Problem class: exact n (it decides tiling), m rounded up to a power of two."""
    return {"dtype": dtype, "n": n, "m_class": 1 << max(0, (m - 1).bit_length())}


def variants(m: int, n: int) -> list[dict]:
    """Candidate (block, rows, occupancy, programs_per_sm), few enough that tuning a new shape
    class stays within seconds. From the H200 sweep (kernels/rms_norm/NOTES.md): tiles of ~8K
    elements at occupancy 2-4 are fast, one row per tile block 3-10x slower. So: the whole row in
    one tile (8K or 16K elements of rows, or 2 rows of 16K), or for long rows 2K/4K-wide column
    tiles of 8K elements; occupancy 2 and 4; plus the persistent form of the 8K-element whole-row
    tile (programs_per_sm > 0). Rows are capped at what m has (rounded up to a power of two) and
    at MAX_ROWS, so rows narrower than 128 get smaller tiles (16 x 64 for n <= 16), as ffi.rs's
    default does. Issue 11: (1000, 1) got 512 and 1024 rows, which ffi.rs refuses, so autotune
    raised "every variant failed":

    >>> [(v["block"], v["rows"], v["occupancy"], v["programs_per_sm"]) for v in variants(1000, 1)]
    [(16, 64, 4, 0), (16, 64, 2, 0), (16, 64, 4, 4), (16, 64, 2, 2)]
    """
    pow2 = 1 << max(4, (n - 1).bit_length())
    max_rows = min(MAX_ROWS, 1 << max(0, (m - 1).bit_length()))
    shapes = []
    if pow2 <= 16384:
        shapes += [(pow2, max(1, elems // pow2)) for elems in (8192, 16384)]
        if pow2 == 16384:
            shapes.append((pow2, 2))
    shapes += [(block, 8192 // block) for block in (2048, 4096) if block < n]
    out = autotune.unique(
        {"block": b, "rows": min(r, max_rows), "occupancy": occ, "programs_per_sm": 0}
        for b, r in shapes
        for occ in (4, 2)
    )
    if pow2 <= 16384:
        # persistent: SMs x occupancy tile blocks, each loading w once (NOTES.md: w is re-read per
        # row tile otherwise, ~25 % extra L2 traffic at n = 16384)
        block, rows = shapes[0][0], min(shapes[0][1], max_rows)
        out += [{"block": block, "rows": rows, "occupancy": occ, "programs_per_sm": occ} for occ in (4, 2)]
    return out
