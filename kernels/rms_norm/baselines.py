"""rms_norm baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w      (f32 inside; y in x's dtype)

x is (m, n), f16/bf16/f32, last dim contiguous; w is (n,) in x's dtype. Entries (x, w, eps) -> y:
``torch_rms_norm`` (PyTorch's fused op), ``triton_rms_norm`` and ``cutile_rms_norm`` (ours, with the
row reductions' variants of tilekit.baseline_support), whose `auto` rules are tilekit.norm.AUTO.
Opt-in entries from other libraries (tilekit.providers): tilegym, liger and liger_cutile.
"""

import torch

from tilekit import baseline_support as bs
from tilekit import norm
from tilekit import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "rms_norm"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VARIANTS = bs.ROW_VARIANTS  # ("auto", "row", "multirow", "looped")
triton_config, cutile_config = bs.row_configs(KERNEL, norm.AUTO)  # auto: tilekit.norm (layer_norm's too)


def _check_inputs(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Validate (x, w); return w as a contiguous vector (it is n elements: copying is free)."""
    bs.check_matrix(KERNEL, "x", x, DTYPES)
    if tuple(w.shape) != (x.shape[1],) or w.dtype != x.dtype or w.device != x.device:
        raise (TypeError if w.dtype != x.dtype else ValueError)(
            f"rms_norm baseline: w must have shape ({x.shape[1]},) and share one dtype of {DTYPES} and the device "
            f"with x ({x.dtype} on {x.device}), got {tuple(w.shape)} {w.dtype} on {w.device}"
        )
    return w.contiguous()


def torch_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """PyTorch's fused RMSNorm (the op a model would call)."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps)


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:
    from tilekit.triton_tiles import row_tile

    @triton.jit
    def _triton_rows_kernel(
        x_ptr, w_ptr, y_ptr, m, n, stride_x, stride_y, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr
    ):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row
        tiles. With ROWS=1 and one program per row it is the plain one-row-per-program kernel."""
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n
        # w is reused by every row this program touches: load it once, keep it in L2 too.
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        for tile in range(tl.program_id(0), tl.cdiv(m, ROWS), tl.num_programs(0)):
            x_rows, y_rows, mask = row_tile(x_ptr, y_ptr, stride_x, stride_y, tile, m, col_ok, ROWS)
            # x and y are streamed once: evict_first keeps them from pushing w out of L2.
            x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            y = x * tl.rsqrt(tl.sum(x * x, axis=1) / n + eps)[:, None] * w[None, :]
            tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")

    @triton.jit
    def _triton_looped_kernel(x_ptr, w_ptr, y_ptr, n, stride_x, stride_y, eps, BLOCK: tl.constexpr):
        """Looped form: one row per program, two passes over BLOCK-wide column tiles."""
        row = tl.program_id(0).to(tl.int64)
        x_row, y_row = x_ptr + row * stride_x, y_ptr + row * stride_y
        cols = tl.arange(0, BLOCK)
        # Per-lane partial sums, reduced once at the end: one tree reduction instead of one
        # per tile, and a better-conditioned sum for long rows.
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            ok = start + cols < n
            # evict_last: pass 2 re-reads this row; keep it in L2 until then.
            x = tl.load(x_row + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            acc += x * x
        inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / n + eps)
        for start in range(0, n, BLOCK):
            ok = start + cols < n
            x = tl.load(x_row + start + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            y = (x * inv_rms * w).to(y_ptr.dtype.element_ty)
            tl.store(y_row + start + cols, y, mask=ok, eviction_policy="evict_first")

    _TRITON_KERNELS = {"row": _triton_rows_kernel, "multirow": _triton_rows_kernel, "looped": _triton_looped_kernel}


def triton_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """RMSNorm with our Triton kernels; `variant` and the knobs as in `triton_config`."""
    bs.require(triton, unavailable_reason, "triton")
    w = _check_inputs(x, w)
    return bs.launch_rows(_TRITON_KERNELS, triton_config, (x, w), (eps,), variant=variant, knobs=knobs)


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:
    # Tiles past the array edge read as zero, so padded columns add nothing to the sum of
    # squares and padded rows are finite; stores past the edge are dropped by cuTile.
    _ZERO = ct.PaddingMode.ZERO

    @ct.kernel
    def _cutile_rows_kernel(X, W, Y, eps: ct.Constant[float], ROWS: ct.Constant[int], BLOCK: ct.Constant[int]):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row
        tiles (static persistent when the grid is smaller than the number of row tiles)."""
        n = X.shape[1]
        w = ct.reshape(ct.astype(ct.load(W, index=(0,), shape=(BLOCK,), padding_mode=_ZERO), ct.float32), (1, BLOCK))
        for tile in range(ct.bid(0), ct.cdiv(X.shape[0], ROWS), ct.num_blocks(0)):
            # latency: a DRAM-bound load; the hint lets tileiras issue it deeper ahead.
            x = ct.astype(ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO, latency=10), ct.float32)
            y = x * ct.rsqrt(ct.sum(x * x, axis=1, keepdims=True) / n + eps) * w
            # Plain stores beat TMA stores for this streaming write (TileGym's H100 finding).
            ct.store(Y, index=(tile, 0), tile=ct.astype(y, Y.dtype), allow_tma=False)

    @ct.kernel
    def _cutile_looped_kernel(X, W, Y, eps: ct.Constant[float], BLOCK: ct.Constant[int]):
        """Looped form: one row per program, two passes over (1, BLOCK) column tiles."""
        row = ct.bid(0)
        n = X.shape[1]
        col_tiles = ct.cdiv(n, BLOCK)
        acc = ct.zeros((1, BLOCK), dtype=ct.float32)  # per-lane partial sums, reduced once
        for j in range(col_tiles):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            acc = acc + x * x
        inv_rms = ct.rsqrt(ct.sum(acc, axis=1, keepdims=True) / n + eps)
        for j in range(col_tiles):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            w = ct.astype(ct.load(W, index=(j,), shape=(BLOCK,), padding_mode=_ZERO), ct.float32)
            y = x * inv_rms * ct.reshape(w, (1, BLOCK))
            ct.store(Y, index=(row, j), tile=ct.astype(y, Y.dtype), allow_tma=False)

    _CUTILE_KERNELS = {"row": _cutile_rows_kernel, "multirow": _cutile_rows_kernel, "looped": _cutile_looped_kernel}


def cutile_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """RMSNorm with our cuTile Python kernels; `variant` and the knobs as in `cutile_config`.
    eps is a compile-time constant of the kernel (one compile per distinct eps)."""
    bs.require(ct, unavailable_reason, "cutile")
    w = _check_inputs(x, w)
    bs.require_cuda(KERNEL, "x", x)
    return bs.launch_rows(_CUTILE_KERNELS, cutile_config, (x, w), (float(eps),), variant=variant, knobs=knobs, ct=ct)


def liger_rms_norm(ops, x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Liger's RMSNorm (Triton or cuTile: `ops`) as Llama's: offset 0, casting_mode "llama" (only
    the inverse RMS in f32), not in place."""
    return ops.rms_norm.LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False)


BACKENDS = {
    "cutile": cutile_rms_norm,
    "triton": triton_rms_norm,
    "torch": torch_rms_norm,
    **providers.backends(
        tilegym=lambda ops, x, w, eps: ops.rms_norm(x, (x.shape[-1],), w, eps),
        liger=liger_rms_norm,
        liger_cutile=liger_rms_norm,
    ),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
