"""make KERNEL=all's summary: one row per kernel, recomputed from the files on disk."""
import shutil
from pathlib import Path

from tilekit import summary

H200 = Path(__file__).resolve().parents[2] / "results" / "h200"


def test_summary_row_is_recomputed_from_the_committed_h200_run(tmp_path):
    shutil.copytree(H200 / "rms_norm", tmp_path / "rms_norm")
    assert summary.main(["--out-root", str(tmp_path), "rms_norm"]) == 0
    text = (tmp_path / "summary.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| rms_norm"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:6] == ["rms_norm", "ALL_PASS", "DONE (DONE)", "0.9828", "[0.9465, 1.0159]", "triton"]
    assert cells[6] == "86.3% (4143.4 GB/s)"


def test_a_kernel_that_never_ran_names_the_targets(tmp_path):
    assert summary.main(["--out-root", str(tmp_path), "softmax"]) == 0
    row = next(line for line in (tmp_path / "summary.md").read_text().splitlines() if line.startswith("| softmax"))
    assert "not run (`make KERNEL=softmax test`)" in row
    assert "`make KERNEL=softmax perf` writes perf_cutile_rs.txt" in row


def test_summary_is_deterministic(tmp_path):
    shutil.copytree(H200 / "rms_norm", tmp_path / "rms_norm")
    summary.main(["--out-root", str(tmp_path), "rms_norm"])
    first = (tmp_path / "summary.md").read_bytes()
    summary.main(["--out-root", str(tmp_path), "rms_norm"])
    assert (tmp_path / "summary.md").read_bytes() == first
