"""tilekit.runtime.settle: the interleaved schedule, the throttle filter, per-placement figures and
the paired bootstrap that labels a small config's port/baseline ratio. CPU only; synthetic samples
are drawn from seeded generators around known true times."""

import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilekit.runtime import settle

ROOT = Path(__file__).resolve().parents[2]


def timed(ms: float, offsets, reps: int, noise: float, rng: np.random.Generator) -> list[list[float]]:
    """Samples per placement: ms times the placement's offset, with relative Gaussian noise."""
    return [list(ms * o * (1 + noise * rng.standard_normal(reps))) for o in offsets]


def width(interval: tuple[float, float, float]) -> float:
    return interval[2] - interval[1]


# -- schedule ------------------------------------------------------------------------------------


def test_the_schedule_is_fixed_by_its_seed_and_differs_between_seeds():
    backends = ["cutile-rs", "torch", "triton", "liger"]
    one = settle.schedule(backends, placements=4, rounds=16, seed=7)
    assert one == settle.schedule(backends, placements=4, rounds=16, seed=7)
    assert one != settle.schedule(backends, placements=4, rounds=16, seed=8)
    assert [p for p, _ in one] == [0, 1, 2, 3] * 4


def test_the_run_order_varies_across_rounds_so_no_backend_always_runs_first():
    plan = settle.schedule(["cutile-rs", "torch", "triton", "liger"], placements=4, rounds=32, seed=0)
    assert len({tuple(order) for _, order in plan}) > 8
    assert {order[0] for _, order in plan} == {"cutile-rs", "torch", "triton", "liger"}


@settings(max_examples=60, deadline=None)
@given(
    n_backends=st.integers(1, 6),
    placements=st.integers(1, 5),
    laps=st.integers(1, 4),
    seed=st.integers(0, 2**32),
)
def test_every_backend_runs_once_a_round_and_sees_every_placement_equally_often(n_backends, placements, laps, seed):
    backends = [f"b{i}" for i in range(n_backends)]
    plan = settle.schedule(backends, placements, placements * laps, seed)
    assert len(plan) == placements * laps
    assert all(sorted(order) == sorted(backends) for _, order in plan)
    seen = Counter((backend, p) for p, order in plan for backend in order)
    assert seen == {(b, p): laps for b in backends for p in range(placements)}


@pytest.mark.parametrize(
    "backends, placements, rounds, name",
    [
        ([], 2, 4, "backends"),
        (["torch", "cutile-rs", "torch"], 2, 4, r"backends names \['torch'\]"),
        (["torch"], 0, 4, "placements=0"),
        (["torch"], 4, 2, "rounds=2"),
        (["torch"], 4, 6, "rounds=6"),
    ],
)
def test_bad_schedule_arguments_are_refused_by_name(backends, placements, rounds, name):
    with pytest.raises(ValueError, match=name):
        settle.schedule(backends, placements, rounds, seed=0)


# -- drop_throttled ------------------------------------------------------------------------------


def test_throttled_samples_are_dropped_and_counted_and_the_threshold_itself_is_kept():
    samples = [1.0, 2.0, 3.0, 4.0, 5.0]
    clocks = [1000, 900, 899.9, None, 500]  # 900 is exactly 0.90 * 1000
    assert settle.drop_throttled(samples, clocks, reference_mhz=1000) == ([1.0, 2.0, 4.0], 2)
    assert settle.drop_throttled(samples, clocks, 1000, min_fraction=0.5) == (samples, 0)
    assert settle.drop_throttled(samples, [None] * 5, reference_mhz=1000) == (samples, 0)


def test_drop_throttled_refuses_mismatched_lengths_and_bad_references():
    with pytest.raises(ValueError, match="3 samples but 2 clocks"):
        settle.drop_throttled([1.0, 2.0, 3.0], [1000, 1000], reference_mhz=1000)
    with pytest.raises(ValueError, match="reference_mhz=0"):
        settle.drop_throttled([1.0], [1000], reference_mhz=0)
    with pytest.raises(ValueError, match="min_fraction=1.5"):
        settle.drop_throttled([1.0], [1000], reference_mhz=1000, min_fraction=1.5)


@settings(max_examples=100, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.floats(0.001, 1.0), st.one_of(st.none(), st.floats(100, 2500)))),
    fraction=st.floats(0.1, 1.0),
)
def test_drop_throttled_keeps_exactly_the_samples_at_full_clock_in_order(pairs, fraction):
    samples, clocks = [s for s, _ in pairs], [c for _, c in pairs]
    kept, dropped = settle.drop_throttled(samples, clocks, reference_mhz=1980, min_fraction=fraction)
    assert kept == [s for s, c in pairs if c is None or c >= fraction * 1980]
    assert dropped == len(samples) - len(kept)


# -- figure --------------------------------------------------------------------------------------


def test_figure_is_the_geometric_mean_of_placement_medians_and_their_relative_spread():
    samples = [[0.004, 0.002, 0.003], [0.005, 0.006], [0.001], [0.010, 0.002, 0.0025, 0.0035]]
    assert settle.placement_medians(samples) == pytest.approx([0.003, 0.0055, 0.001, 0.003])
    fig = settle.figure(samples)
    mean = (0.003 * 0.0055 * 0.001 * 0.003) ** 0.25
    assert fig["figure_ms"] == pytest.approx(mean)
    assert fig["spread"] == pytest.approx((0.0055 - 0.001) / mean)
    assert fig["placement_medians_ms"] == pytest.approx([0.003, 0.0055, 0.001, 0.003])
    one = settle.figure([[0.002, 0.004]])
    assert (one["figure_ms"], one["spread"], one["placement_medians_ms"]) == (pytest.approx(0.003), 0.0, [0.003])


def test_a_bimodal_placement_effect_moves_the_figure_less_than_a_median_over_placements():
    # placements whose medians sit in two groups (synthetic): which group gets the 4th and 5th of 8 values
    # decides a median over placements, while the mean moves by the share of one placement
    fast, slow = [0.00230] * 4, [0.00265] * 4
    one, other = fast + slow, fast[:3] + slow + [0.00265]
    geo = [settle.figure([[t] for t in p])["figure_ms"] for p in (one, other)]
    med = [float(np.median(p)) for p in (one, other)]
    assert abs(geo[1] / geo[0] - 1) < 0.02 < abs(med[1] / med[0] - 1)


def test_an_empty_placement_or_a_non_positive_time_is_refused_with_its_index():
    with pytest.raises(ValueError, match="placement 1 has no samples"):
        settle.placement_medians([[0.002], [], [0.003]])
    with pytest.raises(ValueError, match="no placements"):
        settle.figure([])
    with pytest.raises(ValueError, match="placement 0 holds a sample that is not a positive time"):
        settle.figure([[0.002, 0.0]])
    with pytest.raises(ValueError, match="placement 1 holds"):
        settle.figure([[0.002], [float("nan")]])


# -- ratio_interval ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_the_interval_holds_the_true_ratio_of_noisy_samples_with_placement_offsets(seed):
    rng = np.random.default_rng(seed)
    offsets = rng.uniform(0.85, 1.15, 8)  # where the tensors lie moves both arms alike
    port, base = timed(0.0020, offsets, 30, 0.02, rng), timed(0.0022, offsets, 30, 0.02, rng)
    ratio, lo, hi = settle.ratio_interval(port, base, seed=seed)
    assert lo <= 2.0 / 2.2 <= hi and lo <= ratio <= hi
    assert ratio == pytest.approx(settle.figure(port)["figure_ms"] / settle.figure(base)["figure_ms"], rel=1e-12)
    assert hi - lo < 0.05  # 2 % noise, 30 repetitions: a few % wide, not a blank cheque


def test_the_interval_narrows_with_more_repetitions():
    rng = np.random.default_rng(1)
    offsets = rng.uniform(0.85, 1.15, 8)
    few = settle.ratio_interval(timed(0.0020, offsets, 10, 0.02, rng), timed(0.0022, offsets, 10, 0.02, rng))
    many = settle.ratio_interval(timed(0.0020, offsets, 160, 0.02, rng), timed(0.0022, offsets, 160, 0.02, rng))
    assert width(many) < 0.6 * width(few)


def test_identical_arms_give_ratio_one_inside_a_nonempty_interval():
    rng = np.random.default_rng(2)
    arm = timed(0.003, rng.uniform(0.9, 1.1, 6), 20, 0.03, rng)
    ratio, lo, hi = settle.ratio_interval(arm, arm)
    assert ratio == 1.0 and lo < 1.0 < hi


def test_the_same_seed_gives_the_same_interval_and_another_seed_another():
    rng = np.random.default_rng(3)
    offsets = rng.uniform(0.9, 1.1, 4)
    port, base = timed(0.002, offsets, 15, 0.03, rng), timed(0.002, offsets, 15, 0.03, rng)
    assert settle.ratio_interval(port, base, seed=5) == settle.ratio_interval(port, base, seed=5)
    assert settle.ratio_interval(port, base, seed=5)[1:] != settle.ratio_interval(port, base, seed=6)[1:]


def test_placements_are_paired_so_an_offset_both_arms_share_cancels():
    """Exactly, without repetition noise: every draw's ratio is the true one. With noise, sharing the
    offsets keeps the interval several times narrower than the same offsets unshared."""
    offsets = [0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2]
    exact = settle.ratio_interval([[0.002 * o] * 5 for o in offsets], [[0.0025 * o] * 5 for o in offsets])
    assert exact == pytest.approx((0.8, 0.8, 0.8), rel=1e-12)
    rng = np.random.default_rng(4)
    shuffled = list(rng.permutation(offsets))
    port = timed(0.0020, offsets, 30, 0.02, rng)
    shared, unshared = timed(0.0022, offsets, 30, 0.02, rng), timed(0.0022, shuffled, 30, 0.02, rng)
    assert width(settle.ratio_interval(port, shared)) < width(settle.ratio_interval(port, unshared)) / 3


def test_one_placement_resamples_only_repetitions():
    rng = np.random.default_rng(5)
    ratio, lo, hi = settle.ratio_interval(timed(0.002, [1.0], 40, 0.02, rng), timed(0.0025, [1.0], 40, 0.02, rng))
    assert lo <= 0.8 <= hi and 0 < hi - lo < 0.05
    assert settle.ratio_interval([[0.002] * 9], [[0.0025] * 9]) == pytest.approx((0.8, 0.8, 0.8), rel=1e-12)


def test_uneven_repetitions_per_placement_after_throttle_drops_are_handled():
    port = [[0.002, 0.0021, 0.0019], [0.0022], [0.0020, 0.0020, 0.0021, 0.0019, 0.0020]]
    base = [[0.0024, 0.0025], [0.0026, 0.0025, 0.0027, 0.0024], [0.0024]]
    ratio, lo, hi = settle.ratio_interval(port, base)
    # placement medians 2.0, 2.2, 2.0 and 2.45, 2.55, 2.4 µs: the geometric means' ratio
    expected = (0.0020 * 0.0022 * 0.0020 / (0.00245 * 0.00255 * 0.0024)) ** (1 / 3)
    assert ratio == pytest.approx(expected) and lo <= ratio <= hi < 1.0


@settings(max_examples=20, deadline=None)
@given(scale=st.floats(0.01, 100.0), seed=st.integers(0, 1000))
def test_the_interval_ignores_a_common_unit(scale, seed):
    rng = np.random.default_rng(seed)
    offsets = rng.uniform(0.9, 1.1, 3)
    port, base = timed(0.002, offsets, 8, 0.05, rng), timed(0.0021, offsets, 8, 0.05, rng)
    scaled = settle.ratio_interval([[scale * s for s in p] for p in port], [[scale * s for s in b] for b in base])
    assert scaled == pytest.approx(settle.ratio_interval(port, base), rel=1e-9)


def test_a_higher_confidence_widens_the_interval_around_the_same_draws():
    rng = np.random.default_rng(8)
    offsets = rng.uniform(0.9, 1.1, 8)
    port, base = timed(0.002, offsets, 30, 0.03, rng), timed(0.0022, offsets, 30, 0.03, rng)
    nested = [settle.ratio_interval(port, base, confidence=c) for c in (0.5, 0.9, 0.95, 0.99)]
    assert all(a[1] > b[1] and a[2] < b[2] for a, b in zip(nested, nested[1:]))
    assert width(nested[0]) < width(nested[2]) / 2


def test_ratio_interval_refuses_arms_on_different_placements_and_bad_parameters():
    with pytest.raises(ValueError, match="port has 2 placements and base 1"):
        settle.ratio_interval([[0.002], [0.002]], [[0.002]])
    with pytest.raises(ValueError, match="placement 1 has no samples"):
        settle.ratio_interval([[0.002], [0.002]], [[0.002], []])
    with pytest.raises(ValueError, match="n_boot=0"):
        settle.ratio_interval([[0.002]], [[0.002]], n_boot=0)
    with pytest.raises(ValueError, match="confidence=1"):
        settle.ratio_interval([[0.002]], [[0.002]], confidence=1)


# -- label, settle, unsettled_count ---------------------------------------------------------------


@pytest.mark.parametrize(
    "lo, hi, band, expected",
    [
        (0.99, 1.01, 0.02, "SAME"),
        (0.98, 1.02, 0.02, "SAME"),  # both band edges are inside
        (0.98, 0.98, 0.02, "SAME"),
        (0.985, 0.995, 0.02, "SAME"),  # below 1 but within the band: a tie, not a win
        (1.0, 1.0, 0.0, "SAME"),
        (0.9, 0.97, 0.02, "FASTER"),
        (0.97, 0.999, 0.02, "FASTER"),  # crosses into the band, still wholly below 1
        (0.97, 1.0, 0.02, "UNSETTLED"),  # hi == 1: 1 is in it
        (0.99, 0.999, 0.0, "FASTER"),
        (1.03, 1.2, 0.02, "SLOWER"),
        (1.001, 1.03, 0.02, "SLOWER"),
        (1.0, 1.03, 0.02, "UNSETTLED"),  # lo == 1
        (0.97, 1.03, 0.02, "UNSETTLED"),
        (0.99, 1.021, 0.02, "UNSETTLED"),  # holds 1, just past the band
        (0.96, 1.04, 0.05, "SAME"),
    ],
)
def test_label_reads_the_interval_against_one_and_the_band(lo, hi, band, expected):
    assert settle.label(lo, hi, band) == expected


def test_label_refuses_an_inverted_or_nan_interval_and_a_bad_band():
    with pytest.raises(ValueError, match="lo=1.1 > hi=0.9"):
        settle.label(1.1, 0.9)
    with pytest.raises(ValueError, match="lo=nan"):
        settle.label(float("nan"), 1.0)
    with pytest.raises(ValueError, match="band=-0.1"):
        settle.label(0.9, 1.1, band=-0.1)


def test_settle_labels_clear_wins_ties_and_noise():
    rng = np.random.default_rng(7)
    offsets = rng.uniform(0.9, 1.1, 8)
    base = timed(0.0024, offsets, 30, 0.01, rng)
    faster = settle.settle(timed(0.0020, offsets, 30, 0.01, rng), base)
    assert faster["label"] == "FASTER" and faster["ratio"] == pytest.approx(2.0 / 2.4, rel=0.02)
    assert faster["ci95"][0] <= faster["ratio"] <= faster["ci95"][1] < 1
    assert faster["base_spread"] == settle.figure(base)["spread"] and faster["base_spread"] > 0.1
    assert (faster["n_boot"], faster["seed"]) == (2000, 0)

    tie = settle.settle(timed(0.0024, offsets, 60, 0.005, rng), timed(0.0024, offsets, 60, 0.005, rng))
    assert tie["label"] == "SAME" and 0.98 <= tie["ci95"][0] <= 1 <= tie["ci95"][1] <= 1.02

    noisy = settle.settle(timed(0.0024, offsets, 5, 0.2, rng), timed(0.0024, offsets, 5, 0.2, rng))
    assert noisy["label"] == "UNSETTLED" and noisy["ci95"][0] < 0.98 and noisy["ci95"][1] > 1.02


def test_unsettled_count_counts_only_unsettled_and_refuses_unknown_labels():
    assert settle.unsettled_count(["SAME", "UNSETTLED", "FASTER", "UNSETTLED", "SLOWER"]) == 2
    assert settle.unsettled_count([]) == 0
    with pytest.raises(ValueError, match=r"unknown labels \['unsettled'\]"):
        settle.unsettled_count(["SAME", "unsettled"])


def test_the_settle_doctests_pass():
    import doctest

    assert doctest.testmod(settle).failed == 0


def test_settle_imports_no_gpu_library():
    import subprocess
    import sys

    tools = Path(__file__).resolve().parents[2] / "tools"
    code = f"import sys; sys.path.insert(0, {str(tools)!r}); import tilekit.runtime.settle; "
    code += "print(sorted(m for m in ('torch', 'triton', 'cupy', 'pynvml') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "[]"


def test_settle_histories_tabulates_a_saved_run_without_a_gpu(tmp_path):
    script = ROOT / "scripts" / "settle_histories.py"

    def arm(ms, hot):
        return {"samples_ms": [[ms, ms * 1.01], [ms * 1.1]], "hot_ms": [hot], "seed": 3}

    key = 'rms_norm {"m": 256}'
    raw = {
        h: {
            "settled": {key: {"cutile-rs": arm(0.0024 * f, 0.0023), "torch": arm(0.0025, 0.0024)}},
            "separate": {"cutile-rs": {key: 0.0024}, "torch": {key: 0.0025}},
        }
        for h, f in (("fresh", 1.0), ("churn", 1.06))
    }
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"table": {}, "raw": raw}))
    done = subprocess.run(
        [sys.executable, str(script), "--table", str(saved)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr  # the cold ratios 0.96 and 1.0176 are 0.0576 apart
    assert "spread cold: 0.0576 (<= 0.04: NOT MET)" in done.stdout and "spread hot: 0.0000 (<= 0.04: ok)" in done.stdout
    assert "  fresh      torch     0.9600  0.9583    0.9600" in done.stdout


def test_settle_histories_goes_on_where_a_stopped_run_left_off(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("settle_histories", ROOT / "scripts" / "settle_histories.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    key, ran = 'rms_norm {"m": 256}', []

    def child(*argv):  # stands in for a GPU child process: one history's results
        ran.append(argv[1] + ("" if "settled" in argv else " separate"))
        if "settled" in argv:
            arm = {"samples_ms": [[0.0024], [0.0025]], "hot_ms": [0.0023], "seed": 1}
            result = {key: {"cutile-rs": arm, "torch": {**arm, "samples_ms": [[0.0025], [0.0026]]}}}
            return result | {script.ENV_KEY: {"gpu": gpu}}
        return {key: 0.0024}

    gpu = "NVIDIA H200"
    monkeypatch.setattr(script, "run_child", child)
    out = tmp_path / "run.json"
    argv = ["settle_histories.py", "--out", str(out), "--only", "rms_norm", "--histories", "fresh", "churn"]
    monkeypatch.setattr(sys, "argv", argv)
    assert script.main() == 0 and ran == ["fresh", "fresh separate", "fresh separate", "churn"] + ["churn separate"] * 2
    ran.clear()
    monkeypatch.setattr(sys, "argv", [*argv, "fragment"])
    assert script.main() == 0 and ran == ["fragment"] + ["fragment separate"] * 2  # the two saved are kept
    saved = json.loads(out.read_text())
    assert sorted(saved["raw"]) == ["churn", "fragment", "fresh"] and sorted(saved["table"][key]) == sorted(
        saved["raw"]
    )
    assert saved["raw"]["fresh"]["env"] == {"gpu": "NVIDIA H200"} and not out.with_name("run.json.tmp").exists()
    gpu = "NVIDIA H100 80GB HBM3"  # a later call on another GPU: refused, the file left as it was
    monkeypatch.setattr(sys, "argv", [*argv, "others"])
    with pytest.raises(SystemExit, match="one table, one environment"):
        script.main()
    assert json.loads(out.read_text()) == saved
    monkeypatch.setattr(sys, "argv", [a for a in argv if a != "rms_norm"] + ["--only", "matmul"])
    with pytest.raises(SystemExit, match="holds a run with --only"):
        script.main()
