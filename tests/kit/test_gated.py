"""tilekit.runtime.gated, the gated family's shared port space (silu_and_mul, swiglu): the default tile the
ports and the baselines' tiled forms take, the autotune candidates, the tune key and the bytes model.
Pure: no GPU."""

import pytest

from tilekit.runtime import gated


@pytest.mark.parametrize(
    "h,block",
    [(1, 16), (1000, 1024), (4096, 4096), (4097, 512), (6144, 2048), (14336, 2048), (11008, 4096), (16384, 4096)],
)
def test_tile_width_is_the_row_up_to_4096_then_the_widest_tile_padding_at_most_an_eighth(h, block):
    assert gated.default_block(h) == block
    if h > 4096:
        assert -(-h // block) * block * 8 <= h * 9


@pytest.mark.parametrize("m,h,wide", [(65536, 4096, [(4096, 1), (4096, 2)]), (16384, 14336, [(2048, 2), (2048, 4)])])
def test_variants_for_perf_configs_are_the_sweeps_fastest_and_larger_unmasked_tiles(m, h, wide):
    """1024 x 1 at occupancy 8 and 16, 2048 x 1 at 8, 4K- and 8K-element tiles at 4, 2048 x 1
    with 8 warps."""
    assert gated.variants(m, h) == [
        {"block": 1024, "rows": 1, "occupancy": 8},
        {"block": 1024, "rows": 1, "occupancy": 16},
        {"block": 2048, "rows": 1, "occupancy": 8},
        {"block": wide[0][0], "rows": wide[0][1], "occupancy": 4},
        {"block": wide[1][0], "rows": wide[1][1], "occupancy": 4},
        {"block": 2048, "rows": 1, "occupancy": 8, "warps": 8},
    ]


@pytest.mark.parametrize("m,h", [(1, 1), (3, 1000), (257, 4097), (4096, 4096), (1000, 14336), (65536, 4096), (37, 16)])
def test_variants_start_with_one_small_tile_at_occupancy_8(m, h):
    """ffi.rs's validation of every candidate is tests/kit/test_kernel_contract.py's (both kernels)."""
    vs = gated.variants(m, h)
    assert vs[0]["occupancy"] == 8 and vs[0]["block"] * vs[0]["rows"] <= 1024


@pytest.mark.parametrize(
    "h,merged", [(4097, True), (8192 + 64, True), (8192 + 65, False), (4096, False), (4000, False)]
)
def test_rows_a_few_columns_past_4096_tiles_add_the_2048_tile_at_occupancy_2(h, merged):
    """ffi.rs gives up to MERGED_TAIL columns past the whole tiles to the last whole one: H = 4097
    then runs as two 2048-wide tiles a row (0.1111 ms against 0.1238 for the 512 x 8 pick)."""
    extra = {"block": 2048, "rows": 1, "occupancy": 2}
    vs = gated.variants(16384, h)
    assert (vs[-1] == extra) == merged
    assert (extra in vs) == merged


def test_tune_key_keeps_h_and_rounds_m_up_to_a_power_of_two():
    assert gated.tune_key("bfloat16", 16384, 14336) == {"dtype": "bfloat16", "h": 14336, "m_class": 16384}
    assert gated.tune_key("float16", 257, 4097) == {"dtype": "float16", "h": 4097, "m_class": 512}


def test_bytes_moved_reads_gate_and_up_once_and_writes_out_once():
    assert gated.bytes_moved({"dtype": "bfloat16", "m": 65536, "h": 4096}) == 65536 * (8192 + 4096) * 2
    assert gated.bytes_moved({"dtype": "float32", "m": 3, "h": 5}) == 3 * 15 * 4
