"""tilekit.reports.charts: SVG bytes from chart data alone (the reports' use of it: test_report, test_summary)."""

import html
import re
import sys

import matplotlib
import pytest

from tilekit.reports import charts

CHART = charts.PerformanceChart(
    kernel="softmax",
    port="cutile-rs",
    reference="triton",
    baselines=("torch", "triton"),
    rows=(
        charts.ConfigBars("float16", "m=4096, n=1024", {"torch": 0.5, "triton": 0.9}, 81.25, "81.2% · 3900.0 GB/s"),
        charts.ConfigBars("float16", "m=4096, n=4096", {}, None, "no throughput recorded", "MISSING"),
    ),
)
SUMMARY = charts.SummaryChart(
    "cutile-rs",
    (
        charts.KernelRatios("rms_norm", "triton", 0.98, (0.95, 1.02), (0.91, 1.0, 1.05), "DONE"),
        charts.KernelRatios("softmax", None, None, None, (), "not run"),
    ),
)


def texts(svg: str) -> list[str]:
    """The text of every <text> element: labels stay text with svg.fonttype 'none'."""
    return [html.unescape(t) for t in re.findall(r"<text [^>]*>([^<]*)</text>", svg)]


def test_performance_svg_keeps_labels_as_text_and_highlights_the_reference():
    svg = charts.performance_svg(CHART)
    words = texts(svg)
    for label in (
        "m=4096, n=1024",
        "m=4096, n=4096",
        "0.9000",
        "MISSING",
        "81.2% · 3900.0 GB/s",
        "no throughput recorded",
        "vs triton (reference)",
        "vs torch",
        "softmax: cutile-rs against its baselines (float16)",
    ):
        assert label in words
    assert "0.5000" not in words  # only the reference's ratios are written out
    assert "font-family: 'DejaVu Sans'" in svg


def test_svg_has_no_date_no_creator_and_no_trailing_blanks():
    svg = charts.performance_svg(CHART)
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg and "<dc:creator>" not in svg
    assert not [line for line in svg.split("\n") if line != line.rstrip()]


def test_same_data_gives_the_same_bytes_whatever_the_local_rc(monkeypatch):
    first = charts.performance_svg(CHART), charts.summary_svg(SUMMARY)
    # A matplotlibrc on the machine (or a caller's rcParams) must not reach the chart.
    monkeypatch.setitem(matplotlib.rcParams, "axes.facecolor", "#ff0000")
    monkeypatch.setitem(matplotlib.rcParams, "font.size", 20.0)
    monkeypatch.setitem(matplotlib.rcParams, "svg.hashsalt", None)
    assert (charts.performance_svg(CHART), charts.summary_svg(SUMMARY)) == first


def test_summary_svg_names_each_kernel_its_reference_and_value():
    words = texts(charts.summary_svg(SUMMARY))
    for label in (
        "rms_norm",
        "vs triton",
        "0.9800 DONE",
        "softmax",
        "not run",
        "one config",
        "DONE band (geomean ≤ 1.05)",
    ):
        assert label in words


def test_several_tables_name_their_table_in_each_label():
    rows = (
        charts.ConfigBars("bfloat16", "n=1", {"triton": 1.0}, None, "-"),
        charts.ConfigBars("float16", "n=1", {"triton": 1.1}, None, "-"),
    )
    words = texts(charts.performance_svg(charts.PerformanceChart("k", "cutile-rs", "triton", ("triton",), rows)))
    assert ("bfloat16 · n=1", "float16 · n=1", "k: cutile-rs against its baselines") == tuple(
        w for w in words if "n=1" in w or w.startswith("k:")
    )


@pytest.mark.parametrize("module", ["matplotlib", "matplotlib.figure"])
def test_missing_matplotlib_is_one_line_saying_why(monkeypatch, module):
    assert charts.missing_matplotlib() is None
    monkeypatch.setitem(sys.modules, module, None)
    assert (
        charts.missing_matplotlib() == f"matplotlib is not importable (import of {module} halted; None in sys.modules)"
    )
