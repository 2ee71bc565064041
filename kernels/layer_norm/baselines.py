"""layer_norm baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y[r, :] = (x[r, :] - mean) * rsqrt(var + eps) * w + b      (f32 inside; y in x's dtype)

x is (m, n), f16/bf16/f32, last dim contiguous; w and b are (n,) in x's dtype, or None. Entries
(x, w, b, eps) -> y: ``torch_layer_norm`` (PyTorch's op), ``triton_layer_norm`` and
``cutile_layer_norm`` (ours, with the row reductions' variants of tilekit.baseline_support; the
statistics as the port computes them: two passes over a row held whole, shifted sums over a looped
row), and the providers' entries. All but torch take w and b: ones and zeros stand in for an absent
one (`_check_inputs`).
"""

import torch

from kernels.rms_norm.baselines import DTYPES
from tilekit import baseline_support as bs
from tilekit import norm
from tilekit import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "layer_norm"
VARIANTS = bs.ROW_VARIANTS  # ("auto", "row", "multirow", "looped")
# DTYPES and auto are rms_norm's (tilekit.norm): the same row reduction shape and bytes, until an
# H200 sweep says otherwise.
triton_config, cutile_config = bs.row_configs(KERNEL, norm.AUTO)


def _check_inputs(x: torch.Tensor, w, b) -> tuple:
    """Validate (x, w, b); return (x, w, b) with ones for an absent w and zeros for an absent b (n
    elements, allocated per call: the correctness shapes only, every perf config has both)."""
    bs.check_matrix(KERNEL, "x", x, DTYPES)
    for name, t in (("w", w), ("b", b)):
        if t is not None and (tuple(t.shape) != (x.shape[1],) or t.dtype != x.dtype or t.device != x.device):
            raise (TypeError if t.dtype != x.dtype else ValueError)(
                f"layer_norm baseline: {name} must be None or have shape ({x.shape[1]},) and share one dtype of "
                f"{DTYPES} and the device with x ({x.dtype} on {x.device}), got {tuple(t.shape)} {t.dtype} on {t.device}"
            )
    like = {"size": x.shape[1:], "dtype": x.dtype, "device": x.device}
    return x, torch.ones(**like) if w is None else w.contiguous(), torch.zeros(**like) if b is None else b.contiguous()


def torch_layer_norm(x: torch.Tensor, w, b, eps: float) -> torch.Tensor:
    """PyTorch's fused LayerNorm (the op a model would call)."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:
    from tilekit.triton_tiles import row_tile

    @triton.jit
    def _triton_rows_kernel(
        x_ptr, w_ptr, b_ptr, y_ptr, m, n, stride_x, stride_y, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr
    ):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row tiles;
        two passes over the registers (mean, then the sum of squared deviations)."""
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n
        # w and b are reused by every row this program touches: load them once, keep them in L2.
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(b_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        for tile in range(tl.program_id(0), tl.cdiv(m, ROWS), tl.num_programs(0)):
            x_rows, y_rows, mask = row_tile(x_ptr, y_ptr, stride_x, stride_y, tile, m, col_ok, ROWS)
            x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            d = tl.where(mask, x - (tl.sum(x, axis=1) / n)[:, None], 0.0)
            y = d * tl.rsqrt(tl.sum(d * d, axis=1) / n + eps)[:, None] * w[None, :] + b[None, :]
            tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")

    @triton.jit
    def _triton_looped_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n, stride_x, stride_y, eps, BLOCK: tl.constexpr):
        """Looped form: one row per program; shifted sums (shift: the first column tile's mean),
        then a second pass to normalize."""
        row = tl.program_id(0).to(tl.int64)
        x_row, y_row = x_ptr + row * stride_x, y_ptr + row * stride_y
        cols = tl.arange(0, BLOCK)
        x0 = tl.load(x_row + cols, mask=cols < n, other=0.0).to(tl.float32)
        shift = tl.sum(x0, axis=0) / tl.sum((cols < n).to(tl.float32), axis=0)
        acc1 = tl.zeros([BLOCK], dtype=tl.float32)
        acc2 = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            ok = start + cols < n
            # evict_last: pass 2 re-reads this row; keep it in L2 until then.
            x = tl.load(x_row + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            d = tl.where(ok, x - shift, 0.0)
            acc1 += d
            acc2 += d * d
        s1, s2 = tl.sum(acc1, axis=0) / n, tl.sum(acc2, axis=0) / n
        mean, rstd = shift + s1, tl.rsqrt(tl.maximum(s2 - s1 * s1, 0.0) + eps)
        for start in range(0, n, BLOCK):
            ok = start + cols < n
            x = tl.load(x_row + start + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            b = tl.load(b_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + start + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)

    _TRITON_KERNELS = {"row": _triton_rows_kernel, "multirow": _triton_rows_kernel, "looped": _triton_looped_kernel}


def triton_layer_norm(x: torch.Tensor, w, b, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """LayerNorm with our Triton kernels; `variant` and the knobs as in `triton_config`."""
    bs.require(triton, unavailable_reason, "triton")
    return bs.launch_rows(_TRITON_KERNELS, triton_config, _check_inputs(x, w, b), (eps,), variant=variant, knobs=knobs)


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:
    _ZERO = ct.PaddingMode.ZERO  # tiles past the array edge read as zero; stores there are dropped

    @ct.kernel
    def _cutile_rows_kernel(X, W, B, Y, eps: ct.Constant[float], ROWS: ct.Constant[int], BLOCK: ct.Constant[int]):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row tiles
        (static persistent when the grid is smaller than the number of row tiles). W, B: (1, n)."""
        n = X.shape[1]
        keep = ct.reshape(ct.arange(BLOCK, dtype=ct.int32) < n, (1, BLOCK))
        w = ct.astype(ct.load(W, index=(0, 0), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
        b = ct.astype(ct.load(B, index=(0, 0), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
        for tile in range(ct.bid(0), ct.cdiv(X.shape[0], ROWS), ct.num_blocks(0)):
            x = ct.astype(ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO, latency=10), ct.float32)
            d = ct.where(keep, x - ct.sum(x, axis=1, keepdims=True) / n, ct.zeros((ROWS, BLOCK), dtype=ct.float32))
            y = d * ct.rsqrt(ct.sum(d * d, axis=1, keepdims=True) / n + eps) * w + b
            ct.store(Y, index=(tile, 0), tile=ct.astype(y, Y.dtype), allow_tma=False)

    @ct.kernel
    def _cutile_looped_kernel(X, W, B, Y, eps: ct.Constant[float], BLOCK: ct.Constant[int]):
        """Looped form: one row per program, shifted sums over (1, BLOCK) column tiles, then a
        second pass to normalize. W, B: (1, n)."""
        row, n = ct.bid(0), X.shape[1]
        cols = ct.reshape(ct.arange(BLOCK, dtype=ct.int32), (1, BLOCK))
        x0 = ct.astype(ct.load(X, index=(row, 0), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
        shift = ct.sum(x0, axis=1, keepdims=True) / ct.minimum(n, BLOCK)
        acc1 = ct.zeros((1, BLOCK), dtype=ct.float32)
        acc2 = ct.zeros((1, BLOCK), dtype=ct.float32)
        for j in range(ct.cdiv(n, BLOCK)):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            d = ct.where(cols + j * BLOCK < n, x - shift, ct.zeros((1, BLOCK), dtype=ct.float32))
            acc1 = acc1 + d
            acc2 = acc2 + d * d
        s1, s2 = ct.sum(acc1, axis=1, keepdims=True) / n, ct.sum(acc2, axis=1, keepdims=True) / n
        mean, rstd = shift + s1, ct.rsqrt(ct.maximum(s2 - s1 * s1, 0.0) + eps)
        for j in range(ct.cdiv(n, BLOCK)):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            w = ct.astype(ct.load(W, index=(0, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            b = ct.astype(ct.load(B, index=(0, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            ct.store(Y, index=(row, j), tile=ct.astype((x - mean) * rstd * w + b, Y.dtype), allow_tma=False)

    _CUTILE_KERNELS = {"row": _cutile_rows_kernel, "multirow": _cutile_rows_kernel, "looped": _cutile_looped_kernel}


def cutile_layer_norm(x: torch.Tensor, w, b, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """LayerNorm with our cuTile Python kernels; `variant` and the knobs as in `cutile_config`.
    eps is a compile-time constant of the kernel (one compile per distinct eps)."""
    bs.require(ct, unavailable_reason, "cutile")
    x, w, b = _check_inputs(x, w, b)
    bs.require_cuda(KERNEL, "x", x)
    operands = (x, w.view(1, -1), b.view(1, -1))
    return bs.launch_rows(_CUTILE_KERNELS, cutile_config, operands, (float(eps),), variant=variant, knobs=knobs, ct=ct)


def tilegym_layer_norm(ops, x, w, b, eps):
    """TileGym's public layer_norm, which normalizes dims [start_dim, end_dim): (1, 2) of (m, n)."""
    x, w, b = _check_inputs(x, w, b)
    return ops.layer_norm(x, 1, 2, w, b, eps)


def liger_layer_norm(ops, x, w, b, eps):
    """Liger's LayerNorm (Triton or cuTile: `ops`), forward only (it also writes mean and rstd)."""
    return ops.layer_norm.LigerLayerNormFunction.apply(*_check_inputs(x, w, b), eps)


BACKENDS = {
    "cutile": cutile_layer_norm,
    "triton": triton_layer_norm,
    "torch": torch_layer_norm,
    **providers.backends(
        # TileGym's public layer_norm normalizes dims [start_dim, end_dim): here the last one
        tilegym=tilegym_layer_norm,
        liger=liger_layer_norm,
        liger_cutile=liger_layer_norm,
    ),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
