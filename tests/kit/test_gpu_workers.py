"""GPUS=N on the CPU: which GPUs a stage uses, one pinned pytest-xdist worker per GPU (real child
pytest runs with faked GPU lists), the record blocks under xdist, scripts/pytest_stage.sh's command
line, gpu_index in records, and compare refusing to compare across GPU models."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tilekit.reports import layout, report, validate
from tilekit.runtime import bench
from tilekit.testing import gpu_workers
from tilekit.reports.compare import compare
from tilekit.testing.gpu_workers import GpuSelectionError, stage_gpus, visible_gpus, worker_gpus
from tilekit.reports.records import BEGIN, END, format_block, parse_log

from child_env import TEST_TIMEOUT, child_env, run  # tests/kit/child_env.py
from perf_records import parsed_records as recs  # tests/kit/perf_records.py

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(TEST_TIMEOUT)  # each child has a shorter deadline (child_env.run)


def no_smi(*_args, **_kwargs):
    raise AssertionError("nvidia-smi must not be asked here")


def fake_smi(stdout: str, returncode: int = 0):
    def run(argv, **_kwargs):
        assert argv == ["nvidia-smi", "-L"]
        return subprocess.CompletedProcess(argv, returncode, stdout, "")

    return run


SMI_TWO_GPUS = (
    "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\n"
    "  MIG 1g.18gb      Device  0: (UUID: MIG-bbbb)\n"
    "GPU 1: NVIDIA H200 (UUID: GPU-cccc)\n"
)


# ---------------------------------------------------------------------------------------------
# Which GPUs


def test_cuda_visible_devices_entries_are_the_visible_gpus():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "7, 9"}, no_smi) == (["7", "9"], "CUDA_VISIBLE_DEVICES=7, 9")


def test_empty_cuda_visible_devices_hides_every_gpu():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, no_smi) == ([], "CUDA_VISIBLE_DEVICES=")


def test_nvidia_smi_gpu_lines_are_the_visible_gpus_without_cuda_visible_devices():
    assert visible_gpus({}, fake_smi(SMI_TWO_GPUS)) == (["0", "1"], "nvidia-smi -L lists 0,1")


@pytest.mark.parametrize(
    "run", [fake_smi("", returncode=9), fake_smi("No devices found.\n")], ids=["nvidia-smi-fails", "no-device"]
)
def test_no_gpu_when_nvidia_smi_finds_none(run):
    assert visible_gpus({}, run) == ([], "nvidia-smi -L lists no GPU")


def test_missing_nvidia_smi_means_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no nvidia-smi
    assert gpu_workers.nvidia_smi_indices() == []


def test_default_is_every_visible_gpu():
    assert stage_gpus({"CUDA_VISIBLE_DEVICES": "4,5,6"}, no_smi, lambda: True) == (["4", "5", "6"], "")


def test_gpus_n_takes_the_first_n():
    assert stage_gpus({"GPUS": "2", "CUDA_VISIBLE_DEVICES": "4,5,6"}, no_smi, lambda: True) == (["4", "5"], "")


def test_gpus_1_is_the_single_process_path_without_asking_nvidia_smi():
    assert stage_gpus({"GPUS": "1"}, no_smi, lambda: False) == ([], "")


def test_gpus_larger_than_visible_is_an_error_naming_the_variable_and_the_fix():
    with pytest.raises(GpuSelectionError) as err:
        stage_gpus({"GPUS": "3", "CUDA_VISIBLE_DEVICES": "7,9"}, no_smi, lambda: True)
    assert str(err.value) == (
        "GPUS=3 but only 2 GPU(s) are visible (CUDA_VISIBLE_DEVICES=7,9): set GPUS=2 or "
        "fewer, or leave GPUS empty for every visible GPU"
    )


def test_gpus_on_a_host_without_gpu_is_an_error():
    with pytest.raises(
        GpuSelectionError,
        match=r"^GPUS=2 but only 0 GPU\(s\) are visible \(nvidia-smi -L lists "
        r"no GPU\): set GPUS=1 or leave it empty",
    ):
        stage_gpus({"GPUS": "2"}, fake_smi(""), lambda: True)


@pytest.mark.parametrize("value", ["two", "0", "-1", "1.5"])
def test_gpus_must_be_a_whole_number(value):
    with pytest.raises(GpuSelectionError, match=rf"^GPUS={value!r}: must be a whole number >= 1, or empty"):
        stage_gpus({"GPUS": value, "CUDA_VISIBLE_DEVICES": "0,1"}, no_smi, lambda: True)


def test_a_gpu_listed_twice_is_refused():
    with pytest.raises(GpuSelectionError, match=r"^CUDA_VISIBLE_DEVICES=0,1,0 names GPU 0 more than once"):
        stage_gpus({"CUDA_VISIBLE_DEVICES": "0,1,0"}, no_smi, lambda: True)


def test_without_xdist_gpus_n_is_an_error_and_the_default_falls_back_to_one_gpu():
    with pytest.raises(
        GpuSelectionError,
        match=r"^GPUS=2 needs pytest-xdist, which is not installed: pip install "
        r"pytest-xdist==3.8.0 \(make setup installs it\), or set GPUS=1$",
    ):
        stage_gpus({"GPUS": "2", "CUDA_VISIBLE_DEVICES": "0,1"}, no_smi, lambda: False)
    gpus, note = stage_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}, no_smi, lambda: False)
    assert gpus == ["0"]
    assert note.startswith("2 GPUs are visible but pytest-xdist is not installed, so this stage runs on one")


def test_worker_gpus_take_the_stage_list_first():
    env = {"TILEKIT_GPU_LIST": "7,9", "CUDA_VISIBLE_DEVICES": "0,1,2"}
    assert worker_gpus(env, 2, no_smi) == ["7", "9"]
    assert worker_gpus({"CUDA_VISIBLE_DEVICES": "0,1,2"}, 2, no_smi) == ["0", "1"]


def test_more_workers_than_gpus_is_refused():
    with pytest.raises(GpuSelectionError) as err:
        worker_gpus({"TILEKIT_GPU_LIST": "7,9"}, 3, no_smi)
    assert str(err.value) == (
        "pytest -n 3 starts 3 workers but only 2 GPU(s) are available (TILEKIT_GPU_LIST=7,9); "
        "timed cases must not share a GPU: use -n 2 (make GPUS=2) or fewer"
    )


def test_workers_stay_unpinned_without_any_gpu():
    assert worker_gpus({}, 4, fake_smi("")) == []


def test_cli_reads_a_faked_nvidia_smi_on_path(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{SMI_TWO_GPUS}'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    env = child_env(PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    done = run([sys.executable, "-m", "tilekit.testing.gpu_workers"], env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "0,1\n", "")
    env["GPUS"] = "3"
    done = run([sys.executable, "-m", "tilekit.testing.gpu_workers"], env=env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "tilekit gpu_workers: GPUS=3 but only 2 GPU(s) are visible (nvidia-smi -L lists 0,1): "
        "set GPUS=2 or fewer, or leave GPUS empty for every visible GPU\n"
    )


# ---------------------------------------------------------------------------------------------
# Real pytest-xdist runs on a generated test file, with a faked GPU list

TIMED_TESTS = """
import os
import time

import numpy as np
import pytest

BACKEND = os.environ.get("FAKE_BACKEND", "cutile-rs")


def record(n):
    return {"test": f"test_timed.py::test_perf[{n}]", "kernel": "k", "backend": BACKEND,
            "config": {"n": n, "dtype": np.dtype("float16")},  # execnet cannot send a dtype object as is
            "timer": "cupti", "median_ms": 0.5, "mean_ms": 0.5, "std_ms": 0.01, "min_ms": 0.4, "max_ms": 0.6,
            "nrep": 50, "seen_device": os.environ.get("CUDA_VISIBLE_DEVICES", "unset"),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "none")}


@pytest.mark.parametrize("n", range(8))
def test_perf(request, n):
    time.sleep(0.05)
    print("chatter from the test body")
    request.node.user_properties.append(("tilekit_perf_record", record(n)))


def test_fails():
    assert False, "wrong result"
"""

PYTEST_INI = "[pytest]\naddopts = -p tilekit.testing.pytest_plugin -p tilekit.testing.gpu_workers\n"


def run_child(folder: Path, test_text: str, *args, **env) -> tuple[int, str]:
    """pytest in ``folder`` on ``test_text``; only the plugins it names (hypothesis' alone takes
    seconds per process), xdist with `-p xdist` as scripts/pytest_stage.sh loads it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_timed.py").write_text(test_text)
    (folder / "pytest.ini").write_text(PYTEST_INI)
    done = run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "xdist", *args],
        cwd=folder,
        env=child_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", **env),
    )
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def xdist_logs(tmp_path_factory):
    """Raw logs of the port and of one baseline, each run with -n 2 on the faked GPUs 7 and 9."""
    folder = tmp_path_factory.mktemp("xdist")
    logs = {}
    for backend in ("cutile-rs", "triton"):
        code, out = run_child(
            folder / backend,
            TIMED_TESTS,
            "-n",
            "2",
            "--print-record",
            "-v",
            "-rs",
            TILEKIT_GPU_LIST="7,9",
            FAKE_BACKEND=backend,
        )
        assert code == 1, out  # test_fails
        logs[backend] = out
    return logs


def test_each_worker_is_pinned_to_its_own_gpu_and_both_are_used(xdist_logs):
    # both are used by construction: xdist's load scheduling sends every worker cases at the start
    records = parse_log(xdist_logs["cutile-rs"]).records
    devices: dict[str, set] = {}
    for r in records:
        devices.setdefault(r.fields["worker"], set()).add(r.fields["seen_device"])
    assert sorted(devices) == ["gw0", "gw1"]
    assert all(len(seen) == 1 for seen in devices.values())  # one worker, one GPU, for every case
    assert sorted(d for seen in devices.values() for d in seen) == ["7", "9"]  # distinct, and both used
    assert "tilekit gpu_workers: one worker per GPU, CUDA_VISIBLE_DEVICES gw0=7, gw1=9" in xdist_logs["cutile-rs"]


def test_every_block_is_printed_once_and_whole_by_the_controller(xdist_logs):
    out = xdist_logs["cutile-rs"]
    parsed = parse_log(out)
    assert out.count(BEGIN) == out.count(END) == 8
    assert parsed.rejected == []
    assert sorted(r.config_key for r in parsed.records) == sorted(
        f'{{"dtype": "float16", "n": {n}}}' for n in range(8)
    )  # each once; the dtype crossed as its name
    assert [(o.status, o.case) for o in parsed.outcomes] == [("FAILED", "test_timed.py::test_fails")]


def test_sanitize_report_and_validate_accept_xdist_logs(xdist_logs, tmp_path):
    kdir = tmp_path / "k"
    raw = {"cutile-rs": kdir / layout.PORT_RAW, "triton": kdir / layout.baseline_raw("triton")}
    for backend, path in raw.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(xdist_logs[backend])
    tk = [sys.executable, "-m", "tilekit"]
    done = run(
        tk
        + [
            "sanitize",
            str(raw["cutile-rs"]),
            "--out",
            str(tmp_path / "clean.txt"),
            "--investigation",
            str(tmp_path / "inv.log"),
        ],
        env=child_env(),
    )
    assert done.returncode == 0 and " 8 valid, 0 rejected " in done.stdout, done.stdout + done.stderr
    assert "failed cases: 1\n  line " in (tmp_path / "inv.log").read_text()
    done = run(tk + ["report", "--kernel", "k", "--dir", str(kdir), "--only", "performance"], env=child_env())
    assert done.returncode == 0, done.stderr
    text = (kdir / layout.PERFORMANCE_MD).read_text()
    assert text.startswith("VERDICT: DONE\n") and "geomean_ratio=1.0000\n" in text
    port, triton = (kdir / layout.PORT_CLEAN).read_text(), (kdir / layout.baseline_clean("triton")).read_text()
    assert validate.check_sanitized(port, raw["cutile-rs"].read_text(), "k", "cutile-rs") == []
    assert validate.check_performance_numbers(text, "k", port, {"triton": triton}) == []


CRASHING_TESTS = TIMED_TESTS.replace(
    """    time.sleep(0.05)
""",
    """    time.sleep(0.05)
    if n == 1:
        os._exit(3)  # a crashing kernel takes its worker down, every time it runs
""",
)


def test_a_worker_restarted_after_a_crash_keeps_its_gpu(tmp_path):
    # -n 1: one worker runs the cases in collection order, so n=0 runs on gw0 before n=1 kills it
    code, out = run_child(
        tmp_path / "run", CRASHING_TESTS, "-n", "1", "--print-record", "-v", "-rs", TILEKIT_GPU_LIST="7,9"
    )
    assert code == 1, out
    records = parse_log(out).records
    assert sorted(r.config["n"] for r in records) == [0, 2, 3, 4, 5, 6, 7]  # n=1 died with gw0, not run again
    assert out.count("crashed while running 'test_timed.py::test_perf[1]'") == 1
    assert {r.fields["worker"] for r in records} == {"gw0", "gw1"}  # gw1 replaced the crashed gw0 ...
    assert {r.fields["seen_device"] for r in records} == {"7"}  # ... on the same GPU, not on 9


def test_without_n_nothing_is_pinned(tmp_path):
    code, out = run_child(tmp_path / "run", TIMED_TESTS, "--print-record", "-q", TILEKIT_GPU_LIST="7,9")
    assert code == 1, out
    records = parse_log(out).records
    assert len(records) == 8 and {r.fields["seen_device"] for r in records} == {"unset"}
    assert "tilekit gpu_workers" not in out


def test_more_workers_than_gpus_stops_pytest_with_the_reason(tmp_path):
    code, out = run_child(tmp_path / "run", TIMED_TESTS, "-n", "3", TILEKIT_GPU_LIST="7,9")
    assert code == 4  # pytest's usage error
    assert "ERROR: pytest -n 3 starts 3 workers but only 2 GPU(s) are available (TILEKIT_GPU_LIST=7,9)" in out


# ---------------------------------------------------------------------------------------------
# scripts/pytest_stage.sh: the command line it runs

FAKE_PYTHON = """#!/usr/bin/env bash
# stands in for python: records how pytest would be started; anything else runs the real python
if [ "$1 $2" = "-m pytest" ]; then
    printf '%s\\n' "${@:3}" > "$CALLS/pytest.argv"
    env > "$CALLS/pytest.env"
    echo "1 passed in 0.01s"
    exit 0
fi
echo "$*" >> "$CALLS/python.calls"
exec "$REAL_PYTHON" "$@"
"""
STAGE_ARGS = ["tests/kernels/test_k.py", "-k", "cutile_rs and test_perf", "--print-record", "-v", "-rs"]


def run_stage(tmp_path: Path, extra=(), **env) -> tuple[subprocess.CompletedProcess, Path]:
    calls = tmp_path / "calls"
    calls.mkdir(exist_ok=True)
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "logs" / "perf.full.txt"
    done = run(
        ["bash", str(ROOT / "scripts" / "pytest_stage.sh"), str(log), "--", *STAGE_ARGS, *extra],
        env=child_env(TILEKIT_PYTHON=str(fake), REAL_PYTHON=sys.executable, CALLS=str(calls), **env),
    )
    return done, calls


def pytest_call(calls: Path) -> tuple[list[str], dict]:
    argv = (calls / "pytest.argv").read_text().splitlines()
    env = dict(line.split("=", 1) for line in (calls / "pytest.env").read_text().splitlines() if "=" in line)
    return argv, env


def test_stage_with_gpus_1_runs_exactly_the_single_process_command(tmp_path):
    done, calls = run_stage(tmp_path, GPUS="1", CUDA_VISIBLE_DEVICES="7,9")
    assert done.returncode == 0, done.stderr
    argv, env = pytest_call(calls)
    assert argv == STAGE_ARGS
    assert "TILEKIT_GPU_LIST" not in env and env["CUDA_VISIBLE_DEVICES"] == "7,9" and env["PYTHONUNBUFFERED"] == "1"
    assert not (calls / "python.calls").exists()  # GPUS=1 does not even resolve the GPU list
    assert done.stderr.splitlines()[0] == "$ python -m pytest " + " ".join(STAGE_ARGS)


def test_stage_on_a_one_gpu_host_runs_the_single_process_command(tmp_path):
    done, calls = run_stage(tmp_path, CUDA_VISIBLE_DEVICES="3")
    assert done.returncode == 0, done.stderr
    argv, env = pytest_call(calls)
    assert argv == STAGE_ARGS and "TILEKIT_GPU_LIST" not in env
    assert (calls / "python.calls").read_text() == "-m tilekit.testing.gpu_workers\n"
    assert done.stderr.splitlines()[0] == "$ python -m pytest " + " ".join(STAGE_ARGS)


def test_stage_with_two_gpus_runs_one_xdist_worker_per_gpu(tmp_path):
    done, calls = run_stage(tmp_path, CUDA_VISIBLE_DEVICES="3,5")
    assert done.returncode == 0, done.stderr
    argv, env = pytest_call(calls)
    assert argv == ["-p", "xdist", "-n", "2", "--dist", "load"] + STAGE_ARGS  # make test: case by case
    assert env["TILEKIT_GPU_LIST"] == "3,5"
    assert "GPUS: one pytest-xdist worker per GPU, pinned to CUDA_VISIBLE_DEVICES 3,5" in done.stderr


def test_a_stage_log_session_on_two_gpus_runs_dist_load_too(tmp_path):
    # --dist load, which tilekit.testing.gpu_workers schedules by stage in a --stage-log session
    done, calls = run_stage(tmp_path, CUDA_VISIBLE_DEVICES="3,5", extra=["--stage-log", "o/{kernel}/{backend}.txt"])
    assert done.returncode == 0, done.stderr
    argv, _ = pytest_call(calls)
    assert argv == ["-p", "xdist", "-n", "2", "--dist", "load"] + STAGE_ARGS + [
        "--stage-log",
        "o/{kernel}/{backend}.txt",
    ]


def test_stage_with_too_many_gpus_stops_before_pytest_and_logs_why(tmp_path):
    done, calls = run_stage(tmp_path, GPUS="3", CUDA_VISIBLE_DEVICES="3,5")
    assert done.returncode == 2
    assert not (calls / "pytest.argv").exists()
    why = "tilekit gpu_workers: GPUS=3 but only 2 GPU(s) are visible (CUDA_VISIBLE_DEVICES=3,5)"
    assert why in done.stderr and why in (tmp_path / "logs" / "perf.full.txt").read_text()


# ---------------------------------------------------------------------------------------------
# gpu_index in records


@pytest.mark.parametrize(
    "visible,device,expected", [("7,9", 0, 7), ("7,9", 1, 9), (None, 2, 2), ("GPU-8932f937", 0, "GPU-8932f937")]
)
def test_gpu_index_is_the_physical_gpu(visible, device, expected):
    assert bench.physical_gpu(visible, device) == expected


def test_record_carries_gpu_index_and_gpu_name():
    rec = bench.perf_record(
        kernel="k",
        backend="cutile-rs",
        config={"n": 1},
        test="t::x",
        gpu_index=9,
        timing=bench.Timing(samples_ms=[0.5]),
        env={"gpu": "NVIDIA H200"},
    )
    block = format_block(rec)
    assert "\ngpu_index: 9\n" in block and '\nenv: {"gpu": "NVIDIA H200"}\n' in block
    assert parse_log(block).records[0].fields["gpu_index"] == "9"


# ---------------------------------------------------------------------------------------------
# compare: no ratio across GPU models

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


def test_a_config_timed_on_another_gpu_model_is_missing_with_both_models_named():
    port = recs("cutile-rs", {1: 1.0, 2: 1.0}, {1: H200, 2: H200})
    baselines = {
        "triton": recs("triton", {1: 1.0, 2: 0.5}, {1: H200, 2: H100}),
        "torch": recs("torch", {1: 2.0, 2: 2.0}, {1: H200, 2: H200}),
    }
    c = compare("k", port, baselines)
    assert c.reference == "triton"
    assert [(r.status, r.ratio) for r in c.rows] == [("matched", 1.0), ("gpu_mismatch", None)]
    mismatch = c.rows[1]
    assert (mismatch.ratio_to("triton"), mismatch.ratio_to("torch"), mismatch.best_backend) == (None, 0.5, "torch")
    assert (c.verdict, c.severity, c.geomean) == ("INVESTIGATE", "MISSING_DATA", 1.0)
    assert c.notes == [
        f"1 config(s) of triton were timed on {H100}, the cutile-rs records on {H200}: those ratios "
        "are left out (GPU_MISMATCH); time port and baselines on one GPU model"
    ]
    assert [(s.backend, s.ratio_geomean) for s in c.baselines] == [("torch", 0.5), ("triton", 1.0)]
    assert mismatch.mismatch_note("triton") == (
        f"triton was timed on {H100}, cutile-rs on {H200}; not compared (time both on one GPU model)"
    )


def test_a_mismatched_non_reference_baseline_only_loses_its_own_ratio():
    port = recs("cutile-rs", {1: 1.0}, {1: H200})
    c = compare("k", port, {"triton": recs("triton", {1: 1.0}, {1: H200}), "torch": recs("torch", {1: 2.0}, {1: H100})})
    assert (c.rows[0].status, c.rows[0].ratio, c.rows[0].ratio_to("torch")) == ("matched", 1.0, None)
    assert (c.verdict, c.severity) == ("DONE", "DONE")
    assert len(c.notes) == 1 and c.notes[0].startswith(f"1 config(s) of torch were timed on {H100}")


def test_records_without_env_compare_as_before():
    port = recs("cutile-rs", {1: 1.0}, None)
    c = compare("k", port, {"triton": recs("triton", {1: 2.0}, {1: H100})})
    assert (c.rows[0].status, c.rows[0].ratio, c.notes) == ("matched", 0.5, [])


def test_report_and_validate_agree_on_a_gpu_mismatch(tmp_path):
    port = recs("cutile-rs", {1: 1.0, 2: 1.0}, {1: H200, 2: H200})
    triton = recs("triton", {1: 1.0, 2: 1.0}, {1: H200, 2: H100})
    inputs = report.PerfInputs(
        "k",
        parse_log("".join(r.text + "\n" for r in port)),
        {"triton": parse_log("".join(r.text + "\n" for r in triton))},
    )
    text = report.render_performance(report.compare_inputs(inputs), inputs)
    assert text.startswith("VERDICT: INVESTIGATE\n") and "Severity: MISSING_DATA\n" in text
    assert "| GPU_MISMATCH |" in text
    assert (
        f'- {{"dtype": "float16", "n": 2}}: triton was timed on {H100}, cutile-rs on {H200}; not compared '
        f"(time both on one GPU model); see {layout.INVESTIGATION}"
    ) in text
    clean = {b: "".join(r.text + "\n" for r in rs) for b, rs in (("cutile-rs", port), ("triton", triton))}
    assert validate.check_performance_numbers(text, "k", clean["cutile-rs"], {"triton": clean["triton"]}) == []


def test_plain_record_turns_str_subclasses_into_str_so_execnet_can_send_it():
    """A two-GPU H200 run died with execnet's DumpError on torch's TorchVersion (a str subclass)
    inside the record's env; plain_record must hand xdist only plain types."""
    import execnet.gateway_base as gb

    from tilekit.reports.records import plain_record

    class Version(str):
        pass

    class Count(int):
        pass

    rec = {"kernel": "k", "nrep": Count(3), "env": {"torch": Version("2.11.0+cu130")}, "kernels": ("a", "b")}
    plain = plain_record(rec)
    assert type(plain["env"]["torch"]) is str and type(plain["nrep"]) is int
    assert gb.loads_internal(gb.dumps_internal(plain)) == {
        "kernel": "k",
        "nrep": 3,
        "env": {"torch": "2.11.0+cu130"},
        "kernels": ["a", "b"],
    }
