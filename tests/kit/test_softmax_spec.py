"""kernels/softmax/spec.py on the CPU: the autotune space stays small and valid, inputs and the
bytes model are what the suites and reports assume."""
import pytest
import torch

from kernels.softmax import spec


@pytest.mark.parametrize("m,n,expected", [
    (65536, 1024, [(1024, 4, 8, None), (1024, 2, 8, None), (1024, 8, 4, None)]),
    (65536, 4096, [(4096, 2, 4, 8), (4096, 2, 4, None), (4096, 1, 3, None), (4096, 1, 4, None)]),
    (65536, 8192, [(8192, 1, 4, 8), (8192, 1, 4, None), (8192, 1, 3, None)]),
    (4096, 16384, [(16384, 1, 4, 8), (16384, 1, 4, None), (16384, 1, 3, None), (4096, 2, 4, None), (2048, 4, 4, None)]),
    (64, 32768, [(4096, 2, 4, None), (2048, 4, 4, None), (8192, 1, 4, None), (4096, 4, 4, None)]),
    (3, 1000, [(1024, 4, 8, None), (1024, 2, 8, None), (1024, 4, 4, None)]),  # rows capped at 4
    (1, 1, [(16, 1, 8, None), (16, 1, 4, None)]),
])
def test_variants_follow_the_sweep_short_rows_at_occupancy_8_long_ones_at_3_or_4(m, n, expected):
    vs = spec.variants(m, n)
    assert [(v["block"], v["rows"], v["occupancy"], v.get("warps")) for v in vs] == expected


@pytest.mark.parametrize("m,n", [(65536, 1024), (65536, 4096), (65536, 8192), (257, 4097), (100, 20000), (64, 32768), (1, 1), (7, 8195)])
def test_variants_are_few_distinct_and_within_what_ffi_accepts(m, n):
    vs = spec.variants(m, n)
    assert 1 <= len(vs) <= 8
    assert len({tuple(sorted(v.items())) for v in vs}) == len(vs)
    for v in vs:
        b, r = v["block"], v["rows"]
        assert b >= 16 and b & (b - 1) == 0 and 1 <= r <= 64 and r & (r - 1) == 0 and b * r <= 1 << 16
        assert v.get("warps", 4) in (4, 8) and 1 <= v["occupancy"] <= 32


def test_tune_key_keeps_n_and_rounds_m_up_to_a_power_of_two():
    assert spec.tune_key("float16", 65535, 1000) == {"dtype": "float16", "n": 1000, "m_class": 65536}
    assert spec.tune_key("float32", 1, 1) == {"dtype": "float32", "n": 1, "m_class": 1}


def test_bytes_moved_is_one_read_and_one_write():
    assert spec.bytes_moved({"dtype": "float16", "m": 65536, "n": 1024}) == 2 * 65536 * 1024 * 2
    assert spec.bytes_moved({"dtype": "float32", "m": 65536, "n": 8192}) == 2 * 65536 * 8192 * 4


def test_inputs_are_shifted_rows_with_the_requested_row_stride():
    inputs = spec.make_inputs({"dtype": "bfloat16", "m": 64, "n": 1000, "row_stride": 1040}, device="cpu", seed=0)
    x = inputs["x"]
    assert x.shape == (64, 1000) and x.stride() == (1040, 1) and x.dtype == torch.bfloat16
    assert float(x.float().abs().max()) > 100  # rows are shifted: a softmax without the max overflows
    assert int((x == 0).sum()) < x.numel() // 100


def test_reference_is_float64_softmax_rows_summing_to_one():
    x = torch.tensor([[1000.0, 1000.0], [-1000.0, float("-inf")]])
    ref = spec.reference({"x": x})
    assert ref.dtype == torch.float64
    assert ref.tolist() == [[0.5, 0.5], [1.0, 0.0]]


def test_perf_configs_are_the_issues():
    assert spec.PERF_CONFIGS == [
        {"dtype": "float16", "m": 65536, "n": 1024},
        {"dtype": "float16", "m": 65536, "n": 4096},
        {"dtype": "float32", "m": 65536, "n": 8192},
    ]
