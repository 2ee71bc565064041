"""One pytest session, one log per (kernel, backend): tilekit.testing.stage_logs (--stage-log) and the
stage scheduler of tilekit.testing.gpu_workers, in real child pytest runs on suites built here. The
Makefile's timed stages, which use them, are tested in test_make_targets.py."""

import sys
from pathlib import Path

import pytest

from tilekit.reports import layout, validate
from tilekit.testing.gpu_workers import spread_by_stage
from tilekit.reports.records import parse_log
from tilekit.testing.stage_logs import backend_of, kernel_of, stage_of, stage_path

from child_env import TEST_TIMEOUT, run  # tests/kit/child_env.py
from child_env import child_env as shared_child_env

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(TEST_TIMEOUT)  # each child has a shorter deadline (child_env.run)

# A kernel suite in miniature: test_perf[<backend id>-<n>] for three backends, with one failing
# case (triton, n=2) and one skipped case (torch, n=3). KERNEL is replaced per file.
SUITE = """
import os, time
import pytest

RECORD_NAME = {"cutile_rs": "cutile-rs", "cutile_py": "cutile", "triton": "triton", "torch": "torch"}
CASES = [(b, n) for b in os.environ.get("SUITE_BACKENDS", "cutile_rs,triton,torch").split(",") for n in (1, 2, 3, 4)]


@pytest.mark.parametrize("backend,n", CASES, ids=str)
def test_perf(request, backend, n):
    time.sleep(0.05)
    if os.environ.get("CRASH_AT") == f"{backend}-{n}":
        os._exit(3)  # a kernel that kills its process
    if backend == "torch" and n == 3:
        pytest.skip("torch: no such op here")
    assert not (backend == "triton" and n == 2), "triton gives a wrong result"
    request.node.user_properties.append(("tilekit_perf_record", {
        "test": request.node.nodeid, "kernel": "KERNEL", "backend": RECORD_NAME[backend],
        "config": {"n": n, "dtype": "float16"}, "timer": "cupti", "median_ms": 0.5, "mean_ms": 0.5,
        "std_ms": 0.01, "min_ms": 0.4, "max_ms": 0.6, "nrep": 50,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "none"),
        "seen_device": os.environ.get("CUDA_VISIBLE_DEVICES", "unset")}))
"""
TEMPLATE = "out/{kernel}/reports/logs/perf_{backend}.full.txt"
ALL_BACKENDS = "cutile_rs,triton,torch"


def child_env(**extra) -> dict:
    return shared_child_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", **extra)


def pytest_argv(*args) -> list:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]


def run_session(folder: Path, kernels, *args, backends=ALL_BACKENDS, files=None, **env) -> tuple[int, str]:
    """pytest on tests/kernels/test_<kernel>.py for each kernel, with --stage-log TEMPLATE and
    --stage-backends ``backends``."""
    (folder / "tests" / "kernels").mkdir(parents=True, exist_ok=True)
    for kernel in kernels:
        (folder / "tests" / "kernels" / f"test_{kernel}.py").write_text(SUITE.replace("KERNEL", kernel))
    (folder / "pytest.ini").write_text(
        "[pytest]\naddopts = -p tilekit.testing.pytest_plugin -p tilekit.testing.gpu_workers\n"
    )
    files = files or [f"tests/kernels/test_{k}.py" for k in kernels]
    argv = pytest_argv("-p", "xdist", *files, "--print-record", "-v", "-rs", "--stage-log", TEMPLATE)
    done = run([*argv, "--stage-backends", backends, *args], cwd=folder, env=child_env(**env))
    return done.returncode, done.stdout + done.stderr


def run_on_two_workers(folder: Path, kernels, **kw) -> tuple[int, str]:
    """run_session under xdist: two workers, pinned to GPUs 7 and 9."""
    return run_session(folder, kernels, "-n", "2", "--dist", "load", TILEKIT_GPU_LIST="7,9", **kw)


def stage_log(folder: Path, kernel: str, backend: str) -> str:
    return (folder / TEMPLATE.format(kernel=kernel, backend=backend)).read_text()


# ---------------------------------------------------------------------------------------------
# A case's stage, from its node id


@pytest.mark.parametrize(
    "nodeid,stage",
    [
        ("tests/kernels/test_rms_norm.py::test_perf[cutile_rs-262144-1024-float16]", ("rms_norm", "cutile_rs")),
        ("tests/kernels/test_rms_norm.py::test_perf[cutile_py-262144-1024-float16]", ("rms_norm", "cutile_py")),
        ("tests/kernels/test_silu_and_mul.py::test_op[torch-4x8-bfloat16]", ("silu_and_mul", "torch")),
        ("tests/kernels/test_softmax.py::test_op_every_variant_cutile_rs[37x1000-float16]", ("softmax", "cutile_rs")),
        ("tests/kernels/test_softmax.py::test_op_bad_input_cutile_rs[cutile_rs-dtype]", ("softmax", "cutile_rs")),
        # a provider's id is its name; one that starts with another's is still its own
        ("tests/kernels/test_softmax.py::test_perf[liger_cutile-512-151936-bfloat16]", ("softmax", "liger_cutile")),
        ("tests/kernels/test_softmax.py::test_perf[liger-512-151936-bfloat16]", ("softmax", "liger")),
        ("tests/kernels/test_matmul.py::test_op[tilegym-64x64x64-float16]", ("matmul", "tilegym")),
        ("tests/kernels/test_softmax.py::test_op_every_variant_liger_cutile[4x8-float16]", ("softmax", "liger_cutile")),
    ],
)
def test_stage_of_a_kernel_suite_case(nodeid, stage):
    assert stage_of(nodeid) == stage


@pytest.mark.parametrize(
    "nodeid",
    [
        "tests/kit/test_records.py::test_parse",
        "tests/kernels/test_x.py",
        "tests/kernels/test_x.py::test_perf[tritonx-1]",
        "conftest.py::test_a[torch-1]",
    ],
)
def test_a_node_id_without_kernel_or_backend_has_no_stage(nodeid):
    assert stage_of(nodeid) is None


def test_kernel_and_backend_parts():
    assert kernel_of("tests/kernels/test_matmul.py") == "matmul"
    assert backend_of("tests/kernels/test_matmul.py::test_perf[triton-4096]") == "triton"
    assert stage_path(TEMPLATE, "matmul", "cutile_py") == "out/matmul/reports/logs/perf_cutile.full.txt"
    assert stage_path(TEMPLATE, "matmul", "cutile_rs") == "out/matmul/reports/logs/perf_cutile_rs.full.txt"
    assert stage_path(TEMPLATE, "matmul", "liger_cutile") == "out/matmul/reports/logs/perf_liger_cutile.full.txt"


def test_whole_stages_go_to_workers_only_when_they_can_balance_them():
    baseline_all = [
        (k, b)
        for k, n in (("matmul", 4), ("rms_norm", 6), ("silu", 2), ("softmax", 3))
        for b in ("cutile_py", "triton", "torch")
        for _ in range(n)
    ]  # 45 cases, largest stage 6
    assert spread_by_stage(baseline_all, 2)
    assert not spread_by_stage(baseline_all, 8)  # 6 of a fair share of 5.6: spread the cases
    perf_all = [
        (k, "cutile_rs") for k, n in (("matmul", 4), ("rms_norm", 6), ("silu", 2), ("softmax", 3)) for _ in range(n)
    ]
    assert not spread_by_stage(perf_all, 2)  # rms_norm alone would keep one GPU busy
    assert not spread_by_stage([("a", "cutile_rs")] * 6, 2)
    assert not spread_by_stage([], 2) and not spread_by_stage(baseline_all, 1)


# ---------------------------------------------------------------------------------------------
# Stage logs of one session


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    folder = tmp_path_factory.mktemp("one")
    code, out = run_session(folder, ["alpha", "beta"])
    assert code == 1, out  # the failing triton cases
    return folder, out


@pytest.mark.parametrize("kernel", ["alpha", "beta"])
def test_each_stage_log_holds_its_own_cases_and_reads_like_a_pytest_run(one_process, kernel):
    folder, _ = one_process
    port = parse_log(stage_log(folder, kernel, "cutile_rs"), kernel, "cutile-rs")
    assert [r.config["n"] for r in port.records] == [1, 2, 3, 4] and port.rejected == []
    assert port.summary == "4 passed" and port.outcomes == []
    triton = parse_log(stage_log(folder, kernel, "triton"), kernel, "triton")
    assert [r.config["n"] for r in triton.records] == [1, 3, 4] and triton.rejected == []
    assert [(o.status, o.case, o.reason) for o in triton.outcomes] == [
        (
            "FAILED",
            f"tests/kernels/test_{kernel}.py::test_perf[triton-2]",
            "AssertionError: triton gives a wrong result",
        )
    ]
    assert triton.summary == "1 failed, 3 passed"
    torch = parse_log(stage_log(folder, kernel, "torch"), kernel, "torch")
    assert [r.config["n"] for r in torch.records] == [1, 2, 4]
    assert [(o.status, o.case, o.reason) for o in torch.outcomes] == [
        ("SKIPPED", f"tests/kernels/test_{kernel}.py:15", "torch: no such op here")
    ]


def test_the_failure_traceback_is_in_the_stage_log_and_the_session_output_is_unchanged(one_process):
    folder, out = one_process
    text = stage_log(folder, "alpha", "triton")
    assert text.startswith("tilekit stage log: kernel alpha, backend triton")
    assert "E       AssertionError: triton gives a wrong result" in text
    whole = parse_log(out)  # pytest's own output still holds every block and outcome
    assert len(whole.records) == 2 * 10 and whole.summary == "2 failed, 20 passed, 2 skipped"


def test_sanitize_report_and_validate_accept_stage_logs(one_process, tmp_path):
    folder, _ = one_process
    kdir = tmp_path / "alpha"
    for src, dst in (("cutile_rs", layout.PORT_RAW), ("triton", layout.baseline_raw("triton"))):
        (kdir / dst).parent.mkdir(parents=True, exist_ok=True)
        (kdir / dst).write_text(stage_log(folder, "alpha", src))
    done = run(
        [sys.executable, "-m", "tilekit", "report", "--kernel", "alpha", "--dir", str(kdir), "--only", "performance"],
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    text = (kdir / layout.PERFORMANCE_MD).read_text()
    assert "geomean_ratio=1.0000\n" in text and "over 3 matched configs" in text  # n=2 has no triton median
    assert "- triton: 3 valid blocks, 0 rejected, 1 failed, 0 errored, 0 skipped" in text
    port = (kdir / layout.PORT_CLEAN).read_text()
    assert validate.check_sanitized(port, (kdir / layout.PORT_RAW).read_text(), "alpha", "cutile-rs") == []


def test_a_file_that_fails_to_collect_is_named_in_each_of_its_stage_logs(tmp_path):
    (tmp_path / "tests" / "kernels").mkdir(parents=True)
    (tmp_path / "tests" / "kernels" / "test_gamma.py").write_text("import no_such_module\n")
    code, out = run_session(
        tmp_path,
        ["alpha"],
        backends="cutile_rs,triton",
        files=["tests/kernels/test_alpha.py", "tests/kernels/test_gamma.py"],
    )
    assert code == 2, out  # pytest's collection error
    for backend in ("cutile_rs", "triton"):
        parsed = parse_log(stage_log(tmp_path, "gamma", backend))
        assert [(o.status, o.case) for o in parsed.outcomes] == [("ERROR", "tests/kernels/test_gamma.py")]
        assert "ImportError while importing test module" in parsed.outcomes[0].reason
        assert "No module named 'no_such_module'" in stage_log(tmp_path, "gamma", backend)
        assert parsed.summary is None  # the session stopped: the log says the run did not finish


def test_a_session_that_dies_leaves_stage_logs_without_their_final_line(tmp_path):
    code, out = run_session(tmp_path, ["alpha"], CRASH_AT="triton-3")
    assert code == 3, out
    port = parse_log(stage_log(tmp_path, "alpha", "cutile_rs"), "alpha", "cutile-rs")
    assert len(port.records) == 4 and port.summary is None  # kept, but marked as not finished
    assert len(parse_log(stage_log(tmp_path, "alpha", "triton")).records) == 1
    assert parse_log(stage_log(tmp_path, "alpha", "torch")).records == []  # created at the start, never reached


def test_a_template_without_its_fields_is_a_usage_error(tmp_path):
    (tmp_path / "tests" / "kernels").mkdir(parents=True)
    (tmp_path / "tests" / "kernels" / "test_alpha.py").write_text(SUITE.replace("KERNEL", "alpha"))
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p tilekit.testing.pytest_plugin\n")
    done = run(pytest_argv("tests/kernels/test_alpha.py", "--stage-log", "out/perf.txt"), cwd=tmp_path, env=child_env())
    assert done.returncode == 4 and "--stage-log 'out/perf.txt' must contain {kernel} and {backend}" in done.stderr
    for bad in ("out/{kernel}/{gpu}/{backend}.txt", "out/{{kernel}}/{backend}.txt", "out/{kernel/{backend}.txt"):
        done = run(pytest_argv("tests/kernels/test_alpha.py", "--stage-log", bad), cwd=tmp_path, env=child_env())
        assert done.returncode == 4 and "must contain {kernel} and {backend} and no other" in done.stderr, bad


def test_xfails_and_a_run_cut_short_by_x_are_told_apart(tmp_path):
    (tmp_path / "tests" / "kernels").mkdir(parents=True)
    (tmp_path / "tests" / "kernels" / "test_alpha.py").write_text(
        "import pytest\n"
        "@pytest.mark.xfail(run=False, reason='not yet')\n"
        "def test_perf_a_torch():\n    pass\n"
        "@pytest.mark.xfail(reason='known')\n"
        "def test_perf_b_torch():\n    assert False\n"
        "def test_perf_c_torch():\n    assert False, 'wrong'\n"
        "def test_perf_d_torch():\n    pass\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p tilekit.testing.pytest_plugin\n")
    done = run(pytest_argv("tests/kernels/test_alpha.py", "-x", "--stage-log", TEMPLATE), cwd=tmp_path, env=child_env())
    assert done.returncode == 1, done.stdout
    text = stage_log(tmp_path, "alpha", "torch")
    assert "test_perf_a_torch XFAIL" in text and "test_perf_b_torch XFAIL" in text
    assert "test_perf_d_torch" not in text  # -x stopped before it
    parsed = parse_log(text)
    assert (
        parsed.summary is None and "the pytest session stopped before it finished (stopping after 1 failures)" in text
    )


# ---------------------------------------------------------------------------------------------
# Under xdist (tilekit.testing.gpu_workers.StageScheduling; its every interleaving: test_stage_scheduling.py):
# whole stages per worker, or single cases when whole stages cannot balance the workers. Each
# worker gets work when the session starts, so "both workers are used" holds by construction.


def workers_by_stage(folder: Path, kernels, backends) -> dict:
    seen = {}
    for kernel in kernels:
        for backend in backends:
            for r in parse_log(stage_log(folder, kernel, backend)).records:
                seen.setdefault((kernel, backend), set()).add((r.fields["worker"], r.fields["seen_device"]))
    return seen


def test_under_xdist_each_stage_runs_on_one_pinned_worker_and_both_workers_are_used(tmp_path):
    kernels = ["alpha", "beta", "gamma", "delta"]  # 12 stages of 4 cases: whole stages balance 2 workers
    code, out = run_on_two_workers(tmp_path, kernels)
    assert code == 1, out
    assert "tilekit gpu_workers: 48 cases in 12 stages over 2 workers: handed out by stage" in out
    seen = workers_by_stage(tmp_path, kernels, ["cutile_rs", "triton", "torch"])
    assert len(seen) == 12 and all(len(workers) == 1 for workers in seen.values())
    assert set().union(*seen.values()) == {("gw0", "7"), ("gw1", "9")}
    triton = parse_log(stage_log(tmp_path, "beta", "triton"), "beta", "triton")
    assert [o.case for o in triton.outcomes] == ["tests/kernels/test_beta.py::test_perf[triton-2]"]
    assert triton.summary == "1 failed, 3 passed"


def test_under_xdist_a_single_stage_is_spread_case_by_case(tmp_path):
    code, out = run_on_two_workers(tmp_path, ["alpha"], backends="cutile_rs", SUITE_BACKENDS="cutile_rs")
    assert code == 0, out
    assert "tilekit gpu_workers: 4 cases in 1 stage over 2 workers: handed out one case at a time" in out
    seen = workers_by_stage(tmp_path, ["alpha"], ["cutile_rs"])
    assert seen == {("alpha", "cutile_rs"): {("gw0", "7"), ("gw1", "9")}}


@pytest.mark.parametrize(
    "kernels,how",
    [(["alpha"], "one case at a time"), (["alpha", "beta", "gamma", "delta"], "by stage")],
    ids=["by_case", "by_stage"],
)
def test_a_crashed_worker_is_named_in_its_stage_log_and_the_rest_still_runs(tmp_path, kernels, how):
    # triton-3 kills whichever worker runs it, each time it runs: reported once means run once.
    # Which worker runs what, and in which order the reports come, is up to the scheduler.
    code, out = run_on_two_workers(tmp_path, kernels, CRASH_AT="triton-3")
    assert code == 1, out
    assert f"over 2 workers: handed out {how}" in out
    assert out.count("crashed while running") == len(kernels)
    for kernel in kernels:
        case = f"tests/kernels/test_{kernel}.py::test_perf[triton-%d]"
        assert out.count(f"crashed while running '{case % 3}'") == 1
        text = stage_log(tmp_path, kernel, "triton")
        triton = parse_log(text, kernel, "triton")
        assert sorted((o.status, o.case) for o in triton.outcomes) == [("FAILED", case % 2), ("FAILED", case % 3)]
        assert text.count(f"{case % 3} FAILED [gw") == 1 and f"crashed while running '{case % 3}'" in text
        assert sorted(r.config["n"] for r in triton.records) == [1, 4] and triton.summary == "2 failed, 2 passed"
        torch = parse_log(stage_log(tmp_path, kernel, "torch"), kernel, "torch")
        assert sorted(r.config["n"] for r in torch.records) == [1, 2, 4] and torch.summary == "3 passed, 1 skipped"
        port = parse_log(stage_log(tmp_path, kernel, "cutile_rs"), kernel, "cutile-rs")
        assert sorted(r.config["n"] for r in port.records) == [1, 2, 3, 4] and port.summary == "4 passed"
