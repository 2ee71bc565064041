"""rms_norm's and layer_norm's baseline kernels (Triton and cuTile Python): one kernel per form,
LAYER (compile time) choosing the normalization. The row forms of tilekit.runtime.baseline_support.

    LAYER false:  y = x * rsqrt(mean(x^2) + eps) * w                (b is not read)
    LAYER true:   y = (x - mean) * rsqrt(var + eps) * w + b          (f32 statistics)

layer_norm's statistics as its port computes them: two passes over a row held whole (row,
multirow), shifted sums over a looped row. Entries: `launch(backend, ...)`.
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import norm

# The inputs' dtypes (tilekit.runtime.norm.DTYPES) as torch dtypes, for the baselines' checks.
DTYPES = tuple(getattr(torch, d) for d in norm.DTYPES)

triton, tl, _ = bs.import_triton()
ct, _ = bs.import_cutile()

if triton is not None:
    from tilekit.runtime.triton_tiles import row_tile

    @triton.jit
    def _triton_rows_kernel(
        x_ptr, w_ptr, b_ptr, y_ptr, m, n, stride_x, stride_y, eps,
        LAYER: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr,
    ):  # fmt: skip
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row tiles.
        With ROWS=1 and one program per row it is the plain one-row-per-program kernel."""
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n
        # w (and b) are reused by every row this program touches: load once, keep them in L2.
        w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        if LAYER:
            b = tl.load(b_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        for tile in range(tl.program_id(0), tl.cdiv(m, ROWS), tl.num_programs(0)):
            x_rows, y_rows, mask = row_tile(x_ptr, y_ptr, stride_x, stride_y, tile, m, col_ok, ROWS)
            # x and y are streamed once: evict_first keeps them from pushing w out of L2.
            x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            if LAYER:  # two passes over the registers: the mean, then the squared deviations
                d = tl.where(mask, x - (tl.sum(x, axis=1) / n)[:, None], 0.0)
                y = d * tl.rsqrt(tl.sum(d * d, axis=1) / n + eps)[:, None] * w[None, :] + b[None, :]
            else:
                y = x * tl.rsqrt(tl.sum(x * x, axis=1) / n + eps)[:, None] * w[None, :]
            tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")

    @triton.jit
    def _triton_looped_kernel(
        x_ptr, w_ptr, b_ptr, y_ptr, n, stride_x, stride_y, eps, LAYER: tl.constexpr, BLOCK: tl.constexpr
    ):
        """Looped form: one row per program, two passes over BLOCK-wide column tiles: the
        statistics (per-lane partial sums, reduced once at the end), then the normalization."""
        row = tl.program_id(0).to(tl.int64)
        x_row, y_row = x_ptr + row * stride_x, y_ptr + row * stride_y
        cols = tl.arange(0, BLOCK)
        if LAYER:  # shifted sums; the shift: the first column tile's mean
            x0 = tl.load(x_row + cols, mask=cols < n, other=0.0).to(tl.float32)
            shift = tl.sum(x0, axis=0) / tl.sum((cols < n).to(tl.float32), axis=0)
            acc1 = tl.zeros([BLOCK], dtype=tl.float32)
        acc2 = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            ok = start + cols < n
            # evict_last: pass 2 re-reads this row; keep it in L2 until then.
            x = tl.load(x_row + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            if LAYER:
                d = tl.where(ok, x - shift, 0.0)
                acc1 += d
                acc2 += d * d
            else:
                acc2 += x * x
        if LAYER:
            s1, s2 = tl.sum(acc1, axis=0) / n, tl.sum(acc2, axis=0) / n
            mean, rstd = shift + s1, tl.rsqrt(tl.maximum(s2 - s1 * s1, 0.0) + eps)
        else:
            rstd = tl.rsqrt(tl.sum(acc2, axis=0) / n + eps)
        for start in range(0, n, BLOCK):
            ok = start + cols < n
            x = tl.load(x_row + start + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            if LAYER:
                b = tl.load(b_ptr + start + cols, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
                tl.store(y_row + start + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)
            else:
                y = (x * rstd * w).to(y_ptr.dtype.element_ty)
                tl.store(y_row + start + cols, y, mask=ok, eviction_policy="evict_first")

    _TRITON_KERNELS = {"row": _triton_rows_kernel, "multirow": _triton_rows_kernel, "looped": _triton_looped_kernel}


if ct is not None:
    # Tiles past the array edge read as zero, so padded columns add nothing to the sums and padded
    # rows are finite; stores past the edge are dropped by cuTile.
    _ZERO = ct.PaddingMode.ZERO

    @ct.kernel
    def _cutile_rows_kernel(
        X, W, B, Y, eps: ct.Constant[float], LAYER: ct.Constant[int], ROWS: ct.Constant[int], BLOCK: ct.Constant[int]
    ):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row tiles
        (static persistent when the grid is smaller than the number of row tiles). W, B: (1, n)."""
        n = X.shape[1]
        w = ct.astype(ct.load(W, index=(0, 0), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
        if LAYER:
            keep = ct.reshape(ct.arange(BLOCK, dtype=ct.int32) < n, (1, BLOCK))
            b = ct.astype(ct.load(B, index=(0, 0), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
        for tile in range(ct.bid(0), ct.cdiv(X.shape[0], ROWS), ct.num_blocks(0)):
            # latency: a DRAM-bound load; the hint lets tileiras issue it deeper ahead.
            x = ct.astype(ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO, latency=10), ct.float32)
            if LAYER:
                d = ct.where(keep, x - ct.sum(x, axis=1, keepdims=True) / n, ct.zeros((ROWS, BLOCK), dtype=ct.float32))
                y = d * ct.rsqrt(ct.sum(d * d, axis=1, keepdims=True) / n + eps) * w + b
            else:
                y = x * ct.rsqrt(ct.sum(x * x, axis=1, keepdims=True) / n + eps) * w
            # Plain stores beat TMA stores for this streaming write (TileGym's H100 finding).
            ct.store(Y, index=(tile, 0), tile=ct.astype(y, Y.dtype), allow_tma=False)

    @ct.kernel
    def _cutile_looped_kernel(X, W, B, Y, eps: ct.Constant[float], LAYER: ct.Constant[int], BLOCK: ct.Constant[int]):
        """Looped form: one row per program, two passes over (1, BLOCK) column tiles. W, B: (1, n)."""
        row, n = ct.bid(0), X.shape[1]
        acc2 = ct.zeros((1, BLOCK), dtype=ct.float32)  # per-lane partial sums, reduced once
        if LAYER:  # shifted sums; the shift: the first column tile's mean
            cols = ct.reshape(ct.arange(BLOCK, dtype=ct.int32), (1, BLOCK))
            x0 = ct.astype(ct.load(X, index=(row, 0), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            shift = ct.sum(x0, axis=1, keepdims=True) / ct.minimum(n, BLOCK)
            acc1 = ct.zeros((1, BLOCK), dtype=ct.float32)
        for j in range(ct.cdiv(n, BLOCK)):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            if LAYER:
                d = ct.where(cols + j * BLOCK < n, x - shift, ct.zeros((1, BLOCK), dtype=ct.float32))
                acc1 = acc1 + d
                acc2 = acc2 + d * d
            else:
                acc2 = acc2 + x * x
        if LAYER:
            s1, s2 = ct.sum(acc1, axis=1, keepdims=True) / n, ct.sum(acc2, axis=1, keepdims=True) / n
            mean, rstd = shift + s1, ct.rsqrt(ct.maximum(s2 - s1 * s1, 0.0) + eps)
        else:
            rstd = ct.rsqrt(ct.sum(acc2, axis=1, keepdims=True) / n + eps)
        for j in range(ct.cdiv(n, BLOCK)):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            w = ct.astype(ct.load(W, index=(0, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            if LAYER:
                b = ct.astype(ct.load(B, index=(0, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
                y = (x - mean) * rstd * w + b
            else:
                y = x * rstd * w
            ct.store(Y, index=(row, j), tile=ct.astype(y, Y.dtype), allow_tma=False)

    _CUTILE_KERNELS = {"row": _cutile_rows_kernel, "multirow": _cutile_rows_kernel, "looped": _cutile_looped_kernel}


def launch(backend: str, config, x, w, b, eps: float, *, layer: bool, variant: str, knobs: dict):
    """y of x (m, n) normalized with our `backend` ("triton" or "cutile") kernels: layer_norm's
    formula when `layer`, else rms_norm's (b unused: pass any (n,) tensor). w, b: (n,), contiguous;
    `variant` and the knobs as in `config`."""
    if backend == "triton":
        return bs.launch_rows(_TRITON_KERNELS, config, (x, w, b), (eps, layer), variant=variant, knobs=knobs)
    operands, scalars = (x, w.view(1, -1), b.view(1, -1)), (float(eps), int(layer))
    return bs.launch_rows(_CUTILE_KERNELS, config, operands, scalars, variant=variant, knobs=knobs, ct=ct)
