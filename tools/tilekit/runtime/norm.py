"""The row normalizations (kernels/rms_norm, kernels/layer_norm): what both ports and both baselines
share (their gradients': tilekit.runtime.norm_backward). Pure: no GPU, no triton, no cuda.tile.

Port (op.py): the knobs (block = tile width, rows per tile block, occupancy, persistent programs
per SM), their ffi.rs defaults, the tune key (tilekit.runtime.autotune.row_tune_key) and the candidates
autotune times (kernels/rms_norm/NOTES.md, "The variant space"; layer_norm moves the same bytes
per element with one more reduction). Baselines: the `auto` rule of their row-reduction forms.
"""

from __future__ import annotations

from tilekit.runtime import autotune
from tilekit.runtime.autotune import row_tune_key as tune_key

__all__ = ["AUTO", "DEFAULT_VARIANT", "DTYPES", "export_args", "tune_key", "variants"]

DTYPES = ("float16", "bfloat16", "float32")
DEFAULT_VARIANT = {"block": -1, "rows": -1, "occupancy": -1, "programs_per_sm": 0}  # ffi.rs picks


# ffi.rs's `programs` for one tile block per row tile through the pointer-tile entries (masked, or
# unmasked where a whole-row tile divides (m, n))
POINTER_ENTRIES = -2


def export_args(
    block: int,
    rows: int,
    occupancy: int,
    programs_per_sm: int = 0,
    pointer: int = 0,
    tail: int = 0,
    warps: int | None = None,
    form: int = 0,
    *,
    sms: int,
) -> tuple[int, ...]:
    """A variant's arguments of the export, (block, rows, occupancy, programs, tail, warps, form), on a
    GPU with `sms` SMs (programs_per_sm > 0: the persistent kernel; pointer=1: the pointer-tile
    entries, ffi.rs POINTER_ENTRIES; tail > 0: each row held as a `block`-wide body and a `tail`-wide
    tail tile; warps: worker warps per tile block, 4 or 8, None or -1 the compiler's; form 1 with a
    tail and programs_per_sm: the persistent tail that loads the next row tile ahead). Pure: the
    CPU tests check `variants` through it.

    >>> export_args(4096, 1, 4, pointer=1, sms=132), export_args(1024, 8, 4, 4, sms=132)
    ((4096, 1, 4, -2, 0, -1, 0), (1024, 8, 4, 528, 0, -1, 0))
    >>> export_args(8192, 1, 2, 2, tail=4096, warps=8, form=1, sms=132)
    (8192, 1, 2, 264, 4096, 8, 1)
    """
    programs = programs_per_sm * sms if programs_per_sm > 0 else POINTER_ENTRIES if pointer else 0
    warps = -1 if warps is None else int(warps)
    return int(block), int(rows), int(occupancy), int(programs), int(tail), warps, int(form)


def variants(m: int, n: int) -> list[dict]:
    """Candidate (block, rows, occupancy, programs_per_sm), few so tuning a class takes seconds; why
    these: kernels/rms_norm/NOTES.md, "The variant space". Rows are capped at m (rounded up to a
    power of two) and 64, as ffi.rs's default is (issue 11: more made autotune fail):

    >>> [(v["block"], v["rows"], v["occupancy"], v["programs_per_sm"]) for v in variants(1000, 1)]
    [(16, 64, 4, 0), (16, 64, 2, 0), (16, 64, 4, 0), (16, 64, 5, 0), (16, 64, 4, 4), (16, 64, 2, 2)]
    >>> [(v["block"], v["rows"], v["occupancy"], v.get("pointer")) for v in variants(256, 4096)][6:10]
    [(4096, 1, 4, None), (4096, 1, 2, None), (4096, 1, 2, 1), (4096, 2, 4, 1)]
    >>> [(v["block"], v["rows"], v.get("tail")) for v in variants(16384, 18944)[::2]]
    [(2048, 4, None), (4096, 2, None), (4096, 1, None), (512, 16, None), (8192, 1, None), (16384, 1, 4096), (16384, 1, 4096)]
    >>> [(v["occupancy"], v.get("pointer"), v["programs_per_sm"]) for v in variants(16384, 18944)[-4:-1]]
    [(2, 1, 0), (3, 1, 0), (2, None, 2)]
    >>> [(v["block"], v["rows"], v["occupancy"]) for v in variants(65536, 1024) if v.get("pointer")]
    [(1024, 4, 4), (1024, 8, 4), (1024, 8, 5), (1024, 4, 8)]
    >>> [(v["block"], v["rows"], v["occupancy"]) for v in variants(16384, 4097) if v.get("pointer") and not v.get("tail")]
    [(8192, 1, 4), (8192, 1, 5), (4096, 1, 6)]

    Every shape also gets the pointer-tile entries (`pointer`: plain loads and stores, no TMA), one
    tile block per row tile: decode batches (m <= 512) one-row tiles at occupancy 2 and two-row ones
    at 4, whose first load issues at once where the partition entries' TMA pipeline starts late;
    larger batches 4 K and 8 K elements per tile block (at most 8192 wide: past that the two-pass
    form), which beat the TMA entries by 2-10 % on the H200 (rms_norm's NOTES.md, "Pointer tiles for
    every batch"), the 8 K ones also at occupancy 5 (layer_norm's headline; its NOTES.md,
    "Occupancy of the pointer tiles"), the 4 K ones of rows of 513-4096 also at 8 (rms_norm's
    NOTES.md, "Decode rows without masks"); rows of 1025-2048 also one-row tiles at occupancy 8, rows of
    12289-16384 the whole 16384-wide tile at occupancy 2 and 3 (rms_norm's NOTES.md, "2048 at
    occupancy 8" and "A whole 16384-wide pointer tile").
    Rows past 16384 also get one row per tile block and the widest column tile that divides n (two
    passes, no masks). Rows no power of two holds well (`autotune.body_and_tail`: 11008, 18944,
    5120 ...) also get a body and a tail tile, ~8K elements of body per tile block: through pointer
    tiles, one tile block per row tile, at two occupancies set by the tile's lanes, and persistent
    (through TMA) at 2 (decode batches: the first only; rms_norm's NOTES.md, "Rows between two
    powers of two" and "A body and a tail through pointer tiles"), and past 512 rows the persistent
    tail through pointer tiles that loads the next row tile ahead (`form` 1), over 8 warps at
    occupancy 2, or 1 for row tiles of 12289-20480 lanes:

    >>> [(v["block"], v["tail"], v["occupancy"], v["programs_per_sm"]) for v in variants(16384, 18944) if v.get("form")]
    [(16384, 4096, 1, 1)]
    >>> [(v["rows"], v["occupancy"], v["warps"]) for v in variants(16384, 5120) if v.get("form")]
    [(2, 2, 8)]
    >>> [v for v in variants(512, 11008) if v.get("form")]
    []
    """
    pow2 = 1 << max(4, (n - 1).bit_length())
    max_rows = min(64, autotune.pow2(m))  # ffi.rs accepts 1..=64 rows per tile block
    shapes = [(pow2, max(1, elems // pow2)) for elems in (8192, 16384)] if pow2 <= 16384 else []
    shapes += [(pow2, 2)] if pow2 == 16384 else []
    shapes += [(block, 8192 // block) for block in (2048, 4096) if block < n]
    # rows past 16384: also one row per tile block (our Triton baseline's two-pass form), and the
    # widest column tile that divides n (18944 = 37 x 512), unmasked
    divides = n & -n
    shapes += [(4096, 1)] if pow2 > 16384 else []
    shapes += [(divides, 8192 // divides)] if pow2 > 16384 and 256 <= divides < 2048 else []
    shapes += [(pow2, 1)] if m <= 512 and pow2 <= 16384 else []  # decode batches: a tile block per row
    out = autotune.unique(
        {"block": b, "rows": min(r, max_rows), "occupancy": o, "programs_per_sm": 0} for b, r in shapes for o in (4, 2)
    )
    if m <= 512 and pow2 <= 16384:
        out += [dict(out[0], rows=min(r, max_rows), occupancy=o, pointer=1) for r, o in ((1, 2), (2, 4))]
    else:  # larger batches: 4 K and 8 K elements per tile block, the 8 K also at occupancy 5 (the docstring)
        block = min(pow2, 8192)
        for elems, occupancy in ((4096, 4), (8192, 4), (8192, 5)):
            rows = autotune.tile_rows(block, elems, max_rows)
            out.append({"block": block, "rows": rows, "occupancy": occupancy, "programs_per_sm": 0, "pointer": 1})
        # the 4 K tile also at occupancy 8 (rows of 513-4096, tiles 1024-4096 wide): where it divides
        # the rows, the unmasked entry hoists w's (and b's) loads above the reductions and, at 4,
        # takes more registers than the masked one (layer_norm's 106 against 60 at f16 1 x 4096;
        # rms_norm's NOTES.md, "Decode rows without masks"), so fewer tile blocks share an SM
        if 1024 <= block <= 4096:
            rows = autotune.tile_rows(block, 4096, max_rows)
            out.append({"block": block, "rows": rows, "occupancy": 8, "programs_per_sm": 0, "pointer": 1})
        # rows of 1025-2048: one row at occupancy 8 (f16 262144 x 2048: 0.5019 ms against 0.5152
        # for the 2 x 2048 tile at 4; rms_norm's NOTES.md, "2048 at occupancy 8")
        if pow2 == 2048:
            out.append({"block": pow2, "rows": 1, "occupancy": 8, "programs_per_sm": 0, "pointer": 1})
        # rows that fill three quarters of a 16384 tile or more: that tile whole in registers at
        # occupancy 2 and 3 (one pass; 165 registers, no spill, rms_norm's NOTES.md)
        if pow2 == 16384 and 4 * n > 3 * pow2:
            out += [{"block": pow2, "rows": 1, "occupancy": o, "programs_per_sm": 0, "pointer": 1} for o in (2, 3)]
    # rows a few elements past a power of two (4097): the aligned entry (ffi_util::aligned_rows_vec)
    # holds them in the power of two below, one row per tile block at occupancy 6 (rms_norm's
    # NOTES.md, "Rows off 16-byte boundaries"), when their starts are not 16-byte aligned
    half = autotune.aligned_block(n)
    if half:
        out.append({"block": half, "rows": 1, "occupancy": 6, "programs_per_sm": 0, "pointer": 1})
    out = autotune.unique(out)
    # persistent: the first tile on SMs x occupancy tile blocks, each loading w once; rows a few
    # past a power of two the aligned entry's one-row tile at occupancy 5 and 3 (its persistent form
    # restages w, and b, once per tile block into x's layout; rms_norm's NOTES.md, "A weight in the
    # layout of x": 5 is rms_norm's best, 3 layer_norm's)
    persistent = {"block": half, "rows": 1, "occupancy": 0, "programs_per_sm": 0} if half else out[0]
    occupancies = (5, 3) if half else (4, 2)
    out += [dict(persistent, occupancy=o, programs_per_sm=o) for o in occupancies] if pow2 <= 16384 else []
    split = autotune.body_and_tail(n)
    if split:
        body, tail = split
        rows = autotune.tile_rows(body, 8192, max_rows)
        # through pointer tiles, one tile block per row tile, at two occupancies from the tile's lanes
        # (20480: 2 and 3, 12288: 4 and 5, the fastest two at 18944 and 11008 on the H200; rms_norm's
        # NOTES.md, "A body and a tail through pointer tiles"); persistent through TMA
        low = min(8, max(1, 49152 // (rows * (body + tail))))
        tiles = [
            {"block": body, "tail": tail, "rows": rows, "occupancy": o, "programs_per_sm": 0, "pointer": 1}
            for o in (low, low + 1)
        ]
        persistent = {"block": body, "tail": tail, "rows": rows, "occupancy": 2, "programs_per_sm": 2}
        out += tiles[:1] if m <= 512 else [*tiles, persistent]  # decode: one
        # the persistent tail that loads the next row tile ahead (rms_norm's form 1), over 8 warps: at
        # occupancy 2 up to 12288 lanes a row tile, at 1 up to 20480 (128 and 236 registers; 11008
        # 0.1837 ms against 0.1841 for the TMA tail, 18944 0.3197 against 0.3552 for the looped pick:
        # rms_norm's NOTES.md, "The next row tile ahead"); not for rows the aligned entry takes
        lanes = rows * (body + tail)
        if m > 512 and not half and lanes <= 20480:
            occupancy = 2 if lanes <= 12288 else 1
            out.append(dict(persistent, occupancy=occupancy, programs_per_sm=occupancy, warps=8, form=1))
    return out


# auto of the baselines' row reductions (tilekit.runtime.baseline_support.row_configs; rms_norm's NOTES.md has
# the H200 sweep): Triton takes the two-pass form from a 1024-wide row on, else multirow when there
# are more row tiles than persistent programs; cuTile goes persistent once the rows make more than a
# couple of waves.
AUTO = {"triton": {"looped_from": 1024, "multirow": "tiles"}, "cutile": {"multirow": "waves"}}
