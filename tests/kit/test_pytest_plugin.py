"""tilekit.testing.pytest_plugin: the record printer, run in a child pytest on a test file built here."""

import os
import subprocess
import sys

import pytest

from tilekit.reports.records import BEGIN, END, parse_log

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools")

TIMED_TESTS = """
import pytest

def record(n):
    return {"test": f"test_timed.py::test_perf[{n}]", "kernel": "rms_norm", "backend": "cutile-rs",
            "config": {"n": n, "dtype": "float16"}, "timer": "cupti", "median_ms": 0.5, "mean_ms": 0.5,
            "std_ms": 0.01, "min_ms": 0.4, "max_ms": 0.6, "nrep": 50, "gbps": 100.0}

@pytest.mark.parametrize("n", [1, 2])
def test_perf(request, n):
    print("chatter from the test body, printed before the block")
    request.node.user_properties.append(("tilekit_perf_record", record(n)))

def test_perf_that_fails(request):
    request.node.user_properties.append(("tilekit_perf_record", record(3)))
    assert False, "wrong result"

def test_untimed():
    pass
"""


def run_pytest(tmp_path, *args, conftest=None):
    (tmp_path / "test_timed.py").write_text(TIMED_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    if conftest is not None:
        (tmp_path / "conftest.py").write_text(conftest)
    env = {**os.environ, "PYTHONPATH": TOOLS}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("flags", [["-s", "-v"], ["-q"], ["-v"]])
def test_one_contiguous_block_per_passed_timed_case(tmp_path, flags):
    code, out = run_pytest(tmp_path, "-p", "tilekit.testing.pytest_plugin", "--print-record", *flags)
    assert code == 1  # the failing case
    parsed = parse_log(out)
    assert [r.config_key for r in parsed.records] == ['{"dtype": "float16", "n": 1}', '{"dtype": "float16", "n": 2}']
    assert parsed.rejected == []  # nothing interleaved inside a block, even under -s
    assert out.count(BEGIN) == out.count(END) == 2
    assert parsed.records[0].number("gbps") == 100.0


def test_no_block_without_the_option(tmp_path):
    code, out = run_pytest(tmp_path, "-p", "tilekit.testing.pytest_plugin", "-s")
    assert code == 1
    assert BEGIN not in out


CONFTEST_ADDING_THE_OPTION = """
pytest_plugins = ["tilekit.testing.pytest_plugin"]  # imported after this conftest registered its own option

def pytest_addoption(parser):
    parser.addoption("--print-record", action="store_true", default=False)
"""


def test_second_registration_of_the_option_does_not_break_startup(tmp_path):
    code, out = run_pytest(tmp_path, "--print-record", conftest=CONFTEST_ADDING_THE_OPTION)
    assert code == 1, out
    assert len(parse_log(out).records) == 2
