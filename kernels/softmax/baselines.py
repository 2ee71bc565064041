"""softmax baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :])))

x is a 2-D (m, n) tensor (f16, bf16 or f32) whose last dim is contiguous; its row stride may be
larger than n. Max, exponentials and sums are done in f32; the output has x's dtype, is allocated
here with torch.empty (contiguous) and written on torch's current stream. Lanes past n (and
masked -inf logits) contribute exp(-inf) = 0.

    from kernels.softmax.baselines import BACKENDS, unavailable_reason
    y = BACKENDS["triton"](x)                           # or "cutile", "torch"

Backends (every entry takes x and returns y): ``torch_softmax`` (``torch.softmax(x, -1)``,
PyTorch's own kernel), ``triton_softmax`` (our Triton kernels), ``cutile_softmax`` (our cuTile
Python kernels, ``cuda-tile`` 1.7.0). The last two share the row reductions' variants, picked with
``variant=``: row (x read and exponentiated once), multirow (persistent) and looped (online
softmax: pass 1 keeps a running max and a rescaled running sum per lane, pass 2 re-reads the row,
mostly from L2, exponentiates and stores); tilekit.baseline_support describes them, and what
triton and cuda.tile need. ``"auto"`` (default) takes looped when next_pow2(n) > 16384, else row
for both Triton and cuTile: on the H200 (scripts/sweep_variants.py --kernel softmax, 2026-11-29)
row beat multirow at every perf shape. The rules are ``triton_config`` / ``cutile_config`` (pure,
no GPU needed); every knob can be forced by keyword.
"""

import torch

from tilekit import baseline_support as bs

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "softmax"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VARIANTS = bs.ROW_VARIANTS  # ("auto", "row", "multirow", "looped")

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


def triton_config(
    m: int, n: int, sms: int, variant: str = "auto", *, block=None, rows=None, num_warps=None, ctas_per_sm=None
) -> dict:
    """The launch plan of `triton_softmax` for an (m, n) problem on a GPU with `sms` SMs:
    {"variant", "block", "rows", "num_warps", "grid"}. Pure; keywords force a knob."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    if variant == "auto":
        # row: on the H200 (CUPTI, L2 flushed, 2026-11-29, scripts/sweep_variants.py) one row per
        # program beat the persistent multirow form at every perf shape: 65536x1024 f16 0.076 ms
        # (multirow 0.090), 65536x4096 0.278 (0.351), 65536x8192 f32 1.091 (1.165).
        variant = "looped" if bs.row_block(n) > bs.MAX_ROW_BLOCK else "row"
    return bs.triton_row_plan(
        KERNEL, m, n, sms, variant, block=block, rows=rows, num_warps=num_warps, ctas_per_sm=ctas_per_sm
    )


if triton is not None:

    @triton.jit
    def _triton_rows_kernel(x_ptr, y_ptr, m, n, stride_x, stride_y, ROWS: tl.constexpr, BLOCK: tl.constexpr):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row
        tiles. With ROWS=1 and one program per row it is the plain one-row-per-program kernel."""
        cols = tl.arange(0, BLOCK)
        col_ok = cols < n
        for tile in range(tl.program_id(0), tl.cdiv(m, ROWS), tl.num_programs(0)):
            rows = tile * ROWS + tl.arange(0, ROWS)
            mask = (rows < m)[:, None] & col_ok[None, :]
            rows = rows.to(tl.int64)  # m * stride may exceed 2^31 elements
            # -inf past n: never the max, exp(-inf) = 0 adds nothing to the sum. x and y are
            # streamed once: evict_first keeps them from crowding L2.
            x = tl.load(
                x_ptr + rows[:, None] * stride_x + cols[None, :],
                mask=mask,
                other=float("-inf"),
                eviction_policy="evict_first",
            ).to(tl.float32)
            # Rows past m are all -inf and turn into NaN; the store mask drops them.
            e = tl.exp(x - tl.max(x, axis=1)[:, None])
            inv_sum = 1.0 / tl.sum(e, axis=1)
            tl.store(
                y_ptr + rows[:, None] * stride_y + cols[None, :],
                (e * inv_sum[:, None]).to(y_ptr.dtype.element_ty),
                mask=mask,
                eviction_policy="evict_first",
            )

    @triton.jit
    def _triton_looped_kernel(x_ptr, y_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
        """Looped form: one row per program; online max/sum over BLOCK-wide column tiles, then a
        second pass that exponentiates and stores."""
        row = tl.program_id(0).to(tl.int64)
        x_row = x_ptr + row * stride_x
        y_row = y_ptr + row * stride_y
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
            x = tl.load(x_row + start + cols, mask=ok, other=float("-inf"), eviction_policy="evict_first").to(
                tl.float32
            )
            tl.store(
                y_row + start + cols,
                (tl.exp(x - row_max) * inv_sum).to(y_ptr.dtype.element_ty),
                mask=ok,
                eviction_policy="evict_first",
            )


def triton_softmax(x: torch.Tensor, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """Softmax over the last dim with our Triton kernels; `variant` and the knobs as in
    `triton_config`."""
    bs.require(triton, unavailable_reason, "triton")
    _check_inputs(x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel():
        cfg = triton_config(*x.shape, bs.num_sms(x), variant, **knobs)
        kernel = _triton_looped_kernel if cfg["variant"] == "looped" else _triton_rows_kernel
        bs.launch_triton_rows(kernel, cfg, (x,), y)
    return y


# -- cuTile Python ------------------------------------------------------------------------------


def cutile_config(m: int, n: int, sms: int, variant: str = "auto", *, block=None, rows=None, ctas_per_sm=None) -> dict:
    """The launch plan of `cutile_softmax` for an (m, n) problem on a GPU with `sms` SMs:
    {"variant", "block", "rows", "grid"}. Pure; keywords force a knob."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    if variant == "auto":
        # row: on the H200 (same sweep) one row per program beat multirow at every perf shape:
        # 65536x1024 f16 0.096 ms (multirow 0.183), 65536x4096 0.317 (0.423), 65536x8192 f32
        # 1.034 (1.106).
        variant = "looped" if bs.row_block(n) > bs.MAX_ROW_BLOCK else "row"
    return bs.cutile_row_plan(KERNEL, m, n, sms, variant, block=block, rows=rows, ctas_per_sm=ctas_per_sm)


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
            x = ct.astype(
                ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_NEG_INF, latency=10), ct.float32
            )
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


def cutile_softmax(x: torch.Tensor, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """Softmax over the last dim with our cuTile Python kernels; `variant` and the knobs as in
    `cutile_config`."""
    bs.require(ct, unavailable_reason, "cutile")
    _check_inputs(x)
    bs.require_cuda(KERNEL, "x", x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel():
        cfg = cutile_config(*x.shape, bs.num_sms(x), variant, **knobs)
        kernel = _cutile_looped_kernel if cfg["variant"] == "looped" else _cutile_rows_kernel
        bs.launch_cutile_rows(ct, kernel, cfg, (x, y), x.device)
    return y


BACKENDS = {"cutile": cutile_softmax, "triton": triton_softmax, "torch": torch_softmax}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
