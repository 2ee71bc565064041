"""kernels/silu_and_mul/spec.py on the CPU: the port's default tile agrees with the baselines'
(tile_width), the autotune space stays small and valid, the tune key, inputs, the reference and the
bytes model are what the suites and reports assume. (Moved from test_silu_and_mul_baselines.py when
the baselines' own tests became generic: tests/kit/test_baselines.py.)"""

import pytest
import torch

from kernels.silu_and_mul import baselines as B
from kernels.silu_and_mul import spec


@pytest.mark.parametrize(
    "h,block",
    [(1, 16), (1000, 1024), (4096, 4096), (4097, 512), (6144, 2048), (14336, 2048), (11008, 4096), (16384, 4096)],
)
def test_tile_width_is_the_row_up_to_4096_then_the_widest_tile_padding_at_most_an_eighth(h, block):
    assert B.tile_width(h) == block == spec.default_block(h)
    if h > 4096:
        assert -(-h // block) * block * 8 <= h * 9


# -- the port's autotune space (spec.variants) ----------------------------------------------------


@pytest.mark.parametrize("m,h,wide", [(65536, 4096, [(4096, 1), (4096, 2)]), (16384, 14336, [(2048, 2), (2048, 4)])])
def test_port_variants_for_perf_configs_are_the_sweeps_fastest_and_larger_unmasked_tiles(m, h, wide):
    """1024 x 1 at occupancy 8 and 16, 2048 x 1 at 8, 4K- and 8K-element tiles at 4, 2048 x 1
    with 8 warps."""
    assert spec.variants(m, h) == [
        {"block": 1024, "rows": 1, "occupancy": 8},
        {"block": 1024, "rows": 1, "occupancy": 16},
        {"block": 2048, "rows": 1, "occupancy": 8},
        {"block": wide[0][0], "rows": wide[0][1], "occupancy": 4},
        {"block": wide[1][0], "rows": wide[1][1], "occupancy": 4},
        {"block": 2048, "rows": 1, "occupancy": 8, "warps": 8},
    ]


@pytest.mark.parametrize("m,h", [(1, 1), (3, 1000), (257, 4097), (4096, 4096), (1000, 14336), (65536, 4096), (37, 16)])
def test_port_variants_are_few_distinct_valid_and_start_with_the_default(m, h):
    vs = spec.variants(m, h)
    assert 1 <= len(vs) <= 8
    assert len({tuple(sorted(v.items())) for v in vs}) == len(vs)
    for v in vs:
        b, r = v["block"], v["rows"]
        # ffi.rs accepts: powers of two, block in [16, 16384], rows in [1, 256], block*rows <= 16384
        assert b & (b - 1) == 0 and r & (r - 1) == 0 and 16 <= b and 1 <= r <= 64 and b * r <= 16384
        assert v.get("warps", 4) in (4, 8) and 1 <= v["occupancy"] <= 32
    assert vs[0]["occupancy"] == 8 and vs[0]["block"] * vs[0]["rows"] <= 1024


def test_tune_key_keeps_h_and_rounds_m_up_to_a_power_of_two():
    assert spec.tune_key("bfloat16", 16384, 14336) == {"dtype": "bfloat16", "h": 14336, "m_class": 16384}
    assert spec.tune_key("float16", 257, 4097) == {"dtype": "float16", "h": 4097, "m_class": 512}


def test_bytes_moved_reads_x_once_and_writes_out_once():
    assert spec.bytes_moved({"dtype": "bfloat16", "m": 65536, "h": 4096}) == 65536 * (8192 + 4096) * 2
    assert spec.bytes_moved({"dtype": "float32", "m": 3, "h": 5}) == 3 * 15 * 4


def test_make_inputs_pads_rows_and_plants_saturating_gates():
    inp = spec.make_inputs({"dtype": "float16", "m": 4, "h": 6, "row_stride": 16}, device="cpu", seed=1)
    x = inp["x"]
    assert x.shape == (4, 12) and x.stride() == (16, 1) and x.dtype == torch.float16
    assert x[0, :4].tolist() == [-100.0, -30.0, 30.0, 100.0]
    ref = spec.reference(inp)
    assert ref.dtype == torch.float64 and ref.shape == (4, 6)
    assert ref[0, 0].item() == pytest.approx(
        -100 * torch.sigmoid(torch.tensor(-100.0, dtype=torch.float64)).item() * x[0, 6].item()
    )


def test_torch_baseline_matches_the_specs_reference():
    x = (2 * torch.randn(5, 2080))[:, :2000]
    ref = spec.reference({"x": x})
    assert B.unavailable_reason("torch") is None
    torch.testing.assert_close(B.torch_silu_and_mul(x).double(), ref, rtol=1e-5, atol=1e-5)
