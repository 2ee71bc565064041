"""GPUS=N: one pytest-xdist worker per GPU, each pinned with CUDA_VISIBLE_DEVICES (docs/multi-gpu.md).

Two halves, one source of truth for "which GPUs":

- ``python -m tilekit.gpu_workers`` (called by scripts/pytest_stage.sh) prints the GPUs a stage
  may use, comma-separated: the entries of the caller's CUDA_VISIBLE_DEVICES when it is set, else
  the indices ``nvidia-smi -L`` lists; ``GPUS=N`` takes the first N. It exits 2 with the reason
  (and the fix) when GPUS is not a count or asks for more GPUs than are visible.
- The pytest plugin (``-p tilekit.gpu_workers``, in pyproject.toml's addopts) acts only in an
  xdist controller (``pytest -n N``): it takes the list from ``TILEKIT_GPU_LIST`` (what the stage
  exported) or resolves it as above, refuses more workers than GPUs, and gives worker i the
  environment ``CUDA_VISIBLE_DEVICES=<entry i>`` through xdist's ``pytest_xdist_setupnodes`` hook
  (execnet's ``env:`` spec). The variable is set as the worker process starts, before anything
  can initialise CUDA, and a worker that xdist restarts after a crash reuses the spec, so it lands
  on the same GPU. Two workers never share a GPU; with one GPU the stage does not use xdist.

Without any GPU (a CPU machine running ``pytest -n 4 tests/kit``) workers are left unpinned: there
is no timed case that could share a GPU.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping

import pytest

LIST_VAR = "TILEKIT_GPU_LIST"  # the GPUs the stage chose, one per worker
VISIBLE_VAR = "CUDA_VISIBLE_DEVICES"
COUNT_VAR = "GPUS"
_SMI_GPU = re.compile(r"^GPU (\d+):", re.M)


class GpuSelectionError(ValueError):
    """GPUS or the GPU list cannot be honoured; the message names the variable and the fix."""


# ---------------------------------------------------------------------------------------------
# Which GPUs (pure functions, and nvidia-smi at the edge)

def split_list(text: str) -> list[str]:
    """Entries of a comma-separated GPU list (CUDA_VISIBLE_DEVICES syntax), blanks dropped."""
    return [entry.strip() for entry in text.split(",") if entry.strip()]


def nvidia_smi_indices(run: Callable = subprocess.run) -> list[str]:
    """The GPU indices `nvidia-smi -L` lists ([] without nvidia-smi or a working driver)."""
    try:
        done = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return _SMI_GPU.findall(done.stdout) if done.returncode == 0 else []


def visible_gpus(env: Mapping[str, str], run: Callable = subprocess.run) -> tuple[list[str], str]:
    """(the GPUs this process may use, where that list came from)."""
    if VISIBLE_VAR in env:  # set, even to "": an empty value hides every GPU from CUDA
        return split_list(env[VISIBLE_VAR]), f"{VISIBLE_VAR}={env[VISIBLE_VAR]}"
    found = nvidia_smi_indices(run)
    return found, f"nvidia-smi -L lists {','.join(found) or 'no GPU'}"


def _check_distinct(gpus: list[str], source: str) -> None:
    repeated = sorted({g for g in gpus if gpus.count(g) > 1})
    if repeated:
        raise GpuSelectionError(f"{source} names GPU {', '.join(repeated)} more than once; two workers would "
                                "share it: list each GPU once")


def requested_count(value: str | None) -> int | None:
    """GPUS as a count; None when empty or unset (all visible GPUs)."""
    if value is None or not value.strip():
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise GpuSelectionError(f"{COUNT_VAR}={value!r}: must be a whole number >= 1, or empty for every "
                                "visible GPU (e.g. make GPUS=2 perf)")
    return int(value)


def select_gpus(visible: list[str], source: str, requested: int | None) -> list[str]:
    """The first ``requested`` visible GPUs (all when None)."""
    _check_distinct(visible, source)
    if requested is None:
        return visible
    if requested > len(visible):
        fix = (f"set {COUNT_VAR}={len(visible)} or fewer, or leave {COUNT_VAR} empty for every visible GPU"
               if visible else f"set {COUNT_VAR}=1 or leave it empty (then GPU tests skip with the reason)")
        raise GpuSelectionError(f"{COUNT_VAR}={requested} but only {len(visible)} GPU(s) are visible ({source}): {fix}")
    return visible[:requested]


def have_xdist() -> bool:
    return importlib.util.find_spec("xdist") is not None


def stage_gpus(env: Mapping[str, str], run: Callable = subprocess.run,
               xdist: Callable[[], bool] = have_xdist) -> tuple[list[str], str]:
    """(the GPUs a stage spreads its cases over, a note for stderr or ""): what
    `python -m tilekit.gpu_workers` prints. More than one GPU needs pytest-xdist: asked for with
    GPUS=N, its absence is an error; by default the stage falls back to one GPU and says so."""
    count = requested_count(env.get(COUNT_VAR))
    if count == 1:
        return [], ""  # GPUS=1: today's single-process path, without even asking nvidia-smi
    gpus = select_gpus(*visible_gpus(env, run), count)
    if len(gpus) < 2 or xdist():
        return gpus, ""
    fix = "pip install pytest-xdist==3.8.0 (make setup installs it)"
    if count is not None:
        raise GpuSelectionError(f"{COUNT_VAR}={count} needs pytest-xdist, which is not installed: {fix}, "
                                f"or set {COUNT_VAR}=1")
    return gpus[:1], (f"{len(gpus)} GPUs are visible but pytest-xdist is not installed, so this stage runs "
                      f"on one: {fix} to use them all, or set {COUNT_VAR}=1 to silence this")


def worker_gpus(env: Mapping[str, str], workers: int, run: Callable = subprocess.run) -> list[str]:
    """One GPU per xdist worker, in worker order ([] when no GPU is visible: CPU-only tests)."""
    if env.get(LIST_VAR, "").strip():
        gpus, source = split_list(env[LIST_VAR]), f"{LIST_VAR}={env[LIST_VAR]}"
    else:
        gpus, source = visible_gpus(env, run)
    _check_distinct(gpus, source)
    if gpus and workers > len(gpus):
        raise GpuSelectionError(
            f"pytest -n {workers} starts {workers} workers but only {len(gpus)} GPU(s) are available ({source}); "
            f"timed cases must not share a GPU: use -n {len(gpus)} (make GPUS={len(gpus)}) or fewer")
    return gpus[:workers]


# ---------------------------------------------------------------------------------------------
# The pytest plugin (xdist controller only)

def xdist_workers(config: pytest.Config) -> int:
    """How many xdist workers this session starts (0 in a worker, or without xdist)."""
    if hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no":
        return 0
    return len(getattr(config.option, "tx", None) or [])


class WorkerPinning:
    """Registered in an xdist controller: gives worker i the environment CUDA_VISIBLE_DEVICES=gpus[i]."""

    def __init__(self, gpus: list[str]) -> None:
        self.gpus = gpus

    def pytest_xdist_setupnodes(self, config, specs) -> None:
        for spec, gpu in zip(specs, self.gpus):
            spec.env[VISIBLE_VAR] = gpu  # execnet sets it in the worker before the worker imports anything

    def pytest_report_header(self, config) -> str:
        pairs = ", ".join(f"gw{i}={gpu}" for i, gpu in enumerate(self.gpus))
        return f"tilekit gpu_workers: one worker per GPU, {VISIBLE_VAR} {pairs}"


def spread_by_stage(stages: list, workers: int) -> bool:
    """Whether to hand out whole stages (a (kernel, backend) per worker at a time) rather than single
    cases, given the stage of every case: only when the largest stage is at most half of a worker's
    fair share of the cases, so that whole stages can still balance the GPUs. Case counts stand in
    for time (a stage's cases are timed alike). On two H200s, `make KERNEL=all perf` (four stages,
    one of them six of the fifteen cases) by stage left one GPU timing rms_norm's six autotuned
    cases while the other idled (docs/multi-gpu.md)."""
    if not stages or workers < 2:
        return False
    largest = max(Counter(stages).values())
    return 2 * workers * largest <= len(stages)


class StageScheduler:
    """Registered in an xdist controller of a --stage-log session (make baseline/perf, which pass
    --dist loadscope): xdist's loadscope scheduling with a (kernel, backend) stage as the scope.
    The cases of one stage share compiled kernels (Triton, cuTile and the port's JIT specialize on
    dtype and alignment, not on the sizes) and the port's autotune candidates, so a stage run by one
    worker compiles them once; split over workers, every worker would compile them again. When whole stages cannot balance
    the workers (spread_by_stage) the scope is the single case, as with --dist load."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") != "loadscope":
            return None  # another --dist asked for by hand: xdist's own
        from xdist.scheduler import LoadScopeScheduling

        from tilekit.stage_logs import stage_of

        class StageScheduling(LoadScopeScheduling):
            by_stage = True

            def _split_scope(self, nodeid: str) -> str:
                stage = stage_of(nodeid) if self.by_stage else None
                return "/".join(stage) if stage else nodeid

            def schedule(self) -> None:
                if self.collection is None and self.registered_collections:
                    ids = next(iter(self.registered_collections.values()))
                    self.by_stage = spread_by_stage([stage_of(n) or n for n in ids], len(self.nodes))
                    self.log("tilekit: scope =", "stage" if self.by_stage else "case")
                super().schedule()

            def remove_node(self, node):
                # loadscope puts a crashed worker's unfinished cases back in the queue, the crashed case
                # too, so the next worker would run it and crash again; like --dist load, report it
                # failed once (xdist does, from the value returned here) and requeue only the others.
                workload = self.assigned_work.pop(node)
                pending = [(scope, nodeid) for scope, unit in workload.items()
                           for nodeid, done in unit.items() if not done]
                if not pending:
                    return None
                scope, crashed = pending[0]  # a worker runs its cases in the order they were sent
                workload[scope][crashed] = True
                self.workqueue.update({s: unit for s, unit in workload.items() if not all(unit.values())})
                for other in self.assigned_work:
                    self._reschedule(other)
                return crashed

        return StageScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    workers = xdist_workers(config)
    if not workers:
        return
    try:
        gpus = worker_gpus(os.environ, workers)
    except GpuSelectionError as exc:
        raise pytest.UsageError(str(exc)) from None
    if gpus:
        config.pluginmanager.register(WorkerPinning(gpus), "tilekit-gpu-pinning")
    if config.getoption("--stage-log", default=None):
        config.pluginmanager.register(StageScheduler(), "tilekit-stage-scheduler")


# ---------------------------------------------------------------------------------------------
# CLI for scripts/pytest_stage.sh

def main(argv: list[str]) -> int:
    if argv:
        print("usage: GPUS=[N] python -m tilekit.gpu_workers  (prints the GPUs a stage uses, comma-separated)",
              file=sys.stderr)
        return 2
    try:
        gpus, note = stage_gpus(os.environ)
    except GpuSelectionError as exc:
        print(f"tilekit gpu_workers: {exc}", file=sys.stderr)
        return 2
    if note:
        print(f"tilekit gpu_workers: note: {note}", file=sys.stderr)
    print(",".join(gpus))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
