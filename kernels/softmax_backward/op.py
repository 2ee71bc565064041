"""softmax_backward, the cuTile Rust port of softmax's gradient (its autograd formula):

    from kernels.softmax_backward.op import softmax_backward
    dx = softmax_backward(dy, y)     # y = softmax(x) over the last dim, dy: its gradient; (..., n)

dx = y * (dy - sum(y * dy, -1)), f32 inside, from the forward's output y (as PyTorch's softmax
backward takes it). `cutile_softmax_backward` (kernels/softmax_backward/ffi.rs) through
tilekit.runtime.port; `variant="auto"` autotunes (block, rows, occupancy, chunk) over `variants` per
dtype and shape class: whole rows held in registers, or for wide rows column tiles read twice, by one
tile block a row or (chunk > 0) by several that exchange the row's partial sums (lag > 0: each tile
block sums one chunk and stores an earlier one's, so it does not wait for its own row).
"""

from __future__ import annotations

import torch
from torch import Tensor

from tilekit.runtime import autotune, checks, port
from tilekit.runtime.autotune import row_tune_key as tune_key  # noqa: F401 (op.py's contract name)

CDEF = """
int32_t cutile_softmax_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* y,
                                int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                                int32_t chunk, int32_t lag, int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")
DEFAULT_VARIANT = {
    "block": -1,
    "rows": -1,
    "occupancy": -1,
    "warps": -1,
    "chunk": -1,
    "lag": 0,
}  # ffi.rs (and the compiler) pick
MAX_TILE_ELEMS = 16384  # ffi.rs: two f32 tiles in registers
HINTS = ((4, 8), (8, 4), (8, 8))  # (occupancy, warps) of every candidate tile
SPLIT_CHUNKS = (1, 2, 4, 8)  # column tiles of 4096 a chunk, in the split candidates (1: held in registers)
MAX_SPLIT_CHUNKS = 64  # ffi.rs MAX_PARTS; a launch refuses more chunks than the GPU has SMs (unless lagged)
LAGGED_CHUNKS = (2, 4)  # column tiles of 4096 a chunk in the lagged candidates (the split's picks on an H100)
LAGS = (256, 512)  # tickets between a chunk's sum and its dx: about a half and a whole of the tile blocks resident


def export_args(
    block: int, rows: int, occupancy: int, warps: int = -1, chunk: int = -1, lag: int = 0
) -> tuple[int, ...]:
    """A variant's arguments of the export: (block, rows, occupancy, warps, chunk, lag); chunk 0 keeps
    a row in one tile block, -1 is ffi.rs's default (split vocabulary rows where the GPU has the SMs);
    lag > 0 runs a split in its lagged form (ffi.rs: tickets, a chunk's dx stored lag tickets after
    its sum)."""
    return int(block), int(rows), int(occupancy), int(warps), int(chunk), int(lag)


def variants(m: int, n: int) -> list[dict]:
    """Whole rows (block the power of two >= n, up to 16384) in tiles of 4 K and 8 K elements, and
    for rows past 4096 column tiles of 4096 read twice; each at HINTS, (occupancy, warps) pairs (the
    forward's lesson: the compiler's own occupancy was 3-10x slower, kernels/softmax/NOTES.md). Rows
    past 4096 columns are also split into chunks of 1, 2, 4 and 8 column tiles exchanging their partial
    sums (SPLIT_CHUNKS, where a row makes 2 to MAX_SPLIT_CHUNKS chunks; a launch refuses more chunks
    than the GPU has SMs), at the first of HINTS only (the split's pick on every vocabulary config of
    an H100 run, NOTES.md), and the chunks of LAGGED_CHUNKS tiles in the lagged form at each of LAGS;
    the column tiles alone take chunk 0:

    >>> [(v["block"], v["rows"], v["occupancy"], v["warps"]) for v in variants(16384, 4096)][:4]
    [(4096, 1, 4, 8), (4096, 1, 8, 4), (4096, 1, 8, 8), (4096, 2, 4, 8)]
    >>> [(v["chunk"], v["occupancy"], v["lag"]) for v in variants(4096, 128256)][2:]
    [(0, 8, 0), (4096, 4, 0), (8192, 4, 0), (16384, 4, 0), (32768, 4, 0), (8192, 4, 256), (8192, 4, 512), (16384, 4, 256), (16384, 4, 512)]
    >>> len(variants(64, 100)), len(variants(4096, 128256))
    (6, 11)
    """
    whole = autotune.pow2(max(n, 16))
    max_rows = min(64, autotune.pow2(m))
    tiles = []
    if whole <= MAX_TILE_ELEMS:
        tiles += sorted({(whole, autotune.tile_rows(whole, elems, max_rows)) for elems in (4096, 8192)})
    if n > 4096:
        tiles.append((4096, 1))
    tiles = list(dict.fromkeys(t for t in tiles if t[0] * t[1] <= MAX_TILE_ELEMS))
    chunks = [0 if b < n else -1 for b, _ in tiles]
    if n > 4096:
        splits = [4096 * k for k in SPLIT_CHUNKS if 2 <= -(-n // (4096 * k)) <= MAX_SPLIT_CHUNKS]
        tiles += [(4096, 1)] * len(splits)
        chunks += splits
    lags = [0] * len(chunks)
    if n > 4096:
        lagged = [
            (4096 * k, lag) for k in LAGGED_CHUNKS if 2 <= -(-n // (4096 * k)) <= MAX_SPLIT_CHUNKS for lag in LAGS
        ]
        tiles += [(4096, 1)] * len(lagged)
        chunks += [c for c, _ in lagged]
        lags += [lag for _, lag in lagged]
    hints = [HINTS if c <= 0 else HINTS[:1] for c in chunks]
    return [
        {"block": b, "rows": r, "occupancy": o, "warps": w, "chunk": c, "lag": lag}
        for (b, r), c, lag, pairs in zip(tiles, chunks, lags, hints)
        for o, w in pairs
    ]


@port.entry(layouts={"dy": "(..., n)", "y": "(..., n)"})
def softmax_backward(dy: Tensor, y: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """dx of softmax for its output y and output gradient dy (the module docstring); ValueError/TypeError
    on bad input, ffi.KernelError on a failed call."""
    if dy.shape != y.shape:
        raise ValueError(f"softmax_backward: dy must have y's shape {tuple(y.shape)}, got {tuple(dy.shape)}")
    checks.dtypes("softmax_backward", DTYPES, dy=dy, y=y)
    checks.contiguous_last_dim("softmax_backward", dy=dy, y=y)
    checks.out_matches("softmax_backward", out, y.shape, y)
    checks.cuda("softmax_backward", dy=dy, y=y)
    n = y.shape[-1]
    y2, dy2 = y.reshape(-1, n), dy.reshape(-1, n)
    dx = out if out is not None else torch.empty(y.shape, dtype=y.dtype, device=y.device)
    dx2 = dx if dx.dim() == 2 else dx.view(-1, n)
    port.run(__name__, variant, (y2.shape[0], n), dx2, dy2, y2)
    return dx


def forward_gradients(inputs: tuple, grad: Tensor, needs: tuple, output: Tensor) -> tuple:
    """softmax's autograd formula: dx from this port and the forward's output y (tilekit.runtime.ops
    saves it for backward, as this function asks for `output`). tilekit.runtime.ops registers it as
    the gradient of torch.ops.tilekit.softmax when that op is defined (the op of kernels/<k>_backward
    gives <k>'s)."""
    if not needs[0]:
        return (None,)
    dy = grad.contiguous()  # autograd's is; an expanded one (row stride 0) the port would refuse
    return (softmax_backward.op(dy, output),)
