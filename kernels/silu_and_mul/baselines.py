"""silu_and_mul baselines: the implementations the cuTile Rust port (op.py) is timed against.

    out[r, j] = silu(x[r, j]) * x[r, H + j],   silu(a) = a * sigmoid(a),   j < H

x is (m, 2H), f16/bf16/f32, last dim contiguous; out is (m, H) in x's dtype. Entries x -> out:
``torch_silu_and_mul`` (``F.silu(x[:, :H]) * x[:, H:]``: two kernels, rounding to x's dtype in
between), ``triton_silu_and_mul`` and ``cutile_silu_and_mul`` (ours, f32 inside). Their variants:
"tiled" (one ROWS x BLOCK output tile of ~4K elements per program, column tile fastest), "wide"
(~8K-element tiles), "row" (one program per row, BLOCK-wide chunks: the classic form),
"auto" = "tiled". The rule is `config` (tilekit.runtime.gated, pure); every knob can be forced by keyword.
Opt-in entries from other libraries (tilekit.runtime.providers): tilegym and liger; liger_cutile says why not.
"""

import functools

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated, gated_baselines
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "silu_and_mul"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VARIANTS = ("auto", "tiled", "wide", "row")

# The launch plans (tilekit.runtime.gated, swiglu's too): (m, h[, sms], variant="auto", *, block, rows[, num_warps]).
config = functools.partial(gated.config, KERNEL, VARIANTS)
triton_config = functools.partial(gated.triton_config, KERNEL, VARIANTS)
cutile_config = functools.partial(gated.cutile_config, KERNEL, VARIANTS)
CUTILE_OCCUPANCY = gated.CUTILE_OCCUPANCY


def _check_inputs(x: torch.Tensor) -> int:
    """Validate x; return H."""
    bs.check_matrix(KERNEL, "x", x, DTYPES, "(m, 2H)")
    if x.shape[1] % 2:
        raise ValueError(f"silu_and_mul baseline: x's last dim must be even (2H), got {x.shape[1]}")
    return x.shape[1] // 2


def torch_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """PyTorch eager: silu of the gate half times the up half."""
    h = _check_inputs(x)
    return torch.nn.functional.silu(x[:, :h]) * x[:, h:]


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:
    from tilekit.runtime.triton_tiles import output_tile

    @triton.jit
    def _silu_mul_f32(g, u):
        # sigmoid as 1 / (1 + exp(-g)): exp(-g) = inf for very negative g gives 0, not NaN.
        return g / (1.0 + tl.exp(-g)) * u

    @triton.jit
    def _triton_tiled_kernel(x_ptr, y_ptr, m, h, stride_x, stride_y, ROWS: tl.constexpr, BLOCK: tl.constexpr):
        """One ROWS x BLOCK output tile per program; the 1-D program id walks column tiles fastest."""
        rows, cols, mask = output_tile(m, h, ROWS, BLOCK)
        gate = x_ptr + rows * stride_x + cols[None, :]
        out = y_ptr + rows * stride_y + cols[None, :]
        # x and out are touched once: evict_first keeps them from displacing anything useful.
        g = tl.load(gate, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        u = tl.load(gate + h, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        tl.store(out, _silu_mul_f32(g, u).to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")

    @triton.jit
    def _triton_row_kernel(x_ptr, y_ptr, h, stride_x, stride_y, BLOCK: tl.constexpr):
        """One row per program, BLOCK-wide chunks."""
        row = tl.program_id(0).to(tl.int64)
        x_row, y_row = x_ptr + row * stride_x, y_ptr + row * stride_y
        cols = tl.arange(0, BLOCK)
        for start in range(0, h, BLOCK):
            ok = start + cols < h
            g = tl.load(x_row + start + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            u = tl.load(x_row + h + start + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            y = _silu_mul_f32(g, u).to(y_ptr.dtype.element_ty)
            tl.store(y_row + start + cols, y, mask=ok, eviction_policy="evict_first")

    _TRITON_KERNELS = {"tiled": _triton_tiled_kernel, "wide": _triton_tiled_kernel, "row": _triton_row_kernel}


def triton_silu_and_mul(
    x: torch.Tensor, *, variant: str = "auto", block=None, rows=None, num_warps=None
) -> torch.Tensor:
    """silu_and_mul with our Triton kernels; `variant` and the knobs as in `triton_config`."""
    bs.require(triton, unavailable_reason, "triton")
    h = _check_inputs(x)
    knobs = {"block": block, "rows": rows, "num_warps": num_warps}
    return bs.launch_rows(_TRITON_KERNELS, triton_config, (x,), cols=h, variant=variant, knobs=knobs, one_row="row")


# -- cuTile Python: tilekit.runtime.gated_baselines' kernels (swiglu's too) --------------------------------


def cutile_silu_and_mul(
    x: torch.Tensor, *, variant: str = "auto", block=None, rows=None, occupancy: int = CUTILE_OCCUPANCY
) -> torch.Tensor:
    """silu_and_mul with our cuTile Python kernels; `variant`, block and rows as in `config`;
    occupancy 1..32, or -1 for the compiler's default."""
    bs.require(ct, unavailable_reason, "cutile")
    h = _check_inputs(x)
    bs.require_cuda(KERNEL, "x", x)
    kernels = {v: gated_baselines.cutile_kernel(v, occupancy) for v in VARIANTS[1:]}
    knobs = {"block": block, "rows": rows}
    return bs.launch_rows(
        kernels, cutile_config, (x[:, :h], x[:, h:]), ct=ct, variant=variant, knobs=knobs, one_row="row"
    )


BACKENDS = {
    "cutile": cutile_silu_and_mul,
    "triton": triton_silu_and_mul,
    "torch": torch_silu_and_mul,
    **providers.backends(
        tilegym=lambda ops, x: ops.silu_and_mul(x),
        liger=lambda ops, x: ops.swiglu.LigerFusedGateUpSiLUMulFunction.apply(x, False),
        liger_cutile="Liger's cuTile swiglu has only LigerSiLUMulFunction(a, b), which would copy both "
        "strided halves of x (.contiguous()) before its kernel: an unfair time; it fits the two-tensor swiglu op",
    ),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
