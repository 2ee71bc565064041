"""make KERNEL=all's summary: one row per kernel, recomputed from the files on disk."""

import shutil
import sys
from pathlib import Path

from tilekit.reports import summary

H200 = Path(__file__).resolve().parents[2] / "results" / "h200"


def test_summary_row_is_recomputed_from_the_committed_h200_run(tmp_path):
    shutil.copytree(H200 / "rms_norm", tmp_path / "rms_norm")
    assert summary.main(["--out-root", str(tmp_path), "rms_norm"]) == 0
    text = (tmp_path / "summary.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| rms_norm"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:6] == ["rms_norm", "ALL_PASS", "DONE (DONE)", "0.8481", "[0.6791, 0.9624]", "triton"]
    assert cells[6] == "89.0% (4271.3 GB/s)"


def test_a_kernel_that_never_ran_names_the_targets(tmp_path):
    assert summary.main(["--out-root", str(tmp_path), "softmax"]) == 0
    row = next(line for line in (tmp_path / "summary.md").read_text().splitlines() if line.startswith("| softmax"))
    assert "not run (`make KERNEL=softmax test`)" in row
    assert "`make KERNEL=softmax perf` writes perf_cutile_rs.txt" in row


def test_summary_and_its_chart_are_deterministic(tmp_path):
    shutil.copytree(H200 / "rms_norm", tmp_path / "rms_norm")
    summary.main(["--out-root", str(tmp_path), "rms_norm"])
    first = [(tmp_path / name).read_bytes() for name in ("summary.md", "summary.svg")]
    summary.main(["--out-root", str(tmp_path), "rms_norm"])
    assert [(tmp_path / name).read_bytes() for name in ("summary.md", "summary.svg")] == first


IMAGE = "![cutile-rs: geomean ratio per kernel against its reference baseline](summary.svg)"


def test_summary_chart_is_written_beside_and_linked_after_the_table(tmp_path):
    shutil.copytree(H200 / "rms_norm", tmp_path / "rms_norm")
    assert summary.main(["--out-root", str(tmp_path), "rms_norm", "softmax"]) == 0
    lines = (tmp_path / "summary.md").read_text().split("\n")
    assert lines[-4].startswith("| softmax ") and lines[-3:] == ["", IMAGE, ""]  # the table's last row, then the chart
    svg = (tmp_path / "summary.svg").read_text()
    for text in (">rms_norm</text>", ">vs triton</text>", ">0.8481 DONE</text>", ">softmax</text>", ">not run</text>"):
        assert text in svg


def test_summary_chart_data_is_each_kernels_comparison(tmp_path):
    shutil.copytree(H200 / "rms_norm", tmp_path / "rms_norm")
    _, perfs = summary.collect(str(tmp_path), ["rms_norm", "softmax"])
    chart = summary.chart_data(perfs)
    rms, softmax = chart.kernels
    c = perfs[0].comparison
    assert (rms.kernel, rms.reference, rms.geomean, rms.ci95, rms.band) == (
        "rms_norm",
        "triton",
        c.geomean,
        c.ci95,
        "DONE",
    )
    assert rms.ratios == tuple(r.ratio for r in c.matched) and len(rms.ratios) == 12
    assert (softmax.kernel, softmax.geomean, softmax.ratios, softmax.band) == ("softmax", None, (), "not run")


def test_nothing_to_draw_means_no_chart_and_no_line(tmp_path):
    (tmp_path / "summary.svg").write_text("stale")
    assert summary.main(["--out-root", str(tmp_path), "softmax"]) == 0
    text = (tmp_path / "summary.md").read_text()
    assert "![" not in text and "Chart:" not in text
    assert not (tmp_path / "summary.svg").exists()


def test_without_matplotlib_the_summary_is_written_and_says_why(tmp_path, monkeypatch, capsys):
    shutil.copytree(H200 / "rms_norm", tmp_path / "rms_norm")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert summary.main(["--out-root", str(tmp_path), "rms_norm"]) == 0
    line = (
        "Chart: not drawn: matplotlib is not importable (import of matplotlib halted; None in sys.modules); "
        "`make setup` installs it, then `make KERNEL=all report` draws the chart"
    )
    assert (tmp_path / "summary.md").read_text().endswith(f"\n\n{line}\n")
    assert not (tmp_path / "summary.svg").exists()
    assert f"summary.svg: {line}" in capsys.readouterr().err
