"""The gated family's cuTile Python kernels (kernels/silu_and_mul, kernels/swiglu: out (m, H) =
silu(G) * U for the (m, H) gate and up arrays, f32 inside), launched by each kernel's baselines.py
with the plans of tilekit.runtime.gated: "tiled" / "wide" (one ROWS x BLOCK output tile per program) and
"row" (one row per program, BLOCK-wide column tiles). Imports without cuda.tile; it then defines
nothing, and the entries that launch them cannot run either.
"""

import functools

from tilekit.runtime import baseline_support as bs

ct, _ = bs.import_cutile()

if ct is not None:
    _ZERO = ct.PaddingMode.ZERO
    _APPROX = ct.RoundingMode.APPROX

    def _silu_mul_tile(g, u):
        # 1 / (1 + exp(-g)) saturates to 0 for very negative g (exp -> inf), never NaN.
        sig = ct.truediv(1.0, 1.0 + ct.exp(-g), flush_to_zero=True, rounding_mode=_APPROX)
        return g * sig * u

    @ct.kernel
    def _cutile_tiled_kernel(G, U, Y, ROWS: ct.Constant[int], BLOCK: ct.Constant[int]):
        """One ROWS x BLOCK output tile per program of the (m, H) gate and up arrays (silu_and_mul:
        x's halves). Out-of-range lanes read zero and their stores are dropped."""
        col_tiles = ct.cdiv(G.shape[1], BLOCK)
        pid = ct.bid(0)
        rt = pid // col_tiles
        c = pid - rt * col_tiles
        g = ct.astype(ct.load(G, index=(rt, c), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
        u = ct.astype(ct.load(U, index=(rt, c), shape=(ROWS, BLOCK), padding_mode=_ZERO), ct.float32)
        # Plain stores beat TMA stores for streaming writes (TileGym's H100 finding, kept for rms_norm).
        ct.store(Y, index=(rt, c), tile=ct.astype(_silu_mul_tile(g, u), Y.dtype), allow_tma=False)

    @ct.kernel
    def _cutile_row_kernel(G, U, Y, BLOCK: ct.Constant[int]):
        """One row per program, (1, BLOCK) column tiles."""
        row = ct.bid(0)
        for j in range(ct.cdiv(G.shape[1], BLOCK)):
            g = ct.astype(ct.load(G, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            u = ct.astype(ct.load(U, index=(row, j), shape=(1, BLOCK), padding_mode=_ZERO), ct.float32)
            ct.store(Y, index=(row, j), tile=ct.astype(_silu_mul_tile(g, u), Y.dtype), allow_tma=False)

    @functools.lru_cache(maxsize=None)
    def cutile_kernel(variant: str, occupancy: int):
        """The "row" kernel, or the tiled one ("tiled", "wide"), with an occupancy hint (-1: the
        compiler's default)."""
        kernel = _cutile_row_kernel if variant == "row" else _cutile_tiled_kernel
        return kernel if occupancy == -1 else kernel.replace_hints(occupancy=occupancy)
