"""@triton.jit helpers the row kernels' Triton baselines share (Triton inlines them where they are
called): a row tile's pointers and mask (rms_norm, layer_norm, softmax), a 2-D output tile's
coordinates (silu_and_mul, swiglu). Imports without triton; it then defines nothing, and the
baselines that call it cannot run either (tilekit.runtime.baseline_support.unavailable_reason says why).
"""

from tilekit.runtime import baseline_support as bs

triton, tl, _ = bs.import_triton()

if triton is not None:

    @triton.jit
    def row_tile(x_ptr, y_ptr, stride_x, stride_y, tile, m, col_ok, ROWS: tl.constexpr):
        """Row tile `tile` (rows tile * ROWS ...) of x and y: pointers to its rows' starts, (ROWS, 1)
        each (int64 offsets: m * stride may exceed 2^31 elements), and its mask (rows < m, `col_ok`)."""
        rows = tile * ROWS + tl.arange(0, ROWS)
        offsets = rows.to(tl.int64)[:, None]
        return x_ptr + offsets * stride_x, y_ptr + offsets * stride_y, (rows < m)[:, None] & col_ok[None, :]

    @triton.jit
    def output_tile(m, h, ROWS: tl.constexpr, BLOCK: tl.constexpr):
        """This program's ROWS x BLOCK tile of an (m, h) output, the 1-D program id walking column
        tiles fastest: its rows as a (ROWS, 1) int64 column (m * stride may exceed 2^31 elements),
        its columns and its mask."""
        pid = tl.program_id(0)
        col_tiles = tl.cdiv(h, BLOCK)
        rt = pid // col_tiles
        cols = (pid - rt * col_tiles) * BLOCK + tl.arange(0, BLOCK)
        rows = rt * ROWS + tl.arange(0, ROWS)
        return rows.to(tl.int64)[:, None], cols, (rows < m)[:, None] & (cols < h)[None, :]
