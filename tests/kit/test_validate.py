"""tilekit.reports.validate: the <VALIDATOR_OUTPUT> block, structure checks and recomputed numbers."""

import re
import sys

from tilekit.reports import report, validate

from perf_records import HEADER, perf_block  # tests/kit/perf_records.py

KERNEL = "softmax"


def perf_log(backend: str, medians: dict) -> str:
    blocks = [perf_block(backend, {"dtype": "float16", "n": n}, m, kernel=KERNEL) for n, m in medians.items()]
    return HEADER + "\n".join(blocks) + f"\n===== {len(medians)} passed in 1.0s =====\n"


def good_dir(tmp_path):
    """A folder as `make all` leaves it, reports rendered by the real report command."""
    d = tmp_path / KERNEL
    logs = d / "reports" / "logs"
    logs.mkdir(parents=True)
    (d / "reports" / "build.log").write_text("Finished release\nT cutile_softmax\n")
    (d / "correctness_cutile_rs.txt").write_text(HEADER + "collected 1 item\n")
    (logs / "correctness.junit.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.kernels.test_softmax" name="test_op[a]"/>'
        "</testsuite></testsuites>"
    )
    (logs / "perf_cutile_rs.full.txt").write_text(perf_log("cutile-rs", {1: 1.0, 2: 1.3, 3: 0.9}))
    (logs / "baseline_perf_triton.full.txt").write_text(perf_log("triton", {1: 1.0, 2: 1.0, 3: 1.0}))
    (logs / "baseline_perf_torch.full.txt").write_text(perf_log("torch", {1: 2.0, 2: 2.0, 3: 2.0}))
    assert report.main(["--kernel", KERNEL, "--dir", str(d)]) == 0
    return d


def validate_run(d, capsys, *extra):
    capsys.readouterr()  # drop what building the folder printed
    status = validate.main(["--kernel", KERNEL, "--dir", str(d), *extra])
    out = capsys.readouterr()
    return status, out.out, out.err


def failed_checks(stdout: str) -> list[str]:
    pairs = re.findall(r"^\$ (.*)\nexit=(\d+)$", stdout, re.M)
    return [desc for desc, code in pairs if code != "0"]


def test_good_folder_passes_with_one_block_of_command_exit_pairs(tmp_path, capsys):
    status, out, _ = validate_run(good_dir(tmp_path), capsys)
    lines = out.strip().split("\n")
    assert status == 0
    assert (lines[0], lines[-1]) == ("<VALIDATOR_OUTPUT>", "</VALIDATOR_OUTPUT>")
    body = lines[1:-1]
    assert len(body) == 2 * 9  # build, header, correctness, 3 sanitized logs, investigation, 2 on performance.md
    assert all(a.startswith("$ ") and b == "exit=0" for a, b in zip(body[::2], body[1::2]))


def test_tampered_geomean_fails_the_recompute_check(tmp_path, capsys):
    d = good_dir(tmp_path)
    perf = d / "reports" / "performance.md"
    text = perf.read_text()
    real = re.search(r"^geomean_ratio=(\S+)$", text, re.M).group(1)
    perf.write_text(text.replace(f"geomean_ratio={real}", "geomean_ratio=0.9000"))
    status, out, err = validate_run(d, capsys)
    assert status == 1
    assert failed_checks(out) == [f"{perf}: geomean, interval and verdict recomputed from the sanitized logs"]
    assert f"geomean: report says '0.9000', the sanitized logs give '{real}'" in err


def test_tampered_verdict_fails(tmp_path, capsys):
    d = good_dir(tmp_path)
    perf = d / "reports" / "performance.md"
    text = perf.read_text()
    assert text.startswith("VERDICT: INVESTIGATE\n")  # geomean of 1.0, 1.3, 0.9 is 1.0536: MILD_GAP
    perf.write_text(text.replace("VERDICT: INVESTIGATE", "VERDICT: DONE", 1).replace("MILD_GAP", "DONE"))
    status, _, err = validate_run(d, capsys)
    assert status == 1
    assert "verdict: report says 'DONE', the sanitized logs give 'INVESTIGATE'" in err
    assert "severity: report says 'DONE', the sanitized logs give 'MILD_GAP'" in err


def test_second_geomean_line_is_a_structure_failure(tmp_path, capsys):
    d = good_dir(tmp_path)
    perf = d / "reports" / "performance.md"
    perf.write_text(perf.read_text() + "geomean_ratio=1.0000\n")
    _, _, err = validate_run(d, capsys)
    assert "expected exactly one `geomean_ratio=X.XXXX` line, found 2" in err


def test_a_linked_chart_that_is_missing_fails_naming_the_file_and_the_fix(tmp_path, capsys):
    d = good_dir(tmp_path)
    chart = d / "reports" / "performance.svg"
    assert "\n![softmax: " in (d / "reports" / "performance.md").read_text() and chart.is_file()
    chart.unlink()
    status, out, err = validate_run(d, capsys)
    perf = d / "reports" / "performance.md"
    assert status == 1
    assert failed_checks(out) == [f"{perf}: structure (VERDICT, geomean_ratio=, Severity, interval, logs, chart)"]
    assert (f"links to the chart {chart}, which does not exist; `make KERNEL={KERNEL} report` draws it") in err


def test_a_report_written_without_matplotlib_validates(tmp_path, capsys, monkeypatch):
    d = good_dir(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert report.main(["--kernel", KERNEL, "--dir", str(d)]) == 0
    assert "\nChart: not drawn: matplotlib is not importable" in (d / "reports" / "performance.md").read_text()
    status, out, _ = validate_run(d, capsys)
    assert (status, failed_checks(out)) == (0, [])


def test_noise_in_a_sanitized_log_fails(tmp_path, capsys):
    d = good_dir(tmp_path)
    clean = d / "baseline_perf_torch.txt"
    clean.write_text("PASSED\n" + clean.read_text())
    status, out, err = validate_run(d, capsys)
    assert status == 1
    assert failed_checks(out) == [
        f"{clean} holds complete valid blocks only and matches {d}/reports/logs/baseline_perf_torch.full.txt"
    ]
    assert "holds text outside the record blocks" in err


def test_sanitized_log_out_of_date_with_its_raw_log_fails(tmp_path, capsys):
    d = good_dir(tmp_path)
    raw = d / "reports" / "logs" / "perf_cutile_rs.full.txt"
    raw.write_text(raw.read_text().replace("median_ms: 1.300000", "median_ms: 1.200000"))
    _, _, err = validate_run(d, capsys)
    assert "differs from what its raw log sanitizes to (stale: re-run make report)" in err


def test_correctness_log_without_pytest_header_fails(tmp_path, capsys):
    d = good_dir(tmp_path)
    (d / "correctness_cutile_rs.txt").write_text("collected 1 item\nPASSED\n")
    status, _, err = validate_run(d, capsys)
    assert status == 1
    for prefix in ("'platform'", "'rootdir:'", "'plugins:'"):
        assert f"no line starting with {prefix}" in err


def test_correctness_verdict_disagreeing_with_junit_fails(tmp_path, capsys):
    d = good_dir(tmp_path)
    md = d / "reports" / "correctness.md"
    md.write_text(md.read_text().replace("VERDICT: ALL_PASS", "VERDICT: FAIL"))
    _, _, err = validate_run(d, capsys)
    assert "verdict: report says FAIL, the JUnit XML gives ALL_PASS" in err


def test_missing_expected_files_name_the_make_target(tmp_path, capsys):
    d = tmp_path / KERNEL
    d.mkdir()
    status, out, err = validate_run(d, capsys)
    assert status == 1
    assert len(failed_checks(out)) == 7  # build, header, correctness, baseline, port log, investigation, report
    for target in ("build", "test", "baseline", "perf"):
        assert f"`make KERNEL={KERNEL} {target}` writes it" in err


def test_required_baseline_must_be_present(tmp_path, capsys):
    d = good_dir(tmp_path)
    status, _, err = validate_run(d, capsys, "--baselines", "triton,torch,cutile")
    assert status == 1
    assert f"baseline_perf_cutile.full.txt is missing; `make KERNEL={KERNEL} baseline` writes it" in err


def test_blocked_report_validates(tmp_path, capsys):
    d = good_dir(tmp_path)
    raw = d / "reports" / "logs" / "perf_cutile_rs.full.txt"
    raw.write_text(HEADER + "SKIPPED [3] t.py:9: no CUDA GPU\n")
    assert report.main(["--kernel", KERNEL, "--dir", str(d)]) == 0
    assert (d / "reports" / "performance.md").read_text().startswith("VERDICT: BLOCKED\n")
    status, out, _ = validate_run(d, capsys)
    assert (status, failed_checks(out)) == (0, [])
