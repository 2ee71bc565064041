"""rms_norm_backward baselines: the implementations the cuTile Rust port (op.py) is timed against.

    dx = r * (w * dy - x̂ * mean(w * dy * x̂, -1)),  dw = sum over rows of dy * x̂,  x̂ = x * r,
    r = rsqrt(mean(x^2, -1) + eps)                                         (f32 inside)

Entries (dy, x, w, eps): ``triton_rms_norm_backward`` and ``cutile_rms_norm_backward`` (ours: the port's
algorithm, a persistent grid whose programs each hold whole rows, store dx and one row of f32 partial
sums of dw; torch sums those) write the port's one (m + 1, n) output. The others return (dx, dw)
apart, as their libraries make them (the kit checks them stacked: tilekit.runtime.kernel.stacked), and
start from the per-row rstd their forward saved for the backward, as a training step has it:
``torch_rms_norm_backward`` (PyTorch's fused kernel, aten._fused_rms_norm_backward), TileGym's cuTile
backward and Liger's (Triton, cuTile). That rstd (f32, as each forward saves it) is made once per
input tensor (`saved_rstd`: at the first, untimed call) and reused, so no baseline is timed with a
forward in it.
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers
from tilekit.runtime.norm_baselines import DTYPES

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "rms_norm_backward"
VARIANTS = ("auto",)
MAX_N = 16384  # whole rows in registers, as the port
TILE_ELEMS = 4096  # rows per tile: about this many elements (rows of 1024 and less: several rows a tile)
PROGRAMS_PER_SM = 2


def config(m: int, n: int, sms: int, variant: str = "auto") -> dict:
    """The persistent launch of our kernels: block the power of two >= n (whole rows), rows per tile
    for ~TILE_ELEMS elements, PROGRAMS_PER_SM programs an SM (at most the row tiles), Triton's warps.

    >>> config(16384, 4096, 132), config(100, 1000, 132)["rows"]
    ({'block': 4096, 'rows': 1, 'grid': 264, 'num_warps': 8}, 4)
    """
    bs.check_variant(KERNEL, variant, VARIANTS)
    if n > MAX_N:
        raise ValueError(f"{KERNEL} baseline: rows of at most {MAX_N} elements (whole rows), got n = {n}")
    block = bs.next_pow2(max(n, bs.MIN_BLOCK))
    rows = max(1, TILE_ELEMS // block)
    grid = max(1, min(-(-m // rows), PROGRAMS_PER_SM * sms))
    return {"block": block, "rows": rows, "grid": grid, "num_warps": 4 if block <= 2048 else 8 if block <= 8192 else 16}


def _check_inputs(dy, x, w) -> None:
    bs.check_matrix(KERNEL, "x", x, DTYPES)
    bs.check_matrix(KERNEL, "dy", dy, DTYPES)
    if dy.shape != x.shape or dy.dtype != x.dtype or tuple(w.shape) != (x.shape[1],) or w.dtype != x.dtype:
        raise ValueError(
            f"{KERNEL} baseline: dy must match x {tuple(x.shape)} {x.dtype} and w be ({x.shape[1]},) of that dtype, "
            f"got dy {tuple(dy.shape)} {dy.dtype}, w {tuple(w.shape)} {w.dtype}"
        )


def _launch(kernel_of, dy, x, w, eps):
    """out = (m + 1, n): our kernel's dx in rows [0, m) and f32 partial sums of dw per program, which
    torch sums into row m. Returns out."""
    _check_inputs(dy, x, w)
    (m, n), out = x.shape, torch.empty((x.shape[0] + 1, x.shape[1]), dtype=x.dtype, device=x.device)
    if out.numel():
        cfg = config(m, n, bs.num_sms(x))
        part = torch.empty((cfg["grid"], n), dtype=torch.float32, device=x.device)
        kernel_of(cfg, dy, x, w, out[:m], part, eps)
        out[m].copy_(part.sum(0))
    return out


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _triton_backward_kernel(
        dy_ptr, x_ptr, w_ptr, dx_ptr, part_ptr, m, n, stride_dy, stride_x, eps,
        ROWS: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        """Row tiles pid, pid + grid, ...: their dx, and the sum of dy * x̂ over them as row pid of part."""
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        dw = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        for tile in range(tl.program_id(0), tl.cdiv(m, ROWS), tl.num_programs(0)):
            rows = (tile * ROWS + tl.arange(0, ROWS)).to(tl.int64)
            mask = (rows < m)[:, None] & col_ok[None, :]
            x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            r = tl.rsqrt(tl.sum(x * x, axis=1) / n + eps)[:, None]
            x_hat = x * r
            w_dy = w * dy
            c = (tl.sum(w_dy * x_hat, axis=1) / n)[:, None]
            dx = ((w_dy - x_hat * c) * r).to(dx_ptr.dtype.element_ty)
            tl.store(dx_ptr + rows[:, None] * n + cols[None, :], dx, mask=mask)
            dw += dy * x_hat
        tl.store(part_ptr + tl.program_id(0) * n + cols, tl.sum(dw, axis=0), mask=col_ok)

    def _triton_kernel(cfg, dy, x, w, dx, part, eps):
        grid = (cfg["grid"],)
        _triton_backward_kernel[grid](
            dy, x, w, dx, part, x.shape[0], x.shape[1], dy.stride(0), x.stride(0), eps,
            ROWS=cfg["rows"], BLOCK=cfg["block"], num_warps=cfg["num_warps"],
        )  # fmt: skip


def triton_rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, eps: float, *, variant="auto"):
    """RMSNorm's gradients with our Triton kernel, into one (m + 1, n) output as the port's."""
    bs.require(triton, unavailable_reason, "triton")
    bs.check_variant(KERNEL, variant, VARIANTS)
    return _launch(_triton_kernel, dy, x, w, eps)


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:
    _ZERO = ct.PaddingMode.ZERO

    @ct.kernel
    def _cutile_backward_kernel(
        DY, X, W, DX, PART, EPS: ct.Constant[float], ROWS: ct.Constant[int], BLOCK: ct.Constant[int]
    ):
        """Row tiles bid, bid + grid, ...: their dx, and the sum of dy * x̂ over them as row bid of PART."""
        inv_n = ct.full((ROWS, 1), 1.0 / X.shape[1], dtype=ct.float32)
        w = ct.reshape(ct.astype(ct.load(W, index=(0,), shape=(BLOCK,), padding_mode=_ZERO), ct.float32), (1, BLOCK))
        dw = ct.full((ROWS, BLOCK), 0.0, dtype=ct.float32)
        for tile in range(ct.bid(0), ct.cdiv(X.shape[0], ROWS), ct.num_blocks(0)):
            x = ct.astype(ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO, latency=10), ct.float32)
            dy = ct.astype(
                ct.load(DY, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO, latency=10), ct.float32
            )
            r = ct.rsqrt(ct.sum(x * x, axis=1, keepdims=True) * inv_n + EPS)
            x_hat = x * r
            w_dy = w * dy
            c = ct.sum(w_dy * x_hat, axis=1, keepdims=True) * inv_n
            ct.store(DX, index=(tile, 0), tile=ct.astype((w_dy - x_hat * c) * r, DX.dtype), allow_tma=False)
            dw = dw + dy * x_hat
        ct.store(PART, index=(ct.bid(0), 0), tile=ct.sum(dw, axis=0, keepdims=True), allow_tma=False)

    def _cutile_kernel(cfg, dy, x, w, dx, part, eps):
        stream = torch.cuda.current_stream(x.device)
        args = (dy, x, w, dx, part, float(eps), cfg["rows"], cfg["block"])
        ct.launch(stream, (cfg["grid"],), _cutile_backward_kernel, args)


def cutile_rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, eps: float, *, variant="auto"):
    """RMSNorm's gradients with our cuTile Python kernel, into one (m + 1, n) output as the port's. eps
    is a compile-time constant of the kernel (one compile per distinct eps)."""
    bs.require(ct, unavailable_reason, "cutile")
    bs.check_variant(KERNEL, variant, VARIANTS)
    bs.require_cuda(KERNEL, "x", x)
    return _launch(_cutile_kernel, dy, x, w, eps)


# -- the libraries, from the rstd their forward saved -----------------------------------------------

SAVED = bs.ForwardSaved()  # the rstd the libraries' forwards saved, per input x


def saved_rstd(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The f32 rstd = rsqrt(mean(x^2, -1) + eps) per row of x, as PyTorch's, TileGym's and Liger's
    forwards (Llama casting) save it (shape (m,)); made once per x and eps (bs.ForwardSaved)."""
    return SAVED.get(x, lambda: torch.rsqrt(x.float().pow(2).mean(-1) + eps), float(eps))


def torch_rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, eps: float):
    """PyTorch's fused RMSNorm backward, what autograd of F.rms_norm runs on a GPU
    (aten._fused_rms_norm_backward; elsewhere its decomposition), from the forward's rstd: (dx, dw)."""
    _check_inputs(dy, x, w)
    op = torch.ops.aten._fused_rms_norm_backward
    if not x.is_cuda:  # the fused op has CUDA and meta kernels only: its reference decomposition
        op = torch._decomp.decomposition_table[op.default]
    rstd = saved_rstd(x, eps)[:, None]  # as _fused_rms_norm returns it: (m, 1)
    return tuple(op(dy, x, [x.shape[-1]], rstd, w, [True, True]))


def _liger(ops, dy, x, w, eps):
    """Liger's rms_norm_backward (Llama casting, offset 0, not in place) from the forward's rstd, with
    the block and warps its forward would pass (liger_kernel.ops.utils.calculate_settings' rule in
    0.8.5: the power of two >= n; 4 warps, 8 from 2048 lanes, 16 from 8192): (dx, dw)."""
    block = bs.next_pow2(x.shape[-1])
    warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    rstd = saved_rstd(x, eps)  # of the caller's x, before a copy
    dy, x = (t if t.is_contiguous() else t.contiguous() for t in (dy, x))  # it views them as rows (padded: a copy)
    return ops.rms_norm.rms_norm_backward(dy, x, w, rstd, 0.0, 0, block, warps, False, False)


def _tilegym(ops, dy, x, w, eps):
    """TileGym 1.5.1's cuTile RMSNorm backward (tilegym.ops.cutile.rms_norm.rms_norm_backward, its
    standalone entry; the autograd function of its rms_norm calls it) from the forward's rstd: (dx, dw)."""
    return providers.submodule(ops, "cutile.rms_norm").rms_norm_backward(x, dy, w, saved_rstd(x, eps))


BACKENDS = {
    "cutile": cutile_rms_norm_backward,
    "triton": triton_rms_norm_backward,
    "torch": torch_rms_norm_backward,
    **providers.backends(tilegym=_tilegym, liger=_liger, liger_cutile=_liger),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
