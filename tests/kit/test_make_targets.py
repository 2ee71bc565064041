"""The Makefile's timed stages as real file targets (make's own dependency model): what `make -n`
says will run, what a real `make KERNEL=rms_norm perf` does on a machine without a GPU (every stage
tried, VERDICT: BLOCKED, exit 0) and that a second call re-times nothing; and
scripts/timed_stage.sh, which times only the raw logs that are missing or stale.

Every child process has a deadline well under pytest-timeout's. The real make runs need the built
library (make check builds it first) and cost two short pytest sessions each (~10 s)."""

import importlib
import importlib.util
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from child_env import TEST_TIMEOUT, child_env, run  # tests/kit/child_env.py
from tilekit.testing.harness import RECORD_NAME
from tilekit.reports.records import BASELINE_BACKENDS
from tilekit.testing.stage_logs import stage_path

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)  # each child has a shorter deadline (child_env.run)

ROOT = Path(__file__).resolve().parents[2]
KERNELS = sorted(p.name for p in (ROOT / "kernels").iterdir() if (p / "kernel.rs").is_file())
LIB = ROOT / "build" / "libcutile_kernels.so"
KNOWN = " ".join(BASELINE_BACKENDS)  # the Makefile's KNOWN_BASELINES: ours, then the providers


def make(*args, dry=False, timeout=240) -> subprocess.CompletedProcess:
    """make in the repository, killed with every process it started after `timeout` seconds (a
    real perf run is two short pytest sessions; a dry run, a second)."""
    # BASELINES too: unset is a case of its own (each kernel's declared baselines)
    env = {k: v for k, v in child_env().items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "BASELINES")}
    argv = ["make", "--no-print-directory", *(["-n", "V=1"] if dry else []), *args]
    return run(argv, timeout=timeout, cwd=ROOT, env=env)


def timed_stages(dry_run_output: str) -> list[str]:
    """The stage names of the scripts/timed_stage.sh commands a dry run prints."""
    return re.findall(r"scripts/timed_stage\.sh (\w+) ", dry_run_output)


def stage_specs(dry_run_output: str, stage: str) -> list[list[str]]:
    """[kernel, backend id, raw log, deps...] of each SPEC of one stage's command."""
    line = next(ln for ln in dry_run_output.splitlines() if f"scripts/timed_stage.sh {stage} " in ln)
    return [spec.split(",") for spec in line.split(" -- ", 1)[1].split()]


# ---------------------------------------------------------------------------------------------
# make -n: the commands, without running them


def test_make_perf_on_an_empty_out_root_times_the_baselines_and_the_port(tmp_path):
    done = make("KERNEL=softmax", f"OUT_ROOT={tmp_path / 'o'}", "perf", dry=True)
    assert done.returncode == 0, done.stderr
    assert sorted(timed_stages(done.stdout)) == ["baseline", "perf"]
    baseline = stage_specs(done.stdout, "baseline")
    # BASELINES unset: every baseline softmax's baselines.py declares, the providers too
    assert [(k, b, Path(log).name) for k, b, log, *_ in baseline] == [
        ("softmax", "cutile_py", "baseline_perf_cutile.full.txt"),
        ("softmax", "triton", "baseline_perf_triton.full.txt"),
        ("softmax", "torch", "baseline_perf_torch.full.txt"),
        ("softmax", "tilegym", "baseline_perf_tilegym.full.txt"),
        ("softmax", "liger", "baseline_perf_liger.full.txt"),
        ("softmax", "liger_cutile", "baseline_perf_liger_cutile.full.txt"),
    ]
    [[kernel, backend, log, *deps]] = stage_specs(done.stdout, "perf")
    assert (kernel, backend, Path(log).name) == ("softmax", "cutile_rs", "perf_cutile_rs.full.txt")
    # what each raw log is made from: the port needs the library and the Rust files, a baseline not
    assert {
        "kernels/softmax/kernel.rs",
        "kernels/softmax/spec.py",
        "tests/kernels/test_softmax.py",
        "tools/tilekit/runtime/bench.py",
    } <= set(deps)
    assert any(d.endswith("libcutile_kernels.so") for d in deps)
    assert deps[-1].endswith(".timing-env.txt")
    for _, _, _, *bdeps in baseline:
        assert "kernels/softmax/baselines.py" in bdeps and "tools/tilekit/runtime/bench.py" in bdeps
        assert not any(d.endswith(".rs") or d.endswith(".so") for d in bdeps)
    assert "kernels/softmax/NOTES.md" not in deps  # notes do not re-time anything


def test_make_all_kernels_perf_is_one_stage_command_over_every_suite(tmp_path):
    o = tmp_path / "o"
    done = make("KERNEL=all", f"OUT_ROOT={o}", "perf", dry=True)
    assert done.returncode == 0, done.stderr
    assert sorted(timed_stages(done.stdout)) == ["baseline", "perf"]
    assert [spec[0] for spec in stage_specs(done.stdout, "perf")] == KERNELS
    assert (
        f"scripts/timed_stage.sh perf {o}/logs/perf.session.txt '{o}/{{kernel}}/reports/logs/perf_{{backend}}.full.txt'"
        in done.stdout
    )
    # a dry run writes nothing but the environment fingerprint it needs to tell what is stale
    assert sorted(str(p.relative_to(o)) for p in o.rglob("*")) == [".timing-env.txt"]


def test_unset_baselines_are_each_kernels_declared_ones_and_set_ones_apply_to_every_kernel(tmp_path):
    o = tmp_path / "o"
    done = make("KERNEL=all", f"OUT_ROOT={o}", "baseline", dry=True)
    assert done.returncode == 0, done.stderr
    timed: dict[str, list[str]] = {}
    for kernel, backend, *_ in stage_specs(done.stdout, "baseline"):
        timed.setdefault(kernel, []).append(backend)
    assert timed["matmul"] == timed["bmm"] == ["cutile_py", "triton", "torch", "tilegym"]  # no Liger op
    assert timed["attention"] == ["cutile_py", "triton", "torch", "torch_flash", "tilegym"]
    assert timed["rms_norm"] == ["cutile_py", "triton", "torch", "tilegym", "liger", "liger_cutile"]
    assert sorted(timed) == KERNELS
    # validate checks the logs of the same list
    done = make("KERNEL=matmul", f"OUT_ROOT={o}", "validate", dry=True)
    assert '--baselines "cutile triton torch tilegym"' in done.stdout, done.stdout
    # set: as given (in its order), for every kernel
    done = make("KERNEL=all", f"OUT_ROOT={o}", "BASELINES=torch triton", "baseline", dry=True)
    assert {tuple(b for k2, b, *_ in stage_specs(done.stdout, "baseline") if k2 == k) for k in KERNELS} == {
        ("torch", "triton")
    }


def test_declared_baselines_reads_what_each_baselines_py_declares(tmp_path):
    spec = importlib.util.spec_from_file_location("declared_baselines", ROOT / "scripts" / "declared_baselines.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for kernel in KERNELS:
        backends = importlib.import_module(f"kernels.{kernel}.baselines").BACKENDS
        assert script.declared(ROOT / "kernels" / kernel / "baselines.py") == list(backends), kernel
    bare = tmp_path / "baselines.py"
    bare.write_text("BACKENDS = dict(torch=None)\n")
    with pytest.raises(ValueError, match=r"baselines.py: no module-level `BACKENDS = \{...\}` dict literal"):
        script.declared(bare)


def test_every_known_baseline_maps_to_its_test_id_and_back_to_its_raw_log(tmp_path):
    o = tmp_path / "o"
    done = make("KERNEL=softmax", f"OUT_ROOT={o}", f"BASELINES={KNOWN}", "baseline", dry=True)
    assert done.returncode == 0, done.stderr
    specs = stage_specs(done.stdout, "baseline")
    assert [b for _, b, *_ in specs] == [
        "cutile_py",
        "triton",
        "torch",
        "torch_flash",
        "torch_compile",
        "tilegym",
        "liger",
        "liger_cutile",
    ]
    template = f"{o}/{{kernel}}/reports/logs/baseline_perf_{{backend}}.full.txt"
    for (kernel, backend_id, log, *_), name in zip(specs, BASELINE_BACKENDS):
        assert RECORD_NAME[backend_id] == name and log == stage_path(template, kernel, backend_id) == str(
            o / "softmax" / "reports" / "logs" / f"baseline_perf_{name}.full.txt"
        )


def test_a_stage_selects_the_cases_of_its_backends_and_no_other():
    """timed_stage.sh's -k names whole ids: liger's selection leaves liger_cutile's cases out."""
    argv = ["-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "tests/kernels/test_softmax.py"]
    done = run([sys.executable, *argv, "-k", "test_perf and ([liger- or [torch-)"], cwd=ROOT, env=child_env())
    ids = [ln.split("::")[-1] for ln in done.stdout.splitlines() if "::" in ln]
    assert ids and {i.split("[")[1].split("-")[0] for i in ids} == {"liger", "torch"}, done.stdout[-2000:]


def test_baselines_selects_the_raw_logs_and_force_retimes(tmp_path):
    done = make("KERNEL=rms_norm", f"OUT_ROOT={tmp_path}", "BASELINES=triton", "FORCE=1", "baseline", dry=True)
    assert done.returncode == 0, done.stderr
    assert [spec[1] for spec in stage_specs(done.stdout, "baseline")] == ["triton"]
    assert " --force -- " in done.stdout


@pytest.mark.parametrize(
    "variables,message",
    [
        (["BASELINES="], f"BASELINES is empty: name at least one of {KNOWN}"),
        (["BASELINES=triton tritn"], f"BASELINES: unknown backend 'tritn' (known: {KNOWN})"),
        (["BASELINES=liger_triton"], f"BASELINES: unknown backend 'liger_triton' (known: {KNOWN})"),
        (["KERNEL=rmsnorm"], "KERNEL=rmsnorm: there is no kernels/rmsnorm/kernel.rs; use one of: " + " ".join(KERNELS)),
    ],
)
def test_bad_variables_are_refused_before_anything_runs(tmp_path, variables, message):
    done = make(*(["KERNEL=softmax"] + variables), f"OUT_ROOT={tmp_path / 'o'}", "baseline")
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "o").exists()


def test_help_lists_every_kernel_and_force():
    done = make("help")
    assert done.returncode == 0, done.stderr
    assert f"kernels: {' '.join(KERNELS)}" in done.stdout and "[FORCE=1]" in done.stdout


# ---------------------------------------------------------------------------------------------
# The real thing on this CPU machine: make KERNEL=rms_norm perf from an empty OUT_ROOT


@pytest.fixture(scope="module")
def first_perf(tmp_path_factory):
    if not LIB.is_file():
        pytest.fail(f"{LIB} is missing: run `make build` (make check does)")
    # The library brought up to date first, on a deadline of its own: a source changed since the
    # last build (a kit run after an edit, not after make check) recompiles the crate, minutes on
    # a loaded 2-core machine, which the perf deadline below is not meant to cover.
    built = make("build", timeout=1500)
    assert built.returncode == 0, built.stdout + built.stderr
    out = tmp_path_factory.mktemp("perf") / "o"
    done = make("KERNEL=rms_norm", f"OUT_ROOT={out}", "GPUS=1", "perf")
    return out, done


def test_make_perf_without_a_gpu_ends_blocked_with_every_baseline_tried(first_perf):
    out, done = first_perf
    assert done.returncode == 0, done.stdout + done.stderr
    report = (out / "rms_norm" / "reports" / "performance.md").read_text()
    assert report.startswith("VERDICT: BLOCKED\n")
    assert "no CUDA GPU here" in report
    logs = out / "rms_norm" / "reports" / "logs"
    for backend in ("cutile", "triton", "torch"):
        raw = (logs / f"baseline_perf_{backend}.full.txt").read_text()
        assert "SKIPPED" in raw and "no CUDA GPU here" in raw, backend
        assert (out / "rms_norm" / f"baseline_perf_{backend}.txt").is_file()
    assert "no CUDA GPU here" in (logs / "perf_cutile_rs.full.txt").read_text()
    assert f"{out}/rms_norm/reports/performance.md: VERDICT: BLOCKED" in done.stdout


def test_a_second_make_perf_retimes_nothing(first_perf):
    out, _ = first_perf
    assert timed_stages(make("KERNEL=rms_norm", f"OUT_ROOT={out}", "perf", dry=True).stdout) == []
    again = make("KERNEL=rms_norm", f"OUT_ROOT={out}", "GPUS=1", "perf")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "python -m pytest" not in again.stdout + again.stderr and "timing" not in again.stderr
    assert f"{out}/rms_norm/reports/performance.md: VERDICT: BLOCKED" in again.stdout


def test_a_missing_baseline_log_is_the_only_one_retimed(first_perf):
    out, _ = first_perf
    logs = out / "rms_norm" / "reports" / "logs"
    (logs / "baseline_perf_triton.full.txt").unlink()
    kept = {b: (logs / f"baseline_perf_{b}.full.txt").stat().st_mtime_ns for b in ("cutile", "torch")}
    port = (logs / "perf_cutile_rs.full.txt").stat().st_mtime_ns
    done = make("KERNEL=rms_norm", f"OUT_ROOT={out}", "GPUS=1", "perf")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "baseline: timing rms_norm/triton" in done.stderr
    assert "-k test_perf and ([triton-) " in done.stderr
    assert (logs / "baseline_perf_triton.full.txt").is_file()
    assert {b: (logs / f"baseline_perf_{b}.full.txt").stat().st_mtime_ns for b in kept} == kept
    assert (logs / "perf_cutile_rs.full.txt").stat().st_mtime_ns == port


def test_a_changed_environment_retimes_every_stage(first_perf):
    out, _ = first_perf
    fingerprint = out / ".timing-env.txt"
    fingerprint.write_text(fingerprint.read_text().replace("python:", "python: 0.0 (another host)\nwas:"))
    done = make("KERNEL=rms_norm", f"OUT_ROOT={out}", "perf", dry=True)
    assert sorted(timed_stages(done.stdout)) == ["baseline", "perf"]
    assert "timing environment is new or changed" in done.stderr


# ---------------------------------------------------------------------------------------------
# scripts/timed_stage.sh alone, with a stand-in for scripts/pytest_stage.sh that records its call

FAKE_STAGE = """#!/usr/bin/env bash
# stands in for scripts/pytest_stage.sh: records its arguments, writes its session log and, with
# FAKE_WRITE, one stage log (and its pid beside CALLS) before sleeping FAKE_SLEEP seconds
log=$1; shift; shift
printf '%s\\n' "$*" >> "$CALLS"
mkdir -p "$(dirname "$log")"; echo session > "$log"
if [ -n "${FAKE_WRITE:-}" ]; then
    mkdir -p "$(dirname "$FAKE_WRITE")"; echo partial > "$FAKE_WRITE"; echo $$ > "$CALLS.pid"; sleep "${FAKE_SLEEP:-0}"
fi
exit ${FAKE_RC:-0}
"""


@pytest.fixture
def stage_dir(tmp_path):
    (tmp_path / "scripts").mkdir()
    for script in ("timed_stage.sh", "with_watchdog.sh"):
        shutil.copy(ROOT / "scripts" / script, tmp_path / "scripts" / script)
    fake = tmp_path / "scripts" / "pytest_stage.sh"
    fake.write_text(FAKE_STAGE)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def run_stage(cwd, stage, *specs, force=False, rc=0):
    argv = [
        "bash",
        "scripts/timed_stage.sh",
        stage,
        "logs/s.txt",
        "{kernel}/{backend}.txt",
        *(["--force"] if force else []),
        "--",
        *specs,
    ]
    return run(argv, timeout=60, cwd=cwd, env=child_env(CALLS=str(cwd / "calls.txt"), FAKE_RC=str(rc)))


def calls(cwd) -> list[str]:
    path = cwd / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_timed_stage_groups_kernels_by_their_stale_backends(stage_dir):
    dep = stage_dir / "dep.txt"
    dep.write_text("x")
    (stage_dir / "a").mkdir()
    (stage_dir / "a" / "torch.txt").write_text("current")
    os.utime(dep, (1, 1))  # older than the log
    specs = [
        f"a,triton,a/triton.txt,{dep}",
        f"a,torch,a/torch.txt,{dep}",
        f"b,triton,b/triton.txt,{dep}",
        f"c,triton,c/triton.txt,{dep}",
        f"c,torch,c/torch.txt,{dep}",
    ]
    done = run_stage(stage_dir, "baseline", *specs)
    assert done.returncode == 0, done.stderr
    assert calls(stage_dir) == [
        "tests/kernels/test_a.py tests/kernels/test_b.py -k test_perf and ([triton-) --print-record -v -rs --timeout=600 "
        "--continue-on-collection-errors --stage-log {kernel}/{backend}.txt --stage-backends triton",
        "tests/kernels/test_c.py -k test_perf and ([triton- or [torch-) --print-record -v -rs --timeout=600 "
        "--continue-on-collection-errors --stage-log {kernel}/{backend}.txt --stage-backends triton,torch",
    ]
    assert (stage_dir / "logs" / "s.txt").is_file() and (stage_dir / "logs" / "s-2.txt").is_file()
    assert (stage_dir / "a" / "torch.txt").read_text() == "current"


def test_timed_stage_retimes_a_log_older_than_a_prerequisite_and_nothing_current(stage_dir):
    dep = stage_dir / "dep.txt"
    dep.write_text("x")
    (stage_dir / "k").mkdir()
    log = stage_dir / "k" / "cutile_rs.txt"
    log.write_text("old")
    os.utime(log, (1, 1))
    done = run_stage(stage_dir, "perf", f"k,cutile_rs,k/cutile_rs.txt,{dep}")
    assert f"older than {dep}" in done.stderr
    assert calls(stage_dir) == [
        "tests/kernels/test_k.py -k cutile_rs and test_perf --print-record -v -rs --timeout=600 "
        "--continue-on-collection-errors --stage-log {kernel}/{backend}.txt --stage-backends cutile_rs"
    ]
    assert not log.exists()  # removed before the session, which would write it
    log.write_text("new")
    (stage_dir / "calls.txt").unlink()
    done = run_stage(stage_dir, "perf", f"k,cutile_rs,k/cutile_rs.txt,{dep}")
    assert calls(stage_dir) == [] and "every raw log is up to date" in done.stderr
    run_stage(stage_dir, "perf", f"k,cutile_rs,k/cutile_rs.txt,{dep}", force=True)
    assert len(calls(stage_dir)) == 1


def test_a_session_that_fails_is_listed_for_make_and_the_script_still_exits_0(stage_dir):
    done = run_stage(stage_dir, "perf", "k,cutile_rs,k/cutile_rs.txt", rc=2)
    assert done.returncode == 0
    assert (stage_dir / "logs" / "s.txt.failed").read_text().splitlines() == [
        "# logs/s.txt: pytest exit 2",
        "k/cutile_rs.txt",
    ]
    assert "did not end normally" in done.stderr


def stop_mid_session(stage_dir, sig):
    """timed_stage.sh with one stage log whose session writes it, then sleeps; `sig` sent to the script
    alone (as make's deadline or the OOM killer would reach it) once the log is written. Returns
    (exit status, stderr, the session's pid)."""
    env = child_env(CALLS=str(stage_dir / "calls.txt"), FAKE_WRITE="k/cutile_rs.txt", FAKE_SLEEP="60")
    argv = [
        "bash",
        "scripts/timed_stage.sh",
        "perf",
        "logs/s.txt",
        "{kernel}/{backend}.txt",
        "--",
        "k,cutile_rs,k/cutile_rs.txt",
    ]
    proc = subprocess.Popen(argv, cwd=stage_dir, env=env, stderr=subprocess.PIPE, text=True)
    pid_file = stage_dir / "calls.txt.pid"
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.is_file() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        assert pid_file.is_file(), "the session never started"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err, int(pid_file.read_text())


def gone(pid: int, seconds: float) -> bool:
    """Whether process `pid` is gone (or a zombie) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        stat_file = Path(f"/proc/{pid}/stat")
        if stat_file.exists() and stat_file.read_text().split(")")[-1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_stopped_stage_stops_its_session_and_keeps_its_logs_dated_for_a_retime(stage_dir):
    rc, err, session = stop_mid_session(stage_dir, signal.SIGTERM)
    assert rc == 128 + 15, err
    log = stage_dir / "k" / "cutile_rs.txt"
    assert log.read_text() == "partial\n" and log.stat().st_mtime == 0  # kept, older than anything
    assert (stage_dir / "logs" / "s.txt.failed").read_text().splitlines() == [
        "# logs/s.txt: stopped by SIGTERM (the raw logs keep what was timed; dated 1970: the next make re-times them)",
        "k/cutile_rs.txt",
    ]
    assert not (stage_dir / "logs" / "s.txt.running").exists()
    assert gone(session, 5), "the session outlived the stage"


def test_a_stage_killed_outright_has_its_session_stopped_and_its_logs_retimed_next(stage_dir):
    rc, err, session = stop_mid_session(stage_dir, signal.SIGKILL)
    assert rc == -9
    assert gone(session, 15), "the watchdog did not stop the session"  # it polls once a second
    running = stage_dir / "logs" / "s.txt.running"
    assert running.read_text().splitlines() == ["k/cutile_rs.txt"]
    log = stage_dir / "k" / "cutile_rs.txt"
    assert log.read_text() == "partial\n"  # kept, and current by its date: only .running says otherwise
    (stage_dir / "calls.txt").unlink()
    dep = stage_dir / "dep.txt"
    dep.write_text("x")
    os.utime(dep, (100, 100))  # older than the log as written, newer than 1970
    done = run_stage(stage_dir, "perf", f"k,cutile_rs,k/cutile_rs.txt,{dep}")
    assert "a run killed during its session left these raw logs; timing them again" in done.stderr
    assert len(calls(stage_dir)) == 1 and not running.exists()


def test_make_keeps_the_raw_logs_of_a_stopped_stage(tmp_path):
    done = make("KERNEL=softmax", f"OUT_ROOT={tmp_path / 'o'}", "-p", "perf", dry=True)  # -p: make's database
    precious = [line for line in done.stdout.splitlines() if line.startswith(".PRECIOUS:")][-1]  # the rule
    assert "softmax/reports/logs/perf_cutile_rs.full.txt" in precious
    assert "softmax/reports/logs/baseline_perf_torch.full.txt" in precious


def test_an_unknown_stage_is_a_usage_error(stage_dir):
    done = run_stage(stage_dir, "sweep", "k,cutile_rs,k/x.txt")
    assert done.returncode == 2 and "usage: scripts/timed_stage.sh baseline|perf" in done.stderr
