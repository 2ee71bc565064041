"""Odd input never breaks the kit: a file with CRLF (Windows) or lone CR (old Mac) line ends, a UTF-8
BOM or no final newline reads, sanitizes, compares, reports and validates exactly as its LF form,
for every kind of file the kit reads; what the kit writes stays LF.

The odd files are built here from LF text: logs built in the test (failures, skips, a truncated
block, pytest's -x line), and the committed H200 rms_norm run (end to end through the CLI).
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilekit.reports import correctness, layout, report, summary, validate
from tilekit.runtime import autotune, kernel
from tilekit.reports.records import investigation_text, parse_log, read_text

from child_env import child_env  # tests/kit/child_env.py
from perf_records import HEADER, perf_block  # tests/kit/perf_records.py

RUN = Path(__file__).resolve().parents[2] / "results" / "h200" / "rms_norm"
KERNEL = "rms_norm"

# How other tools rewrite a file: bytes in, bytes out.
ODD = {
    "crlf": lambda b: b.replace(b"\n", b"\r\n"),
    "lone_cr": lambda b: b.replace(b"\n", b"\r"),
    "bom": lambda b: b"\xef\xbb\xbf" + b,
    "no_final_newline": lambda b: b.removesuffix(b"\n"),
    "bom_lone_cr_no_final_newline": lambda b: b"\xef\xbb\xbf" + b.removesuffix(b"\n").replace(b"\n", b"\r"),
}
# Everything `report` writes.
REPORT_OUTPUTS = [layout.PERFORMANCE_MD, layout.CORRECTNESS_MD, layout.PORT_CLEAN, layout.INVESTIGATION] + [
    layout.baseline_clean(b) for b in ("cutile", "triton", "torch")
]


def odd_copy(src: Path, dst: Path, odd: str) -> Path:
    """A copy of a folder with every file rewritten the `odd` way."""
    shutil.copytree(src, dst)
    for path in dst.rglob("*"):
        if path.is_file():
            path.write_bytes(ODD[odd](path.read_bytes()))
    return dst


def write_pair(tmp_path, name: str, text: str, odd: str) -> tuple[Path, Path]:
    """The same text as an LF file (with its final newline) and as an odd file."""
    text = text if text.endswith("\n") else text + "\n"
    (tmp_path / "lf").mkdir(exist_ok=True)
    (tmp_path / odd).mkdir(exist_ok=True)
    lf, other = tmp_path / "lf" / name, tmp_path / odd / name
    lf.write_bytes(text.encode())
    other.write_bytes(ODD[odd](text.encode()))
    assert lf.read_bytes() != other.read_bytes()
    return lf, other


def passed_case(backend: str, n: int, median: float = 0.25) -> str:
    """A passed perf case: its progress line, then its record block."""
    node = f"tests/kernels/test_rms_norm.py::test_perf[{backend}-{n}]"
    config = {"dtype": "float16", "n": n}
    return f"{node} PASSED\n" + perf_block(backend, config, median, test=node, kernel=KERNEL, std=0.001)


def messy_perf_log(backend: str) -> str:
    """Every kind of line the parser reports on: valid and rejected blocks, failures, skips, a cut block."""
    bad = passed_case(backend, 3).replace("median_ms: 0.250000", "median_ms: nan")
    cut = "\n".join(passed_case(backend, 4).split("\n")[:6])
    return (
        HEADER
        + passed_case(backend, 1)
        + "\n"
        + bad
        + "\n"
        + passed_case(backend, 2)
        + "\n"
        + f"tests/kernels/test_rms_norm.py::test_perf[{backend}-5] FAILED\n"
        + "SKIPPED [2] tests/kernels/test_rms_norm.py:40: no CUDA GPU\n"
        + f"FAILED tests/kernels/test_rms_norm.py::test_perf[{backend}-5] - RuntimeError: code -3\n"
        + "========== 1 failed, 2 passed, 2 skipped in 1.00s ==========\n"
        + cut
        + "\n"
    )


# ---------------------------------------------------------------------------------------------
# Each kind of file, read and parsed


@pytest.mark.parametrize("odd", ODD)
@pytest.mark.parametrize("backend", ["cutile-rs", "triton"])
def test_odd_raw_perf_log_gives_the_same_records_rejections_failures_and_line_numbers(tmp_path, odd, backend):
    lf, other = write_pair(tmp_path, "perf.full.txt", messy_perf_log(backend), odd)
    want, got = parse_log(read_text(lf), KERNEL, backend), parse_log(read_text(other), KERNEL, backend)
    assert (len(want.records), len(want.rejected), len(want.outcomes)) == (2, 2, 2)
    assert got == want  # records (text, line, fields), rejections and outcomes with their line numbers
    assert investigation_text("log", got) == investigation_text("log", want)


@pytest.mark.parametrize("odd", ODD)
@pytest.mark.parametrize(
    "name, backend",
    [
        ("reports/logs/perf_cutile_rs.full.txt", "cutile-rs"),
        ("reports/logs/baseline_perf_torch.full.txt", "torch"),
        ("perf_cutile_rs.txt", "cutile-rs"),
        ("baseline_perf_triton.txt", "triton"),
    ],
)
def test_odd_committed_perf_log_parses_as_its_lf_form(tmp_path, odd, name, backend):
    lf, other = write_pair(tmp_path, "log.txt", (RUN / name).read_text(), odd)
    want = parse_log(read_text(lf), KERNEL, backend)
    assert len(want.records) == len(kernel.load(KERNEL).perf_configs) and not want.rejected
    assert parse_log(read_text(other), KERNEL, backend) == want


@pytest.mark.parametrize("odd", ODD)
def test_odd_junit_and_correctness_log_render_the_same_correctness_report(tmp_path, odd):
    junit = (
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n<testsuite name="pytest">\n'
        '<testcase classname="tests.kernels.test_rms_norm" name="test_op[a]" time="0.1"/>\n'
        '<testcase classname="tests.kernels.test_rms_norm" name="test_op[b]" time="0.1">\n'
        '<failure message="AssertionError: Tensor-likes are not close!">line one\nline two\n</failure>\n'
        "</testcase>\n</testsuite>\n</testsuites>\n"
    )
    raw = (
        HEADER + "tests/kernels/test_rms_norm.py::test_op[b] FAILED\n"
        "!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!\n"
        "========== 1 failed, 1 passed in 1.00s ==========\n"
    )
    texts = {}
    for folder in ("lf", odd):
        d = tmp_path / folder / KERNEL
        (d / "reports" / "logs").mkdir(parents=True)
        (d / layout.JUNIT).write_bytes(junit.encode() if folder == "lf" else ODD[odd](junit.encode()))
        (d / layout.CORRECTNESS_LOG).write_bytes(raw.encode() if folder == "lf" else ODD[odd](raw.encode()))
        texts[folder], result, _ = correctness.build_correctness(KERNEL, str(d))
        assert result.verdict == "FAIL"
        assert validate.check_pytest_header(read_text(d / layout.CORRECTNESS_LOG)) == []
    assert "Note: pytest stopped at the first failure (-x); later cases did not run." in texts["lf"]
    assert texts[odd] == texts["lf"]


@pytest.mark.parametrize("odd", ODD)
def test_odd_cut_off_junit_names_the_same_line_as_its_lf_form(tmp_path, odd):
    cut = '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n<testsuite name="pytest">\n<testcase name="a"\n'
    messages = []
    for path in write_pair(tmp_path, "junit.xml", cut, odd):
        with pytest.raises(correctness.MalformedInput) as caught:
            correctness.parse_junit(read_text(path), "junit.xml")
        messages.append(str(caught.value))
    assert messages[0].startswith("junit.xml:4: not valid JUnit XML")  # the line where the run was cut off
    assert messages[1] == messages[0]


@pytest.mark.parametrize("odd", ODD)
def test_odd_autotune_cache_loads_as_its_lf_form(tmp_path, odd, capsys):
    # an autotune cache an H200 run wrote (rms_norm, 2026-11-29), kept as test data
    lf, other = write_pair(
        tmp_path, "autotune.json", (Path(__file__).parent / "data" / "autotune-h200.json").read_text(), odd
    )
    want = autotune.load(lf)
    assert "NVIDIA H200" in want
    assert autotune.load(other) == want
    assert "ignoring" not in capsys.readouterr().err


@pytest.mark.parametrize("odd", ODD)
def test_odd_committed_run_validates_reports_and_summarizes_as_its_lf_form(tmp_path, odd):
    lf, other = tmp_path / "lf" / KERNEL, odd_copy(RUN, tmp_path / odd / KERNEL, odd)
    shutil.copytree(RUN, lf)
    for d in (other, lf):  # the odd sanitized logs and reports as committed, before report rewrites them
        assert [(c.description, c.problems) for c in validate.run_checks(KERNEL, str(d)) if c.problems] == []
    rows = [
        summary.render(str(d.parent), [KERNEL], summary.collect(str(d.parent), [KERNEL])[0]).replace(
            str(d.parent), "OUT"
        )
        for d in (other, lf)
    ]
    assert rows[0] == rows[1]
    assert [report.main(["--kernel", KERNEL, "--dir", str(d)]) for d in (other, lf)] == [0, 0]
    for rel in REPORT_OUTPUTS:
        assert (other / rel).read_bytes() == (lf / rel).read_bytes(), rel


# ---------------------------------------------------------------------------------------------
# End to end: the report and validate commands over an odd copy of the committed run


def tilekit(cwd: Path, *args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "tilekit", *args],
        cwd=cwd,
        env=child_env(),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr


def commands(root: Path) -> dict:
    """validate as committed, then report, then validate again, in ``root`` holding ``rms_norm/``."""
    folder = ["--kernel", KERNEL, "--dir", KERNEL]
    runs = {"validate before": tilekit(root, "validate", *folder)}
    runs["report"] = tilekit(root, "report", *folder)
    runs["validate after"] = tilekit(root, "validate", *folder)
    return runs


@pytest.fixture(scope="module")
def lf_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("lf")
    shutil.copytree(RUN, root / KERNEL)
    return root, commands(root)


@pytest.mark.parametrize("odd", ["crlf", "bom_lone_cr_no_final_newline"])
def test_report_and_validate_cli_over_an_odd_copy_of_the_committed_run_match_the_lf_run_byte_for_byte(
    tmp_path, lf_run, odd
):
    lf_root, want = lf_run
    assert [run[0] for run in want.values()] == [0, 0, 0], want
    odd_copy(RUN, tmp_path / KERNEL, odd)
    assert commands(tmp_path) == want  # exit codes, stdout (<VALIDATOR_OUTPUT>, verdicts) and stderr
    for rel in REPORT_OUTPUTS:
        written = (tmp_path / KERNEL / rel).read_bytes()
        assert written == (lf_root / KERNEL / rel).read_bytes(), rel
        assert b"\r" not in written and not written.startswith(b"\xef\xbb\xbf"), rel
