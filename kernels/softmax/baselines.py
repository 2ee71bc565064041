"""softmax baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :])))

x is a 2-D (m, n) tensor (f16, bf16 or f32) whose last dim is contiguous; its row stride may be
larger than n. Max, exponentials and sums are done in f32; the output has x's dtype, is allocated
here with torch.empty (contiguous) and written on torch's current stream. Lanes past n (and
masked -inf logits) contribute exp(-inf) = 0.

    from kernels.softmax.baselines import BACKENDS, unavailable_reason
    y = BACKENDS["triton"](x)                           # or "cutile", "torch"

Backends (every entry takes x and returns y):

* ``torch_softmax``  -- ``torch.softmax(x, -1)``, PyTorch's own kernel.
* ``triton_softmax`` -- our Triton kernels.
* ``cutile_softmax`` -- our cuTile Python kernels (``cuda-tile`` 1.7.0, ``import cuda.tile``).

The Triton and cuTile entries share three variants, picked with ``variant=``:

* ``"row"``      -- one row per program; the whole row is one BLOCK = next_pow2(n) tile held in
                    registers, so x is read once and exponentiated once. Good up to n ~ 16K.
* ``"multirow"`` -- static persistent: min(#row tiles, SMs x ctas_per_sm) programs, each walks
                    row tiles of ROWS x BLOCK with a grid stride. Short rows (n <= 2K) give a
                    program too little work per row; this amortizes it.
* ``"looped"``   -- one row per program, online softmax over BLOCK-wide column tiles: pass 1
                    keeps a running max and a rescaled running sum per lane, pass 2 re-reads the
                    row (mostly from L2), exponentiates and stores. For rows too long to hold.
* ``"auto"``     -- (default) looped when next_pow2(n) > 16384, else row for both Triton and
                    cuTile: on the H200 (scripts/sweep_variants.py --kernel softmax, 2026-11-29)
                    row beat multirow at every perf shape (the rules are ``triton_config`` /
                    ``cutile_config``, pure functions, no GPU needed; every knob can be forced).

Neither triton nor cuda.tile is needed to import this module: each is imported under a guard,
and ``unavailable_reason(backend)`` says why a backend cannot run here (None when it can).

cuTile Python at run time compiles each kernel with ``tileiras`` (Tile IR -> cubin, sm_90 needs
tileiras >= 13.3 with the ptxas and libnvvm of its own release). cuda.tile looks for it in the
``nvidia-cuda-tileiras`` pip package, then on PATH, then in ``$CUDA_HOME/bin``, then in
/usr/local/cuda*; it loads libcuda.so.1 from the driver and nothing else from a CUDA toolkit.
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

MAX_ROW_BLOCK = 16384      # auto: the widest row kept whole in registers (f32 16K = 64 KiB per row)
MIN_BLOCK = 16             # tiles narrower than this waste lanes; masks/padding cover n < 16
# The lowest finite f32: the looped forms start each lane's running max here rather than at -inf,
# so a lane that sees only -inf (padding, masked logits) rescales by exp(-inf) = 0, never by
# exp(-inf - -inf) = NaN.
F32_LOWEST = -3.4028234663852886e38


_next_pow2 = baseline_support.next_pow2
_clamp = baseline_support.clamp
_num_sms = baseline_support.num_sms


def _check_input(x: torch.Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"softmax baseline: x must be 2-D (m, n), got shape {tuple(x.shape)}")
    if x.dtype not in DTYPES:
        raise TypeError(f"softmax baseline: x must be one of {DTYPES}, got {x.dtype}")
    if x.shape[1] > 1 and x.stride(1) != 1:
        raise ValueError("softmax baseline: x's last dim must be contiguous; pass x.contiguous()")


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"softmax baseline: variant must be one of {VARIANTS}, got {variant!r}")


# -- PyTorch ------------------------------------------------------------------------------------

def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's softmax over the last dim (the op a model would call)."""
    return torch.softmax(x, dim=-1)


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
    """The launch plan of `triton_softmax` for an (m, n) problem on a GPU with `sms` SMs:
    {"variant", "block", "rows", "num_warps", "grid"}. Pure; keywords force a knob."""
    _check_variant(variant)
    whole = max(MIN_BLOCK, _next_pow2(n))
    if variant == "auto":
        if whole > MAX_ROW_BLOCK:
            variant = "looped"
        else:
            # row: on the H200 (CUPTI, L2 flushed, 2026-11-29, scripts/sweep_variants.py) one row
            # per program beat the persistent multirow form at every perf shape: 65536x1024 f16
            # 0.076 ms (multirow 0.090), 65536x4096 0.278 (0.351), 65536x8192 f32 1.091 (1.165).
            variant = "row"
    if variant == "looped":
        block = block or min(whole, TRITON_LOOPED_BLOCK)
        return {"variant": variant, "block": block, "rows": 1,
                "num_warps": num_warps or _triton_warps(block), "grid": m}
    block = block or whole
    if block < n:
        raise ValueError(f"softmax triton: variant {variant!r} holds a whole row, block={block} < n={n}")
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
    def _triton_rows_kernel(x_ptr, y_ptr, m, n, stride_x, stride_y,
                            ROWS: tl.constexpr, BLOCK: tl.constexpr):
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
            x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=float("-inf"),
                        eviction_policy="evict_first").to(tl.float32)
            # Rows past m are all -inf and turn into NaN; the store mask drops them.
            e = tl.exp(x - tl.max(x, axis=1)[:, None])
            inv_sum = 1.0 / tl.sum(e, axis=1)
            tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], (e * inv_sum[:, None]).to(y_ptr.dtype.element_ty),
                     mask=mask, eviction_policy="evict_first")

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
            x = tl.load(x_row + start + cols, mask=ok, other=float("-inf"), eviction_policy="evict_first").to(tl.float32)
            tl.store(y_row + start + cols, (tl.exp(x - row_max) * inv_sum).to(y_ptr.dtype.element_ty), mask=ok,
                     eviction_policy="evict_first")


def triton_softmax(x: torch.Tensor, *, variant: str = "auto", block=None, rows=None, num_warps=None,
                   ctas_per_sm=None) -> torch.Tensor:
    """Softmax over the last dim with our Triton kernels; `variant` and the knobs as in
    `triton_config`."""
    if triton is None:
        raise RuntimeError(unavailable_reason("triton"))
    _check_input(x)
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    cfg = triton_config(m, n, _num_sms(x), variant, block=block, rows=rows,
                        num_warps=num_warps, ctas_per_sm=ctas_per_sm)
    grid = (cfg["grid"],)
    if cfg["variant"] == "looped":
        _triton_looped_kernel[grid](x, y, n, x.stride(0), y.stride(0),
                                    BLOCK=cfg["block"], num_warps=cfg["num_warps"])
    else:
        _triton_rows_kernel[grid](x, y, m, n, x.stride(0), y.stride(0),
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
    """The launch plan of `cutile_softmax` for an (m, n) problem on a GPU with `sms` SMs:
    {"variant", "block", "rows", "grid"}. Pure; keywords force a knob."""
    _check_variant(variant)
    whole = max(MIN_BLOCK, _next_pow2(n))
    if variant == "auto":
        # row: on the H200 (same sweep) one row per program beat multirow at every perf shape:
        # 65536x1024 f16 0.096 ms (multirow 0.183), 65536x4096 0.317 (0.423), 65536x8192 f32
        # 1.034 (1.106).
        variant = "looped" if whole > MAX_ROW_BLOCK else "row"
    if variant == "looped":
        return {"variant": variant, "block": block or min(whole, CUTILE_LOOPED_BLOCK), "rows": 1, "grid": m}
    block = block or whole
    if block < n:
        raise ValueError(f"softmax cutile: variant {variant!r} holds a whole row, block={block} < n={n}")
    if variant == "row":
        return {"variant": variant, "block": block, "rows": 1, "grid": m}
    rows = rows or _cutile_rows_per_tile(block)
    grid = min(-(-m // rows), sms * (ctas_per_sm or CUTILE_CTAS_PER_SM))
    return {"variant": variant, "block": block, "rows": rows, "grid": max(1, grid)}


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
            x = ct.astype(ct.load(X, index=(tile, 0), shape=(ROWS, BLOCK), padding_mode=_NEG_INF,
                                  latency=10), ct.float32)
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


def cutile_softmax(x: torch.Tensor, *, variant: str = "auto", block=None, rows=None,
                   ctas_per_sm=None) -> torch.Tensor:
    """Softmax over the last dim with our cuTile Python kernels; `variant` and the knobs as in
    `cutile_config`."""
    if ct is None:
        raise RuntimeError(unavailable_reason("cutile"))
    _check_input(x)
    if not x.is_cuda:
        raise ValueError(f"softmax cutile: x must be a CUDA tensor, got {x.device}")
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    cfg = cutile_config(m, n, _num_sms(x), variant, block=block, rows=rows, ctas_per_sm=ctas_per_sm)
    stream = torch.cuda.current_stream(x.device)
    with torch.cuda.device(x.device):
        if cfg["variant"] == "looped":
            ct.launch(stream, (cfg["grid"],), _cutile_looped_kernel, (x, y, cfg["block"]))
        else:
            ct.launch(stream, (cfg["grid"],), _cutile_rows_kernel, (x, y, cfg["rows"], cfg["block"]))
    return y


# -- registry -----------------------------------------------------------------------------------

BACKENDS = {"cutile": cutile_softmax, "triton": triton_softmax, "torch": torch_softmax}


_tileiras_missing = baseline_support.tileiras_missing


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when its package imports (and, for cutile, its
    compiler is found). Says nothing about the GPU itself."""
    return baseline_support.unavailable_reason("softmax", backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
