"""rms_norm baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w

x is a 2-D (m, n) tensor (f16, bf16 or f32) whose last dim is contiguous; its row stride may be
larger than n. w is (n,) in x's dtype. Sums of squares and scaling are done in f32; the output has
x's dtype, is allocated here with torch.empty (contiguous) and written on torch's current stream.

    from kernels.rms_norm.baselines import BACKENDS, unavailable_reason
    y = BACKENDS["triton"](x, w, 1e-6)                  # or "cutile", "torch"

Backends (every entry takes (x, w, eps) and returns y):

* ``torch_rms_norm``  -- ``torch.nn.functional.rms_norm``, PyTorch's fused op.
* ``triton_rms_norm`` -- our Triton kernels.
* ``cutile_rms_norm`` -- our cuTile Python kernels (``cuda-tile`` 1.7.0, ``import cuda.tile``).

The Triton and cuTile entries share three variants, picked with ``variant=``:

* ``"row"``      -- one row per program; the whole row is one BLOCK = next_pow2(n) tile held in
                    registers, so x is read once. Good up to n ~ 16K.
* ``"multirow"`` -- static persistent: min(#row tiles, SMs x ctas_per_sm) programs, each walks
                    row tiles of ROWS x BLOCK with a grid stride and loads w once. Short rows
                    (n <= 2K) give a program too little work per row; this amortizes it.
* ``"looped"``   -- one row per program, two passes over BLOCK-wide column tiles: sum squares,
                    then re-read (mostly from L2), scale and store. For rows too long to hold.
* ``"auto"``     -- (default) looped when next_pow2(n) > 16384. Triton takes looped from
                    n >= 1024 on (measured fastest on the H200, see TRITON_LOOPED_FROM); below,
                    multirow when there are more row tiles than persistent programs, else row;
                    cuTile takes multirow (as TileGym's static-persistent mode does)
                    once m > 2 x SMs, with 16 / 4 / 2 rows per tile for n <= 1K / up to 8K / 16K,
                    else row. The rules are ``triton_config`` / ``cutile_config`` (pure
                    functions, no GPU needed); every knob (block, rows, num_warps, ctas_per_sm)
                    can be forced by keyword, so a GPU run can time each variant and keep the
                    faster. scripts/sweep_variants.py does that run.

Neither triton nor cuda.tile is needed to import this module: each is imported under a guard,
and ``unavailable_reason(backend)`` says why a backend cannot run here (None when it can).

cuTile Python at run time compiles each kernel with ``tileiras`` (Tile IR -> cubin, sm_90 needs
tileiras >= 13.3 with the ptxas and libnvvm of its own release). cuda.tile looks for it in the
``nvidia-cuda-tileiras`` pip package, then on PATH, then in ``$CUDA_HOME/bin``, then in
/usr/local/cuda*; it loads libcuda.so.1 from the driver and nothing else from a CUDA toolkit.
Compiled cubins are cached under ``$CUDA_TILE_CACHE_DIR`` (default ~/.cache/cutile-python).
"""
import torch

from tilekit import baseline_support

try:  # Triton: optional; the kernels below are only defined when it imports.
    import triton
    import triton.language as tl
    _TRITON_ERROR = None
except Exception as exc:  # ImportError, or a broken install that fails while importing
    triton = tl = None
    _TRITON_ERROR = exc

try:  # cuTile Python: optional, not in the project venv; the GPU bundle carries its wheel.
    import cuda.tile as ct
    _CUTILE_ERROR = None
except Exception as exc:
    ct = None
    _CUTILE_ERROR = exc

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
VARIANTS = ("auto", "row", "multirow", "looped")

MAX_ROW_BLOCK = 16384   # auto: the widest row kept whole in registers (f32 16K = 64 KiB per row)
MULTIROW_MAX_BLOCK = 2048  # auto: rows at most this wide go to the persistent multi-row form
# Triton auto takes the two-pass looped form from this row width on: on the H200 (CUPTI, L2
# flushed, 2026-11-29, scripts/sweep_variants.py) it beat row and multirow at every f16 perf
# shape timed: 262144x1024 0.289 ms (row 0.296, multirow 0.309), 262144x4096 1.026 (1.086,
# 1.267), 65536x16384 1.130 (1.442, 1.279).
TRITON_LOOPED_FROM = 1024
MIN_BLOCK = 16          # tiles narrower than this waste lanes; masks/padding cover n < 16


_next_pow2 = baseline_support.next_pow2
_clamp = baseline_support.clamp
_num_sms = baseline_support.num_sms


def _check_inputs(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Validate (x, w); return w as a contiguous vector (it is n elements: copying is free)."""
    if x.dim() != 2:
        raise ValueError(f"rms_norm baseline: x must be 2-D (m, n), got shape {tuple(x.shape)}")
    m, n = x.shape
    if x.dtype not in DTYPES or w.dtype != x.dtype:
        raise TypeError(f"rms_norm baseline: x and w must share one dtype of {DTYPES}, got {x.dtype} and {w.dtype}")
    if tuple(w.shape) != (n,):
        raise ValueError(f"rms_norm baseline: w must have shape ({n},) for x of shape {(m, n)}, got {tuple(w.shape)}")
    if n > 1 and x.stride(1) != 1:
        raise ValueError("rms_norm baseline: x's last dim must be contiguous; pass x.contiguous()")
    if x.device != w.device:
        raise ValueError(f"rms_norm baseline: x is on {x.device} but w on {w.device}")
    return w.contiguous()


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"rms_norm baseline: variant must be one of {VARIANTS}, got {variant!r}")


# -- PyTorch ------------------------------------------------------------------------------------

def torch_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """PyTorch's fused RMSNorm (the op a model would call)."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps)


# -- Triton -------------------------------------------------------------------------------------

TRITON_ROW_ELEMS_PER_THREAD = 16  # f32 registers per thread the row/multirow tiles aim for
TRITON_MULTIROW_TILE = 8192       # elements per ROWS x BLOCK tile in the multirow form
TRITON_LOOPED_BLOCK = 4096        # column tile of the looped form
TRITON_CTAS_PER_SM = 2            # persistent programs per SM: >1 to hide latency, few enough
                                  # (2 x 16 warps) that all stay resident and none forms a tail


def _triton_warps(tile_elems: int) -> int:
    # Enough threads that each holds ~16 f32 values of the tile: fewer spills than Triton's
    # default 4 warps for wide rows, and no idle warps for narrow ones.
    return _clamp(tile_elems // (32 * TRITON_ROW_ELEMS_PER_THREAD), 4, 16)


def triton_config(m: int, n: int, sms: int, variant: str = "auto", *, block=None, rows=None,
                  num_warps=None, ctas_per_sm=None) -> dict:
    """The launch plan of `triton_rms_norm` for an (m, n) problem on a GPU with `sms` SMs:
    {"variant", "block", "rows", "num_warps", "grid"}. Pure; keywords force a knob."""
    _check_variant(variant)
    whole = max(MIN_BLOCK, _next_pow2(n))
    if variant == "auto":
        if whole > MAX_ROW_BLOCK or whole >= TRITON_LOOPED_FROM:
            variant = "looped"
        else:
            rows_auto = max(1, TRITON_MULTIROW_TILE // whole)
            programs = sms * (ctas_per_sm or TRITON_CTAS_PER_SM)
            short = whole <= MULTIROW_MAX_BLOCK and -(-m // rows_auto) > programs
            variant = "multirow" if short else "row"
    if variant == "looped":
        block = block or min(whole, TRITON_LOOPED_BLOCK)
        return {"variant": variant, "block": block, "rows": 1,
                "num_warps": num_warps or _triton_warps(block), "grid": m}
    block = block or whole
    if block < n:
        raise ValueError(f"rms_norm triton: variant {variant!r} holds a whole row, block={block} < n={n}")
    if variant == "row":
        return {"variant": variant, "block": block, "rows": 1,
                "num_warps": num_warps or _triton_warps(block), "grid": m}
    rows = rows or max(1, TRITON_MULTIROW_TILE // block)
    row_tiles = -(-m // rows)
    grid = min(row_tiles, sms * (ctas_per_sm or TRITON_CTAS_PER_SM))
    return {"variant": variant, "block": block, "rows": rows,
            "num_warps": num_warps or _triton_warps(rows * block), "grid": max(1, grid)}


if triton is not None:

    @triton.jit
    def _triton_rows_kernel(x_ptr, w_ptr, y_ptr, m, n, stride_x, stride_y, eps,
                            ROWS: tl.constexpr, BLOCK: tl.constexpr):
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
            x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / n + eps)
            y = x * inv_rms[:, None] * w[None, :]
            tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty),
                     mask=mask, eviction_policy="evict_first")

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
            tl.store(y_row + start + cols, (x * inv_rms * w).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")


def triton_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, *, variant: str = "auto",
                    block=None, rows=None, num_warps=None, ctas_per_sm=None) -> torch.Tensor:
    """RMSNorm with our Triton kernels; `variant` and the knobs as in `triton_config`."""
    if triton is None:
        raise RuntimeError(unavailable_reason("triton"))
    w = _check_inputs(x, w)
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    cfg = triton_config(m, n, _num_sms(x), variant, block=block, rows=rows,
                        num_warps=num_warps, ctas_per_sm=ctas_per_sm)
    grid = (cfg["grid"],)
    if cfg["variant"] == "looped":
        _triton_looped_kernel[grid](x, w, y, n, x.stride(0), y.stride(0), eps,
                                    BLOCK=cfg["block"], num_warps=cfg["num_warps"])
    else:
        _triton_rows_kernel[grid](x, w, y, m, n, x.stride(0), y.stride(0), eps,
                                  ROWS=cfg["rows"], BLOCK=cfg["block"], num_warps=cfg["num_warps"])
    return y


# -- cuTile Python ------------------------------------------------------------------------------

CUTILE_LOOPED_BLOCK = 4096  # column tile of the looped form
CUTILE_CTAS_PER_SM = 1      # static persistent: one program per SM; tileiras sizes the CTA


def _cutile_rows_per_tile(block: int) -> int:
    # Short rows: many per tile so a program moves enough bytes per step; very long rows: 2,
    # which keeps a (rows, block) f32 tile within the register file. Starting points to time.
    if block <= 1024:
        return 16
    return 2 if block >= 16384 else 4


def cutile_config(m: int, n: int, sms: int, variant: str = "auto", *, block=None, rows=None,
                  ctas_per_sm=None) -> dict:
    """The launch plan of `cutile_rms_norm` for an (m, n) problem on a GPU with `sms` SMs:
    {"variant", "block", "rows", "grid"}. Pure; keywords force a knob."""
    _check_variant(variant)
    whole = max(MIN_BLOCK, _next_pow2(n))
    if variant == "auto":
        # Persistent pays off once the row tiles make more than a couple of waves.
        if whole > MAX_ROW_BLOCK:
            variant = "looped"
        else:
            variant = "multirow" if m > 2 * sms else "row"
    if variant == "looped":
        return {"variant": variant, "block": block or min(whole, CUTILE_LOOPED_BLOCK), "rows": 1, "grid": m}
    block = block or whole
    if block < n:
        raise ValueError(f"rms_norm cutile: variant {variant!r} holds a whole row, block={block} < n={n}")
    if variant == "row":
        return {"variant": variant, "block": block, "rows": 1, "grid": m}
    rows = rows or _cutile_rows_per_tile(block)
    grid = min(-(-m // rows), sms * (ctas_per_sm or CUTILE_CTAS_PER_SM))
    return {"variant": variant, "block": block, "rows": rows, "grid": max(1, grid)}


if ct is not None:
    # Tiles past the array edge read as zero, so padded columns add nothing to the sum of
    # squares and padded rows are finite; stores past the edge are dropped by cuTile.
    _ZERO = ct.PaddingMode.ZERO

    @ct.kernel
    def _cutile_rows_kernel(X, W, Y, eps: ct.Constant[float], ROWS: ct.Constant[int],
                            BLOCK: ct.Constant[int]):
        """Row and multirow forms: ROWS x BLOCK tiles (BLOCK >= n), grid-strided over row
        tiles (static persistent when the grid is smaller than the number of row tiles)."""
        n = X.shape[1]
        w = ct.astype(ct.load(W, index=(0,), shape=(BLOCK,), padding_mode=_ZERO), ct.float32)
        w = ct.reshape(w, (1, BLOCK))
        for tile in range(ct.bid(0), ct.cdiv(X.shape[0], ROWS), ct.num_blocks(0)):
            # latency: a DRAM-bound load; the hint lets tileiras issue it deeper ahead.
            x = ct.astype(ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_ZERO,
                                  latency=10), ct.float32)
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


def cutile_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, *, variant: str = "auto",
                    block=None, rows=None, ctas_per_sm=None) -> torch.Tensor:
    """RMSNorm with our cuTile Python kernels; `variant` and the knobs as in `cutile_config`.
    eps is a compile-time constant of the kernel (one compile per distinct eps)."""
    if ct is None:
        raise RuntimeError(unavailable_reason("cutile"))
    w = _check_inputs(x, w)
    if not x.is_cuda:
        raise ValueError(f"rms_norm cutile: x must be a CUDA tensor, got {x.device}")
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    cfg = cutile_config(m, n, _num_sms(x), variant, block=block, rows=rows, ctas_per_sm=ctas_per_sm)
    stream = torch.cuda.current_stream(x.device)
    eps = float(eps)
    with torch.cuda.device(x.device):
        if cfg["variant"] == "looped":
            ct.launch(stream, (cfg["grid"],), _cutile_looped_kernel, (x, w, y, eps, cfg["block"]))
        else:
            ct.launch(stream, (cfg["grid"],), _cutile_rows_kernel, (x, w, y, eps, cfg["rows"], cfg["block"]))
    return y


# -- registry -----------------------------------------------------------------------------------

BACKENDS = {"cutile": cutile_rms_norm, "triton": triton_rms_norm, "torch": torch_rms_norm}


_tileiras_missing = baseline_support.tileiras_missing


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when its package imports (and, for cutile, its
    compiler is found). Says nothing about the GPU itself."""
    return baseline_support.unavailable_reason("rms_norm", backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
