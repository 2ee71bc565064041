"""swiglu baselines: the implementations the cuTile Rust port (op.py) is timed against.

    out[r, j] = silu(a[r, j]) * b[r, j],   silu(a) = a * sigmoid(a)

a (gate) and b (up) are (m, H), f16/bf16/f32, last dim contiguous, each in rows of its own stride;
out is (m, H) in a's dtype. Entries (a, b) -> out: ``torch_swiglu`` (``F.silu(a) * b``: two
kernels, rounding silu(a) to the input dtype before the product, so it rounds twice),
``triton_swiglu`` and ``cutile_swiglu`` (ours, f32 inside), and the providers' (below). Plans and
cuTile kernels are silu_and_mul's tiled ones (its kernels take gate and up as two (m, H) arrays):
"tiled" (~4K-element output tiles, "auto"), "wide" (~8K); the Triton kernel is this op's.
"""

import functools

import torch

from kernels.silu_and_mul import baselines as sam
from tilekit.runtime import baseline_support as bs
from tilekit.runtime import gated, gated_baselines
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "swiglu"
DTYPES = sam.DTYPES
VARIANTS = ("auto", "tiled", "wide")
CUTILE_OCCUPANCY = gated.CUTILE_OCCUPANCY


# silu_and_mul's plans (tilekit.runtime.gated): (m, h, sms, variant="auto", *, block, rows[, num_warps]).
triton_config = functools.partial(gated.triton_config, KERNEL, VARIANTS)
cutile_config = functools.partial(gated.cutile_config, KERNEL, VARIANTS)


def _check_inputs(a: torch.Tensor, b: torch.Tensor) -> None:
    for name, t in (("a", a), ("b", b)):
        bs.check_matrix(KERNEL, name, t, DTYPES, "(m, H)")
    if a.shape != b.shape or a.dtype != b.dtype:
        got = f"a {tuple(a.shape)} {a.dtype}, b {tuple(b.shape)} {b.dtype}"
        raise ValueError(f"swiglu baseline: a and b must have one shape and dtype, got {got}")


def torch_swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PyTorch eager: silu(a), rounded to a's dtype, times b (rounded again)."""
    _check_inputs(a, b)
    return torch.nn.functional.silu(a) * b


if triton is not None:
    from tilekit.runtime.triton_tiles import output_tile

    @triton.jit
    def _triton_tiled_kernel(
        a_ptr, b_ptr, y_ptr, m, h, stride_a, stride_y, stride_b, ROWS: tl.constexpr, BLOCK: tl.constexpr
    ):
        """One ROWS x BLOCK output tile per program; the 1-D program id walks column tiles fastest."""
        rows, cols, mask = output_tile(m, h, ROWS, BLOCK)
        # a, b and out are touched once: evict_first keeps them from displacing anything useful.
        g = tl.load(a_ptr + rows * stride_a + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        u = tl.load(b_ptr + rows * stride_b + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        g, u = g.to(tl.float32), u.to(tl.float32)
        # sigmoid as 1 / (1 + exp(-g)): exp(-g) = inf for very negative g gives 0, not NaN.
        y = (g / (1.0 + tl.exp(-g)) * u).to(y_ptr.dtype.element_ty)
        tl.store(y_ptr + rows * stride_y + cols, y, mask=mask, eviction_policy="evict_first")


def triton_swiglu(a: torch.Tensor, b: torch.Tensor, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """swiglu with our Triton kernel; `variant` and the knobs (block, rows, num_warps) as in
    `triton_config`. b's row stride is the launch's one scalar (bs.launch_rows passes a's and y's)."""
    bs.require(triton, unavailable_reason, "triton")
    _check_inputs(a, b)
    kernels = dict.fromkeys(VARIANTS[1:], _triton_tiled_kernel)
    return bs.launch_rows(kernels, triton_config, (a, b), (b.stride(0),), variant=variant, knobs=knobs)


def cutile_swiglu(
    a: torch.Tensor, b: torch.Tensor, *, variant: str = "auto", occupancy: int = CUTILE_OCCUPANCY, **knobs
) -> torch.Tensor:
    """swiglu with silu_and_mul's cuTile Python kernels on the arrays a and b; `variant`, block and
    rows as in `cutile_config`; occupancy 1..32, or -1 for the compiler's default."""
    bs.require(ct, unavailable_reason, "cutile")
    _check_inputs(a, b)
    bs.require_cuda(KERNEL, "a", a)
    kernels = {v: gated_baselines.cutile_kernel(v, occupancy) for v in VARIANTS[1:]}
    return bs.launch_rows(kernels, cutile_config, (a, b), ct=ct, variant=variant, knobs=knobs)


# TileGym: its cuTile swiglu(a, b), what tilegym.ops.get_swiglu() returns under the cutile backend
# (one row per program, strided rows as given). Liger's LigerSiLUMulFunction (Triton and cuTile
# alike) makes a and b .contiguous() before its kernel: a copy of strided inputs, which the perf
# configs (contiguous) never pay.
BACKENDS = {
    "cutile": cutile_swiglu,
    "triton": triton_swiglu,
    "torch": torch_swiglu,
    **providers.backends(
        tilegym=lambda ops, a, b: ops.cutile.swiglu.swiglu(a, b),
        liger=lambda ops, a, b: ops.swiglu.LigerSiLUMulFunction.apply(a, b),
        liger_cutile=lambda ops, a, b: ops.swiglu.LigerSiLUMulFunction.apply(a, b),
    ),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
