"""rms_norm baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w

x is a 2-D (m, n) tensor (f16, bf16 or f32) whose last dim is contiguous; its row stride may be
larger than n. w is (n,) in x's dtype. Sums of squares and scaling are done in f32; the output has
x's dtype, is allocated here with torch.empty (contiguous) and written on torch's current stream.

    from kernels.rms_norm.baselines import BACKENDS, unavailable_reason
    y = BACKENDS["triton"](x, w, 1e-6)                  # or "cutile", "torch"

Backends (every entry takes (x, w, eps) and returns y): ``torch_rms_norm``
(``torch.nn.functional.rms_norm``, PyTorch's fused op), ``triton_rms_norm`` (our Triton kernels),
``cutile_rms_norm`` (our cuTile Python kernels, ``cuda-tile`` 1.7.0). The last two share the row
reductions' variants, picked with ``variant=``: row, multirow (persistent; loads w once per
program) and looped (tilekit.baseline_support describes them, and what triton and cuda.tile need).
``"auto"`` (default) takes looped when next_pow2(n) > 16384; else Triton takes looped from n >=
1024 on (measured fastest on the H200), multirow when there are more row tiles than persistent
programs, else row; cuTile takes multirow (as TileGym's static-persistent mode does) once m > 2 x
SMs, else row. The rules are ``triton_config`` / ``cutile_config`` (pure, no GPU needed); every
knob can be forced by keyword, so a GPU run can time each variant and keep the faster:
scripts/sweep_variants.py does that run.
"""

import torch

from tilekit import baseline_support as bs

triton, tl, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "rms_norm"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VARIANTS = bs.ROW_VARIANTS  # ("auto", "row", "multirow", "looped")

MULTIROW_MAX_BLOCK = 2048  # auto: rows at most this wide go to the persistent multi-row form
# Triton auto takes the two-pass looped form from this row width on: on the H200 (CUPTI, L2
# flushed, 2026-11-29, scripts/sweep_variants.py) it beat row and multirow at every f16 perf
# shape timed: 262144x1024 0.289 ms (row 0.296, multirow 0.309), 262144x4096 1.026 (1.086,
# 1.267), 65536x16384 1.130 (1.442, 1.279).
TRITON_LOOPED_FROM = 1024


def _check_inputs(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Validate (x, w); return w as a contiguous vector (it is n elements: copying is free)."""
    bs.check_matrix(KERNEL, "x", x, DTYPES)
    if w.dtype != x.dtype:
        raise TypeError(f"rms_norm baseline: x and w must share one dtype of {DTYPES}, got {x.dtype} and {w.dtype}")
    if tuple(w.shape) != (x.shape[1],):
        raise ValueError(
            f"rms_norm baseline: w must have shape ({x.shape[1]},) for x of shape {tuple(x.shape)}, "
            f"got {tuple(w.shape)}"
        )
    if x.device != w.device:
        raise ValueError(f"rms_norm baseline: x is on {x.device} but w on {w.device}")
    return w.contiguous()


def torch_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """PyTorch's fused RMSNorm (the op a model would call)."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps)


# -- Triton -------------------------------------------------------------------------------------


def triton_config(
    m: int, n: int, sms: int, variant: str = "auto", *, block=None, rows=None, num_warps=None, ctas_per_sm=None
) -> dict:
    """The launch plan of `triton_rms_norm` for an (m, n) problem on a GPU with `sms` SMs:
    {"variant", "block", "rows", "num_warps", "grid"}. Pure; keywords force a knob."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    if variant == "auto":
        whole = bs.row_block(n)
        programs = sms * (ctas_per_sm or bs.TRITON_CTAS_PER_SM)
        short = whole <= MULTIROW_MAX_BLOCK and bs.cdiv(m, max(1, bs.TRITON_MULTIROW_TILE // whole)) > programs
        looped = whole > bs.MAX_ROW_BLOCK or whole >= TRITON_LOOPED_FROM
        variant = "looped" if looped else "multirow" if short else "row"
    return bs.triton_row_plan(
        KERNEL, m, n, sms, variant, block=block, rows=rows, num_warps=num_warps, ctas_per_sm=ctas_per_sm
    )


if triton is not None:

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
            rows = tile * ROWS + tl.arange(0, ROWS)
            mask = (rows < m)[:, None] & col_ok[None, :]
            rows = rows.to(tl.int64)  # m * stride may exceed 2^31 elements
            # x and y are streamed once: evict_first keeps them from pushing w out of L2.
            x = tl.load(
                x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first"
            ).to(tl.float32)
            inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / n + eps)
            y = x * inv_rms[:, None] * w[None, :]
            tl.store(
                y_ptr + rows[:, None] * stride_y + cols[None, :],
                y.to(y_ptr.dtype.element_ty),
                mask=mask,
                eviction_policy="evict_first",
            )

    @triton.jit
    def _triton_looped_kernel(x_ptr, w_ptr, y_ptr, n, stride_x, stride_y, eps, BLOCK: tl.constexpr):
        """Looped form: one row per program, two passes over BLOCK-wide column tiles."""
        row = tl.program_id(0).to(tl.int64)
        x_row = x_ptr + row * stride_x
        y_row = y_ptr + row * stride_y
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
            tl.store(
                y_row + start + cols,
                (x * inv_rms * w).to(y_ptr.dtype.element_ty),
                mask=ok,
                eviction_policy="evict_first",
            )


def triton_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """RMSNorm with our Triton kernels; `variant` and the knobs as in `triton_config`."""
    bs.require(triton, unavailable_reason, "triton")
    w = _check_inputs(x, w)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel():
        cfg = triton_config(*x.shape, bs.num_sms(x), variant, **knobs)
        kernel = _triton_looped_kernel if cfg["variant"] == "looped" else _triton_rows_kernel
        bs.launch_triton_rows(kernel, cfg, (x, w), y, (eps,))
    return y


# -- cuTile Python ------------------------------------------------------------------------------


def cutile_config(m: int, n: int, sms: int, variant: str = "auto", *, block=None, rows=None, ctas_per_sm=None) -> dict:
    """The launch plan of `cutile_rms_norm` for an (m, n) problem on a GPU with `sms` SMs:
    {"variant", "block", "rows", "grid"}. Pure; keywords force a knob."""
    bs.check_variant(KERNEL, variant, VARIANTS)
    if variant == "auto":  # persistent pays off once the row tiles make more than a couple of waves
        variant = "looped" if bs.row_block(n) > bs.MAX_ROW_BLOCK else "multirow" if m > 2 * sms else "row"
    return bs.cutile_row_plan(KERNEL, m, n, sms, variant, block=block, rows=rows, ctas_per_sm=ctas_per_sm)


if ct is not None:
    # Tiles past the array edge read as zero, so padded columns add nothing to the sum of
    # squares and padded rows are finite; stores past the edge are dropped by cuTile.
    _ZERO = ct.PaddingMode.ZERO

    @ct.kernel
    def _cutile_rows_kernel(X, W, Y, eps: ct.Constant[float], ROWS: ct.Constant[int], BLOCK: ct.Constant[int]):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row
        tiles (static persistent when the grid is smaller than the number of row tiles)."""
        n = X.shape[1]
        w = ct.astype(ct.load(W, index=(0,), shape=(BLOCK,), padding_mode=_ZERO), ct.float32)
        w = ct.reshape(w, (1, BLOCK))
        for tile in range(ct.bid(0), ct.cdiv(X.shape[0], ROWS), ct.num_blocks(0)):
            # latency: a DRAM-bound load; the hint lets tileiras issue it deeper ahead.
            x = ct.astype(ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO, latency=10), ct.float32)
            mean_sq = ct.sum(x * x, axis=1, keepdims=True) / n
            y = x * ct.rsqrt(mean_sq + eps) * w
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


def cutile_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """RMSNorm with our cuTile Python kernels; `variant` and the knobs as in `cutile_config`.
    eps is a compile-time constant of the kernel (one compile per distinct eps)."""
    bs.require(ct, unavailable_reason, "cutile")
    w = _check_inputs(x, w)
    bs.require_cuda(KERNEL, "x", x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel():
        cfg = cutile_config(*x.shape, bs.num_sms(x), variant, **knobs)
        kernel = _cutile_looped_kernel if cfg["variant"] == "looped" else _cutile_rows_kernel
        bs.launch_cutile_rows(ct, kernel, cfg, (x, w, y, float(eps)), x.device)
    return y


BACKENDS = {"cutile": cutile_rms_norm, "triton": triton_rms_norm, "torch": torch_rms_norm}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
