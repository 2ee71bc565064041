"""softmax, the cuTile Rust port: y = exp(x - max(x, -1)) / sum(exp(x - max(x, -1)), -1).

    y = softmax(x, variant="auto", out=None)     # x: (..., n) CUDA f16/bf16/f32, over the last dim

`cutile_softmax` (kernels/softmax/ffi.rs) called through tilekit.runtime.port; `variant`: "auto" the
autotuned candidate of `variants` for this GPU, dtype and shape class, "default" ffi.rs's, a dict.
"""

from __future__ import annotations

from torch import Tensor

from tilekit.runtime import autotune, checks, port
from tilekit.runtime.autotune import row_tune_key as tune_key  # noqa: F401 (op.py's contract name)

CDEF = """
int32_t cutile_softmax(const TensorDesc* out, const TensorDesc* x,
                       int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
                       int32_t chunk, int32_t tail, int32_t programs, int32_t form,
                       int32_t device_id, uint64_t stream);
"""

DTYPES = ("float16", "bfloat16", "float32")
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1}  # ffi.rs picks


def export_args(
    block: int,
    rows: int,
    occupancy: int,
    warps: int = -1,
    chunk: int = -1,
    tail: int = 0,
    programs_per_sm: int = 0,
    form: int = 0,
    *,
    sms: int,
) -> tuple[int, ...]:
    """A variant's arguments of the export on a GPU with `sms` SMs; chunk > 0 splits rows into
    chunk-column pieces (ffi.rs `SplitPlan`), -1 lets ffi.rs decide; tail > 0 holds each row as a
    `block`-wide body and a `tail`-wide tail tile, on a persistent grid of programs_per_sm x sms
    tile blocks where that is > 0. form 1: the other form of the entry the knobs select (ffi.rs: a
    chunk of four tiles held in T, or the persistent tail loading the next row tile ahead); form 2
    with a chunk: the single pass that reads its chunk twice. Pure: the CPU tests check `variants`
    through it.

    >>> export_args(8192, 1, 4, 8, tail=4096, programs_per_sm=4, sms=132), export_args(1024, 4, 8, sms=132)
    ((8192, 1, 4, 8, -1, 4096, 528, 0), (1024, 4, 8, -1, -1, 0, 0, 0))
    """
    programs = programs_per_sm * sms if programs_per_sm > 0 else 0
    return int(block), int(rows), int(occupancy), int(warps), int(chunk), int(tail), int(programs), int(form)


@port.entry(layouts={"x": "(..., n)"}, in_place=("x",))
def softmax(x: Tensor, *, variant: str | dict = "auto", out: Tensor | None = None) -> Tensor:
    """Softmax over the last dim; ValueError/TypeError on bad input, ffi.KernelError on a failed call."""
    checks.dtypes("softmax", DTYPES, x=x)
    checks.contiguous_last_dim("softmax", x=x)
    checks.out_matches("softmax", out, x.shape, x)
    checks.cuda("softmax", x=x)
    return port.rows(__name__, x, out, x.shape[-1], variant=variant)


# -- autotune: the port's variants (ffi.rs: block = tile width, rows per tile block, occupancy) --

# The split form for n > 16384 (ffi.rs `SplitPlan`: several tile blocks per row): (block, rows,
# occupancy, warps, chunk columns, form). The single passes first, where a row tile's chunks
# exchange their (max, sum): chunk == block holds one tile in registers (`softmax_split_exchange`;
# 1 x 8192 at occupancy 4, the default, and 1 x 4096 at 8); form 1 holds an 8192-column chunk of
# four 2048-wide tiles in T (f32 1024 x 128256 0.2827 ms against 0.2924); form 2 reads a chunk of
# two tiles twice, the second time from L2, the first tile's second read during the wait for the
# row's other chunks (bf16 512 x 151936 0.1007 ms, 4096 x 128256 0.6317, against 0.1136 and 0.7129
# for the one-tile pass; wider chunks were slower: NOTES.md, "A chunk read twice", "The first
# tile's second read during the wait"), and with one tile. Then the two kernels, for rows with
# more chunks than SMs.
SPLIT_SHAPES = [(8192, 1, 4, None, 8192, None), (4096, 1, 8, None, 4096, None), (2048, 1, 5, None, 8192, 1)]
SPLIT_SHAPES += [(4096, 1, 8, None, 8192, 2), (2048, 1, 16, None, 8192, 2), (2048, 1, 16, None, 4096, 2)]
SPLIT_SHAPES += [(4096, 1, 8, None, 4096, 2), (4096, 1, 8, None, 16384, None)]


def variants(m: int, n: int) -> list[dict]:
    """Candidates, at most 10 (each one JIT when tuning); TILEKIT_AUTOTUNE=0 runs the first. Why these:
    kernels/softmax/NOTES.md, "The variant space"; n > 16384 adds the split form (SPLIT_SHAPES, with
    a "chunk" knob). Rows are capped at m rounded up (3 x 1000: 4):

    >>> def table(m, n):  # the split candidates (a "chunk" knob) are checked below
    ...     return [(v["block"], v["rows"], v["occupancy"], v.get("warps")) for v in variants(m, n) if "chunk" not in v]
    >>> for m, n in [(65536, 1024), (65536, 4096), (65536, 8192), (4096, 16384), (64, 32768), (3, 1000), (1, 1)]:
    ...     print(table(m, n))
    [(1024, 4, 8, None), (1024, 2, 8, None), (1024, 8, 4, None)]
    [(4096, 2, 4, 8), (4096, 2, 4, None), (4096, 1, 3, None), (4096, 1, 4, None)]
    [(8192, 1, 4, 8), (8192, 1, 4, None), (8192, 1, 3, None)]
    [(16384, 1, 4, 8), (16384, 1, 4, None), (16384, 1, 3, None), (4096, 2, 4, None), (2048, 4, 4, None)]
    [(4096, 2, 4, None), (8192, 1, 4, None)]
    [(1024, 4, 8, None), (1024, 2, 8, None), (1024, 4, 4, None)]
    [(16, 1, 8, None), (16, 1, 4, None)]
    >>> [(v["block"], v["occupancy"], v["chunk"], v.get("form")) for v in variants(64, 32768) if "chunk" in v]
    ... # doctest: +NORMALIZE_WHITESPACE
    [(8192, 4, 8192, None), (4096, 8, 4096, None), (2048, 5, 8192, 1), (4096, 8, 8192, 2), (2048, 16, 8192, 2),
     (2048, 16, 4096, 2), (4096, 8, 4096, 2), (4096, 8, 16384, None)]

    Rows a few elements past a power of two (n = 4097) also get the power of two below, which the
    aligned entry serves (ffi.rs: each row's 16-byte-aligned body in the tile, its head and ragged
    end in a narrow edge tile) where the rows do not start on 16-byte boundaries:

    >>> [(v["block"], v["rows"], v.get("warps")) for v in variants(16384, 4097) if v["block"] == 4096 and "tail" not in v]
    [(4096, 2, 8), (4096, 1, None)]

    Rows between two powers of two (`autotune.body_and_tail`, a body of at most 8192) also get a
    body-and-tail tile (`softmax_row_tail`), over the default warps and over 8, and past 512 rows
    over 8 on a persistent grid of 2 tile blocks per SM at occupancy 2 that loads the next row tile
    ahead (form 1, `softmax_row_tail_prefetch`; NOTES.md, "The next row tile ahead, ..."):

    >>> [(v["block"], v["tail"], v["occupancy"], v.get("warps"), v.get("programs_per_sm"), v.get("form")) for v in variants(16384, 11008) if "tail" in v]
    [(8192, 4096, 4, None, None, None), (8192, 4096, 4, 8, None, None), (8192, 4096, 2, 8, 2, 1)]
    """
    pow2, max_rows = 1 << max(4, (n - 1).bit_length()), min(64, autotune.pow2(m))  # ffi.rs: 1..=64 rows
    rows = max(1, 8192 // pow2)  # (block, rows, occupancy, warps) below; whole rows up to 16384 (ffi.rs)
    short = [(pow2, 4096 // pow2, 8, None), (pow2, 2048 // pow2, 8, None), (pow2, 8192 // pow2, 4, None)]
    whole = [(pow2, rows, 4, 8), (pow2, rows, 4, None), (pow2, 1, 3, None), (pow2, 1, 4, None)]
    shapes = short if pow2 <= 2048 else whole if pow2 <= 16384 else []
    # rows a few elements past a power of two (4097): the aligned entry (ffi_util::aligned_rows_vec)
    # holds them in the power of two below when their starts are not 16-byte aligned
    half = autotune.aligned_block(n)
    shapes += [(half, max(1, 8192 // half), 4, 8), (half, 1, 4, None)] if half else []
    shapes += [(4096, 2, 4, None), (2048, 4, 4, None)] if 8192 < pow2 <= 16384 else []  # looped, online
    shapes += [(4096, 2, 4, None), (8192, 1, 4, None)] if pow2 > 16384 else []
    split = SPLIT_SHAPES if pow2 > 16384 else []
    out = autotune.unique(
        {"block": b, "rows": min(r, max_rows), "occupancy": o, "warps": w, "chunk": c, "form": f}
        for b, r, o, w, c, f in [(*s, None, None) for s in shapes] + split
    )
    body_tail = autotune.body_and_tail(n)
    if body_tail and body_tail[0] <= 8192:
        body, tail = body_tail
        rows = autotune.tile_rows(body, 8192, max_rows)
        out += autotune.unique(
            {"block": body, "tail": tail, "rows": rows, "occupancy": 4, "warps": w} for w in (None, 8)
        )
        if m > 512:  # past decode batches: more row tiles than one wave, persistent, the next row tile ahead
            out.append(
                {"block": body, "tail": tail, "rows": rows, "occupancy": 2, "warps": 8, "programs_per_sm": 2, "form": 1}
            )
    return out
