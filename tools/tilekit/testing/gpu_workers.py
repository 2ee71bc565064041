"""GPUS=N: one pytest-xdist worker per GPU, each pinned with CUDA_VISIBLE_DEVICES (docs/multi-gpu.md).

Two halves, one source of truth for "which GPUs":

- ``python -m tilekit.testing.gpu_workers`` (called by scripts/pytest_stage.sh) prints the GPUs a stage
  may use, comma-separated: the entries of the caller's CUDA_VISIBLE_DEVICES when it is set, else
  the indices ``nvidia-smi -L`` lists; ``GPUS=N`` takes the first N. It exits 2 with the reason
  (and the fix) when GPUS is not a count or asks for more GPUs than are visible.
- The pytest plugin (``-p tilekit.testing.gpu_workers``, in pyproject.toml's addopts) acts only in an
  xdist controller (``pytest -n N``): it takes the list from ``TILEKIT_GPU_LIST`` (what the stage
  exported) or resolves it as above, refuses more workers than GPUs, and gives worker i the
  environment ``CUDA_VISIBLE_DEVICES=<entry i>`` through xdist's ``pytest_xdist_setupnodes`` hook
  (execnet's ``env:`` spec). The variable is set as the worker process starts, before anything
  can initialise CUDA, and a worker that xdist restarts after a crash reuses the spec, so it lands
  on the same GPU. Two workers never share a GPU; with one GPU the stage does not use xdist.
- In a --stage-log session (make baseline/perf) under ``--dist load`` the plugin also hands out the
  cases itself (StageScheduling, through xdist's public ``pytest_xdist_make_scheduler`` hook):
  whole (kernel, backend) stages when they balance the workers, else single cases; a case that
  crashes its worker is reported once and never run again, the worker's other cases still run.

Without any GPU (a CPU machine running ``pytest -n 4 tests/kit``) workers are left unpinned: there
is no timed case that could share a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter, deque
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
        raise GpuSelectionError(
            f"{source} names GPU {', '.join(repeated)} more than once; two workers would share it: list each GPU once"
        )


def requested_count(value: str | None) -> int | None:
    """GPUS as a count; None when empty or unset (all visible GPUs)."""
    if value is None or not value.strip():
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise GpuSelectionError(
            f"{COUNT_VAR}={value!r}: must be a whole number >= 1, or empty for every "
            "visible GPU (e.g. make GPUS=2 perf)"
        )
    return int(value)


def select_gpus(visible: list[str], source: str, requested: int | None) -> list[str]:
    """The first ``requested`` visible GPUs (all when None)."""
    _check_distinct(visible, source)
    if requested is None:
        return visible
    if requested > len(visible):
        fix = (
            f"set {COUNT_VAR}={len(visible)} or fewer, or leave {COUNT_VAR} empty for every visible GPU"
            if visible
            else f"set {COUNT_VAR}=1 or leave it empty (then GPU tests skip with the reason)"
        )
        raise GpuSelectionError(f"{COUNT_VAR}={requested} but only {len(visible)} GPU(s) are visible ({source}): {fix}")
    return visible[:requested]


def have_xdist() -> bool:
    return importlib.util.find_spec("xdist") is not None


def stage_gpus(
    env: Mapping[str, str], run: Callable = subprocess.run, xdist: Callable[[], bool] = have_xdist
) -> tuple[list[str], str]:
    """(the GPUs a stage spreads its cases over, a note for stderr or ""): what
    `python -m tilekit.testing.gpu_workers` prints. More than one GPU needs pytest-xdist: asked for with
    GPUS=N, its absence is an error; by default the stage falls back to one GPU and says so."""
    count = requested_count(env.get(COUNT_VAR))
    if count == 1:
        return [], ""  # GPUS=1: today's single-process path, without even asking nvidia-smi
    gpus = select_gpus(*visible_gpus(env, run), count)
    if len(gpus) < 2 or xdist():
        return gpus, ""
    fix = "pip install pytest-xdist==3.8.0 (make setup installs it)"
    if count is not None:
        raise GpuSelectionError(
            f"{COUNT_VAR}={count} needs pytest-xdist, which is not installed: {fix}, or set {COUNT_VAR}=1"
        )
    return gpus[:1], (
        f"{len(gpus)} GPUs are visible but pytest-xdist is not installed, so this stage runs "
        f"on one: {fix} to use them all, or set {COUNT_VAR}=1 to silence this"
    )


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
            f"timed cases must not share a GPU: use -n {len(gpus)} (make GPUS={len(gpus)}) or fewer"
        )
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


class StageScheduling:
    """How the cases of a --stage-log session go to the xdist workers: an implementation of xdist's
    public ``Scheduling`` protocol (xdist.scheduler.Scheduling), written here and returned from the
    public ``pytest_xdist_make_scheduler`` hook (StageScheduler). It calls only what the protocol's
    own implementations call on a worker: ``send_runtest_some``, ``shutdown``, ``shutting_down``.

    - Units of work: whole (kernel, backend) stages, largest first, when spread_by_stage says they
      balance the workers; else single cases in collection order (as ``--dist load``). Decided once,
      from the collection the workers report, i.e. after -k and deselection.
    - A worker runs the cases it was sent one after another, and runs one only when it knows the next
      one or has been told to shut down. So a worker is topped up to two pending cases while work is
      queued, and is told to shut down as soon as the queue is empty: no worker ever waits for work
      that is not coming, and nothing that finished is ever sent again.
    - A worker that crashes was running (or about to run) its first pending case: a worker's events
      arrive in order, its crash last. That case is returned to xdist, which reports it failed once and starts a replacement
      on the same GPU (WorkerPinning); the worker's other pending cases go back to the front of the
      queue, for the replacement or any worker that asks first. The crashed case is never sent again
      (xdist's own loadscope/loadgroup requeue it, and finished units with it: docs/multi-gpu.md).
    """

    def __init__(
        self,
        config: pytest.Config,
        workers: int,
        log: Callable[..., None] | None = None,
        stage: Callable[[str], object] | None = None,
    ) -> None:
        from tilekit.testing.stage_logs import stage_of

        self.config = config
        self.numnodes = workers  # collections to wait for before the first distribution
        self.log = log or (lambda *args: None)
        self.stage = stage or stage_of
        self.collection: list[str] | None = None  # the node ids every worker collected, once agreed
        self.collections: dict = {}  # worker -> the node ids it collected (a dead worker's stay counted)
        self.pending: dict = {}  # live worker -> indices sent and not finished, in the order sent
        self.queue: deque[list[int]] = deque()  # units of work not sent yet
        self.by_stage = False

    # -- the Scheduling protocol ------------------------------------------------------------------

    @property
    def nodes(self) -> list:
        return list(self.pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.collections) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        # xdist then tells every worker to shut down, which lets each run its last pending case
        return (
            self.collection_is_completed
            and not self.queue
            and all(len(indices) < 2 for indices in self.pending.values())
        )

    @property
    def has_pending(self) -> bool:
        return bool(self.queue) or any(self.pending.values())

    def add_node(self, node) -> None:
        assert node not in self.pending, node
        self.pending[node] = []

    def add_node_collection(self, node, collection) -> None:
        collection = list(collection)
        if self.collection is not None and collection != self.collection:
            # a replacement that collected other cases: no work for it, and no wait for it either
            self.log(f"{node.gateway.id} collected other tests than the first workers: shutting it down")
            node.shutdown()
            return
        self.collections[node] = collection

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is None:
            self.collection = self._agreed_collection()
            self.queue.extend(self._units(self.collection))
        for node in self.nodes:
            self._fill(node)

    def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
        self.pending[node].remove(item_index)
        self._fill(node)

    def mark_test_pending(self, item: str) -> None:
        # a pytest_handlecrashitem hook asks to run a crashed case again (pytest-rerunfailures does)
        assert self.collection is not None
        self.queue.appendleft([self.collection.index(item)])
        for node in self.nodes:
            self._fill(node)

    def remove_pending_tests_from_node(self, node, indices) -> None:
        raise NotImplementedError("only --dist worksteal takes work back from a worker")

    def remove_node(self, node) -> str | None:
        pending = self.pending.pop(node)  # KeyError for a worker never added: xdist expects it
        if not pending:
            return None  # a worker that finished, or died between cases
        crashed, rest = pending[0], pending[1:]
        if rest:
            self.queue.appendleft(rest)
        for other in self.nodes:
            self._fill(other)
        assert self.collection is not None
        return self.collection[crashed]

    # -- ours ---------------------------------------------------------------------------------------

    def _fill(self, node) -> None:
        if node.shutting_down or node not in self.collections:
            return
        while self.queue and len(self.pending[node]) < 2:
            unit = self.queue.popleft()
            self.pending[node].extend(unit)
            node.send_runtest_some(unit)
        if not self.queue:
            node.shutdown()  # it runs what it holds, then finishes

    def _agreed_collection(self) -> list[str]:
        """The collection all workers reported; [] (nothing runs) and a collection error if they differ."""
        (first_node, first), *others = self.collections.items()
        for node, collection in others:
            if collection != first:
                msg = (
                    f"tilekit gpu_workers: workers collected different tests ({first_node.gateway.id}: "
                    f"{len(first)}, {node.gateway.id}: {len(collection)}); is the collection order "
                    "random (a set, a random parameter)?"
                )
                self.config.hook.pytest_collectreport(
                    report=pytest.CollectReport(nodeid=node.gateway.id, outcome="failed", longrepr=msg, result=[])
                )
                return []
        return first

    def _units(self, collection: list[str]) -> list[list[int]]:
        stages = [self.stage(nodeid) or nodeid for nodeid in collection]
        self.by_stage = spread_by_stage(stages, self.numnodes)
        if not self.by_stage:
            units = [[i] for i in range(len(collection))]
        else:
            grouped: dict = {}
            for i, stage in enumerate(stages):
                grouped.setdefault(stage, []).append(i)
            units = sorted(grouped.values(), key=len, reverse=True)  # largest first (stable)
        count = len(set(stages))
        line = (
            f"tilekit gpu_workers: {len(collection)} cases in {count} stage{'s' * (count != 1)} over "
            f"{self.numnodes} workers: handed out {'by stage' if self.by_stage else 'one case at a time'}"
        )
        self.log(line)
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None and collection:
            terminal.write_line(line)
        return units


class StageScheduler:
    """Registered in an xdist controller of a --stage-log session (make baseline/perf, which
    scripts/pytest_stage.sh runs with --dist load): StageScheduling instead of xdist's load
    scheduling. The cases of one stage share compiled kernels (Triton, cuTile and the port's JIT
    specialize on dtype and alignment, not on the sizes) and the port's autotune candidates, so a
    stage run by one worker compiles them once; split over workers, every worker would compile them
    again. Any other --dist asked for by hand is left to xdist."""

    def __init__(self) -> None:
        self.workers = 0

    def pytest_xdist_setupnodes(self, config, specs) -> None:
        self.workers = len(specs)  # the workers xdist starts, whatever --tx or -n said

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") != "load" or not self.workers:
            return None
        return StageScheduling(config, self.workers, log, stage=unit_of)


def unit_of(nodeid: str):
    """What StageScheduling hands out together: a case's (kernel, backend) stage, but a sweep case
    (make sweep) alone: the suites order those costliest first, so one at a time they balance the
    GPUs by cost, and the disk JIT cache (tilekit.runtime.ffi) spares a second worker the compile."""
    from tilekit.testing.stage_logs import stage_of

    return nodeid if "::test_sweep[" in nodeid else stage_of(nodeid)


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
        print(
            "usage: GPUS=[N] python -m tilekit.testing.gpu_workers  (prints the GPUs a stage uses, comma-separated)",
            file=sys.stderr,
        )
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
