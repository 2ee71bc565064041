"""softmax baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :])))   (f32 inside)

x is (m, n), f16/bf16/f32, last dim contiguous; y has x's dtype. Lanes past n and -inf logits
contribute exp(-inf) = 0. Entries x -> y: ``torch_softmax`` (``torch.softmax(x, -1)``),
``triton_softmax`` and ``cutile_softmax`` (ours, with the row reductions' variants of
tilekit.runtime.baseline_support; looped is an online softmax). `auto` takes row on both backends (looped
for rows too wide to hold): NOTES.md has the H200 sweep.
Opt-in entries from other libraries (tilekit.runtime.providers): tilegym, liger and liger_cutile.
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "softmax"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VARIANTS = bs.ROW_VARIANTS  # ("auto", "row", "multirow", "looped")
triton_config, cutile_config = bs.row_configs(KERNEL)

# The lowest finite f32: the looped forms start each lane's running max here rather than at -inf,
# so a lane that sees only -inf (padding, masked logits) rescales by exp(-inf) = 0, never by
# exp(-inf - -inf) = NaN.
F32_LOWEST = -3.4028234663852886e38


def _check_inputs(x: torch.Tensor) -> None:
    bs.check_matrix(KERNEL, "x", x, DTYPES)


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's softmax over the last dim (the op a model would call)."""
    return torch.softmax(x, dim=-1)


# -- Triton -------------------------------------------------------------------------------------

if triton is not None:
    from tilekit.runtime.triton_tiles import row_tile

    @triton.jit
    def _triton_rows_kernel(x_ptr, y_ptr, m, n, stride_x, stride_y, ROWS: tl.constexpr, BLOCK: tl.constexpr):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row
        tiles. With ROWS=1 and one program per row it is the plain one-row-per-program kernel."""
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n
        for tile in range(tl.program_id(0), tl.cdiv(m, ROWS), tl.num_programs(0)):
            x_rows, y_rows, mask = row_tile(x_ptr, y_ptr, stride_x, stride_y, tile, m, col_ok, ROWS)
            # -inf past n: never the max, exp(-inf) = 0 adds nothing to the sum. x and y are
            # streamed once: evict_first keeps them from crowding L2.
            x = tl.load(x_rows + cols[None, :], mask=mask, other=float("-inf"), eviction_policy="evict_first")
            x = x.to(tl.float32)
            # Rows past m are all -inf and turn into NaN; the store mask drops them.
            e = tl.exp(x - tl.max(x, axis=1)[:, None])
            y = e * (1.0 / tl.sum(e, axis=1))[:, None]
            tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")

    @triton.jit
    def _triton_looped_kernel(x_ptr, y_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
        """Looped form: one row per program; online max/sum over BLOCK-wide column tiles, then a
        second pass that exponentiates and stores."""
        row = tl.program_id(0).to(tl.int64)
        x_row, y_row = x_ptr + row * stride_x, y_ptr + row * stride_y
        cols = tl.arange(0, BLOCK)
        # Per-lane running max and sum, folded once at the end: no cross-lane reduction per tile.
        # F32_LOWEST as a literal: compiled @triton.jit code cannot read a plain module global.
        run_max = tl.full([BLOCK], -3.4028234663852886e38, dtype=tl.float32)
        run_sum = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            ok = start + cols < n
            # evict_last: pass 2 re-reads this row; keep it in L2 until then.
            x = tl.load(x_row + start + cols, mask=ok, other=float("-inf"), eviction_policy="evict_last").to(tl.float32)
            new_max = tl.maximum(run_max, x)
            run_sum = run_sum * tl.exp(run_max - new_max) + tl.exp(x - new_max)
            run_max = new_max
        row_max = tl.max(run_max, axis=0)
        inv_sum = 1.0 / tl.sum(run_sum * tl.exp(run_max - row_max), axis=0)
        for start in range(0, n, BLOCK):
            ok = start + cols < n
            x = tl.load(x_row + start + cols, mask=ok, other=float("-inf"), eviction_policy="evict_first")
            y = (tl.exp(x.to(tl.float32) - row_max) * inv_sum).to(y_ptr.dtype.element_ty)
            tl.store(y_row + start + cols, y, mask=ok, eviction_policy="evict_first")

    _TRITON_KERNELS = {"row": _triton_rows_kernel, "multirow": _triton_rows_kernel, "looped": _triton_looped_kernel}


def triton_softmax(x: torch.Tensor, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """Softmax over the last dim with our Triton kernels; `variant` and the knobs as in `triton_config`."""
    bs.require(triton, unavailable_reason, "triton")
    _check_inputs(x)
    return bs.launch_rows(_TRITON_KERNELS, triton_config, (x,), variant=variant, knobs=knobs)


# -- cuTile Python ------------------------------------------------------------------------------

if ct is not None:
    # Tiles past the array edge read as -inf: never the max, and exp(-inf) = 0 adds nothing to
    # the sum. Rows past the edge turn into NaN but stores past the edge are dropped by cuTile.
    _NEG_INF = ct.PaddingMode.NEG_INF

    @ct.kernel
    def _cutile_rows_kernel(X, Y, ROWS: ct.Constant[int], BLOCK: ct.Constant[int]):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row
        tiles (static persistent when the grid is smaller than the number of row tiles)."""
        for tile in range(ct.bid(0), ct.cdiv(X.shape[0], ROWS), ct.num_blocks(0)):
            # latency: a DRAM-bound load; the hint lets tileiras issue it deeper ahead.
            x = ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_NEG_INF, latency=10)
            x = ct.astype(x, ct.float32)
            e = ct.exp(x - ct.max(x, axis=1, keepdims=True))
            y = e * (1.0 / ct.sum(e, axis=1, keepdims=True))
            # Plain stores beat TMA stores for this streaming write (TileGym's H100 finding).
            ct.store(Y, index=(tile, 0), tile=ct.astype(y, Y.dtype), allow_tma=False)

    @ct.kernel
    def _cutile_looped_kernel(X, Y, BLOCK: ct.Constant[int]):
        """Looped form: one row per program, online max/sum over (1, BLOCK) column tiles, then a
        second pass that exponentiates and stores."""
        row = ct.bid(0)
        col_tiles = ct.cdiv(X.shape[1], BLOCK)
        run_max = ct.full((1, BLOCK), F32_LOWEST, dtype=ct.float32)
        run_sum = ct.zeros((1, BLOCK), dtype=ct.float32)
        for j in range(col_tiles):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, BLOCK), padding_mode=_NEG_INF), ct.float32)
            new_max = ct.maximum(run_max, x)
            run_sum = run_sum * ct.exp(run_max - new_max) + ct.exp(x - new_max)
            run_max = new_max
        row_max = ct.max(run_max, axis=1, keepdims=True)
        inv_sum = 1.0 / ct.sum(run_sum * ct.exp(run_max - row_max), axis=1, keepdims=True)
        for j in range(col_tiles):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, BLOCK), padding_mode=_NEG_INF), ct.float32)
            ct.store(Y, index=(row, j), tile=ct.astype(ct.exp(x - row_max) * inv_sum, Y.dtype), allow_tma=False)

    _CUTILE_KERNELS = {"row": _cutile_rows_kernel, "multirow": _cutile_rows_kernel, "looped": _cutile_looped_kernel}


def cutile_softmax(x: torch.Tensor, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """Softmax over the last dim with our cuTile Python kernels; `variant` and the knobs as in `cutile_config`."""
    bs.require(ct, unavailable_reason, "cutile")
    _check_inputs(x)
    bs.require_cuda(KERNEL, "x", x)
    return bs.launch_rows(_CUTILE_KERNELS, cutile_config, (x,), variant=variant, knobs=knobs, ct=ct)


LIGER_TRITON_MAX_N = 65536  # liger_kernel.ops.utils.calculate_settings: one power-of-two block per row


def liger_softmax(function, x):
    """Liger's Triton softmax, which refuses rows longer than one 64K block (vocabulary rows)."""
    if x.shape[-1] > LIGER_TRITON_MAX_N:
        raise bs.NotServed(
            f"Liger's Triton softmax serves rows of at most {LIGER_TRITON_MAX_N} (one block per row); n = {x.shape[-1]}"
        )
    return function.apply(x)


BACKENDS = {
    "cutile": cutile_softmax,
    "triton": triton_softmax,
    "torch": torch_softmax,
    **providers.backends(
        tilegym=lambda ops, x: ops.softmax(x),
        liger=lambda ops, x: liger_softmax(ops.softmax.LigerSoftmaxFunction, x),
        liger_cutile=lambda ops, x: ops.softmax.LigerSoftmaxFunction.apply(x),
    ),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
