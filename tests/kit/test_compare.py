"""tilekit.reports.compare: matching on config, the winning baseline, ratios, geomean, interval, verdict."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilekit.reports.compare import CompareError, band, bootstrap_ci, compare, geomean, straddled_edges
from tilekit.reports.records import parse_log

from perf_records import parsed_records as recs  # tests/kit/perf_records.py


def test_matched_configs_give_ratio_to_the_reference():
    c = compare("k", recs("cutile-rs", {1: 2.0, 2: 0.5}), {"triton": recs("triton", {1: 1.0, 2: 1.0})})
    assert [r.ratio for r in c.rows] == [2.0, 0.5]
    assert c.geomean == pytest.approx(1.0, rel=1e-12)
    assert (c.verdict, c.severity, c.reference) == ("DONE", "DONE", "triton")


def test_winning_baseline_is_lowest_geomean_even_when_it_loses_some_configs():
    port = recs("cutile-rs", {1: 1.0, 2: 1.0, 3: 1.0})
    baselines = {
        "cutile": recs("cutile", {1: 1.0, 2: 1.0, 3: 1.0}),
        "triton": recs("triton", {1: 0.9, 2: 1.2, 3: 1.2}),
        "torch": recs("torch", {1: 1.5, 2: 1.5, 3: 1.5}),
    }
    c = compare("k", port, baselines)
    assert c.reference == "cutile"
    first = c.rows[0]
    assert (first.ratio, first.best_backend) == (1.0, "triton")
    assert first.ratio_to_best == pytest.approx(1 / 0.9)
    assert first.ratio_to("torch") == pytest.approx(1 / 1.5)
    assert [s.backend for s in c.baselines] == ["cutile", "torch", "triton"]
    assert c.verdict == "DONE"


def test_winner_is_chosen_over_configs_all_baselines_have_only():
    # triton is slower on the shared config but has a huge extra config; it must not matter. No
    # baseline has every config, so the winner is chosen over the shared one.
    baselines = {"cutile": recs("cutile", {1: 1.0, 3: 1.0}), "triton": recs("triton", {1: 1.1, 2: 0.001})}
    c = compare("k", recs("cutile-rs", {1: 1.0, 2: 0.001, 3: 1.0}), baselines)
    assert c.reference == "cutile"
    assert [r.status for r in c.rows] == ["matched", "missing_reference", "matched"]
    assert (c.verdict, c.severity) == ("INVESTIGATE", "MISSING_DATA")


def test_a_baseline_that_lacks_configs_is_not_the_reference_when_another_has_them_all():
    # liger is fastest on what it serves but refuses config 2 (e.g. Liger's Triton softmax and
    # vocabulary rows): the reference must give every config a ratio, so it is cutile.
    baselines = {"cutile": recs("cutile", {1: 1.0, 2: 2.0}), "liger": recs("liger", {1: 0.5})}
    c = compare("k", recs("cutile-rs", {1: 1.0, 2: 2.0}), baselines)
    assert c.reference == "cutile"
    assert "among the baselines that have every config (not liger)" in c.reference_reason
    assert [r.status for r in c.rows] == ["matched", "matched"]
    assert c.rows[0].ratio_to_best == 2.0  # liger stays in the per-config comparison
    assert (c.verdict, c.geomean) == ("DONE", 1.0)


def test_reference_can_be_forced():
    baselines = {"cutile": recs("cutile", {1: 1.0}), "torch": recs("torch", {1: 2.0})}
    c = compare("k", recs("cutile-rs", {1: 1.0}), baselines, reference="torch")
    assert (c.reference, c.geomean) == ("torch", 0.5)
    assert c.reference_reason == "chosen with --reference (winning baseline would be cutile)"
    with pytest.raises(CompareError, match="--reference triton"):
        compare("k", recs("cutile-rs", {1: 1.0}), baselines, reference="triton")


@pytest.mark.parametrize(
    "port_ms, severity, verdict",
    [
        (1.05, "DONE", "DONE"),
        (1.050001, "MILD_GAP", "INVESTIGATE"),
        (1.10, "MILD_GAP", "INVESTIGATE"),
        (1.100001, "MODERATE_GAP", "INVESTIGATE"),
        (1.50, "MODERATE_GAP", "INVESTIGATE"),
        (1.500001, "LARGE_GAP", "INVESTIGATE"),
        (0.5, "DONE", "DONE"),
    ],
)
def test_band_edges_are_inclusive_on_the_unrounded_geomean(port_ms, severity, verdict):
    c = compare(
        "k",
        recs("cutile-rs", {1: port_ms, 2: port_ms, 3: port_ms}),
        {"triton": recs("triton", {1: 1.0, 2: 1.0, 3: 1.0})},
    )
    assert (c.severity, c.verdict) == (severity, verdict)


def test_geomean_exactly_on_an_edge_through_exp_log_counts_as_the_edge():
    # ratios 1.05**2 and 1 have geomean 1.05 mathematically; float exp(mean(log)) may be an ulp off
    c = compare("k", recs("cutile-rs", {1: 1.1025, 2: 1.0}), {"torch": recs("torch", {1: 1.0, 2: 1.0})})
    assert c.geomean == pytest.approx(1.05, rel=1e-14)
    assert c.severity == "DONE"


def test_band_of_value_just_above_edge_is_the_next_band():
    assert [band(x) for x in (1.0500001, 1.1000001, 1.5000001)] == ["MILD_GAP", "MODERATE_GAP", "LARGE_GAP"]


def test_reference_config_without_port_median_is_missing_data():
    c = compare("k", recs("cutile-rs", {1: 1.0}), {"triton": recs("triton", {1: 1.0, 2: 1.0})})
    assert (c.verdict, c.severity) == ("INVESTIGATE", "MISSING_DATA")
    assert [(r.config["n"], r.status) for r in c.missing] == [(2, "missing_port")]
    assert c.geomean == 1.0 and c.band_of_geomean == "DONE"


def test_port_configs_no_baseline_has_are_unmatched_and_kept_out_of_the_geomean():
    c = compare("k", recs("cutile-rs", {1: 1.0, 99: 50.0}), {"triton": recs("triton", {1: 1.0})})
    assert [r.config["n"] for r in c.unmatched] == [99]
    assert (c.geomean, c.verdict) == (1.0, "DONE")


def test_duplicate_configs_in_one_log_are_an_error_naming_them():
    once = "\n".join(r.text for r in recs("cutile-rs", {1: 1.0, 2: 1.0}))
    port = parse_log(once + "\nnoise\n" + once).records  # a run appended to its own log
    with pytest.raises(CompareError) as err:
        compare("k", port, {"triton": recs("triton", {1: 1.0})}, labels={"cutile-rs": "perf.full.txt"})
    assert str(err.value).startswith(
        'perf.full.txt: duplicate configs (config {"dtype": "float16", "n": 1} at '
        'lines 1, 28; config {"dtype": "float16", "n": 2} at lines 14, 41)'
    )


def test_no_port_data_is_blocked_with_the_hint():
    c = compare("k", [], {"triton": recs("triton", {1: 1.0})}, blocked_hint="pytest skipped 4 cases")
    assert (c.verdict, c.severity, c.geomean) == ("BLOCKED", "MISSING_DATA", None)
    assert c.blocked_reason == "no valid cutile-rs median: pytest skipped 4 cases"


def test_no_baseline_data_is_blocked():
    c = compare("k", recs("cutile-rs", {1: 1.0}), {"triton": []})
    assert (c.verdict, c.blocked_reason) == ("BLOCKED", "no valid baseline median")
    assert c.notes == ["baseline triton has no valid record"]


def test_bootstrap_interval_of_one_config_is_the_point():
    assert bootstrap_ci([1.2]) == (pytest.approx(1.2), pytest.approx(1.2))


def test_bootstrap_interval_contains_the_geomean_and_is_reproducible():
    ratios = [0.9, 1.0, 1.1, 1.3, 0.95, 1.02]
    low, high = bootstrap_ci(ratios)
    assert low < geomean(ratios) < high
    assert bootstrap_ci(ratios) == (low, high)
    assert bootstrap_ci(list(reversed(ratios))) == (low, high)


def test_straddled_edges_are_the_edges_inside_the_interval():
    assert straddled_edges(1.00, 1.12) == [1.05, 1.10]
    assert straddled_edges(1.00, 1.04) == []
    assert straddled_edges(1.06, 1.09) == []


@settings(max_examples=60, deadline=None)
@given(medians=st.lists(st.floats(min_value=0.01, max_value=100), min_size=1, max_size=12), seed=st.integers(0, 1000))
def test_geomean_and_verdict_do_not_depend_on_config_order(medians, seed):
    port = recs("cutile-rs", {i: m for i, m in enumerate(medians)})
    base = recs("torch", {i: 1.0 for i in range(len(medians))})
    shuffled_port, shuffled_base = port[:], base[:]
    random.Random(seed).shuffle(shuffled_port)
    random.Random(seed + 1).shuffle(shuffled_base)
    a = compare("k", port, {"torch": base})
    b = compare("k", shuffled_port, {"torch": shuffled_base})
    assert (a.geomean, a.ci95, a.verdict, a.severity) == (b.geomean, b.ci95, b.verdict, b.severity)
