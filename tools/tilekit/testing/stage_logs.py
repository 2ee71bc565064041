"""One pytest session, one log per stage: ``--stage-log TEMPLATE`` (docs/multi-gpu.md).

`make baseline` times every baseline in one pytest session, and `make KERNEL=all baseline|perf`
every kernel in one session, so the workers (one per GPU) start once and all the timed cases of
the call spread over the GPUs. The reports still read one raw log per kernel and backend
(DESIGN.md: ``reports/logs/baseline_perf_<backend>.full.txt``, ``perf_cutile_rs.full.txt``).
This plugin writes those: for each case it appends, to the log of the case's stage, what pytest
shows of it -- the ``-v`` status line, the record block of a passed timed case, the traceback
and captured output of a failure -- and at the end of the session the stage's own short summary
(``FAILED``/``ERROR``/``SKIPPED [1]`` lines) and final line, in pytest's formats, so
``tilekit.reports.records.parse_log`` reads a stage log exactly as it reads a whole pytest run. pytest's
complete output stays in the session log that scripts/pytest_stage.sh tees.

A case's stage is (kernel, backend): the kernel from its file (``tests/kernels/test_<kernel>.py``),
the backend from the first part of its parameter id (``test_perf[triton-...]``) or else the end
of its function name (``test_op_every_variant_cutile_rs``). The template names the file:
``out/{kernel}/reports/logs/baseline_perf_{backend}.full.txt``, where ``{backend}`` is the name in
record files (``cutile`` for ``cutile_py``, ``cutile_rs`` for ``cutile_rs``).

The plugin runs where pytest reports (the single process, or the xdist controller, which replays
every worker's reports). A stage log is rewritten from scratch by each session; a log without
its final ``=== ... ===`` line is from a session that did not finish (killed, timed out).
"""

from __future__ import annotations

import os
import re
import shlex
import string
from dataclasses import dataclass, field

import pytest

from tilekit.testing.harness import BACKEND_IDS, RECORD_NAME
from tilekit.reports.records import record_blocks

_FILE = re.compile(r"(?:^|/)test_(?P<kernel>[A-Za-z0-9_]+)\.py(?:::|$)")
SESSION_LOG_VAR = "TILEKIT_SESSION_LOG"  # set by scripts/pytest_stage.sh: where pytest's whole output goes


def kernel_of(nodeid: str) -> str | None:
    """The kernel a node id belongs to, from its ``test_<kernel>.py`` file (None for other files)."""
    found = _FILE.search(nodeid)
    return found.group("kernel") if found else None


def backend_of(nodeid: str) -> str | None:
    """The backend id (cutile_rs, cutile_py, triton, torch, a provider's name) of a case, or None
    when it names none. The id's first part must be a whole id (``liger_cutile-...`` is not liger)."""
    if "::" not in nodeid:
        return None
    name = nodeid.split("::")[-1]
    func, _, params = name.partition("[")
    first = params.split("-", 1)[0].rstrip("]")
    if first in BACKEND_IDS:
        return first
    return max((b for b in BACKEND_IDS if func.endswith("_" + b)), key=len, default=None)  # the longest


def stage_of(nodeid: str) -> tuple[str, str] | None:
    """(kernel, backend id) of a case, or None when either cannot be told from its node id."""
    kernel, backend = kernel_of(nodeid), backend_of(nodeid)
    return (kernel, backend) if kernel and backend else None


def file_name(backend_id: str) -> str:
    """``{backend}`` in a template: the record name with ``-`` as ``_`` (cutile, cutile_rs, triton,
    torch, tilegym, liger, liger_cutile)."""
    return RECORD_NAME[backend_id].replace("-", "_")


def stage_path(template: str, kernel: str, backend_id: str) -> str:
    return template.format(kernel=kernel, backend=file_name(backend_id))


def _reason(report) -> str:
    """The one-line message pytest's short summary shows for a failed or errored report."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) or str(report.longrepr or "").strip()
    return message.splitlines()[0] if message else "(no message)"


def _status(report) -> str | None:
    """The -v status word of a report, or None when pytest shows none for this phase."""
    if hasattr(report, "wasxfail") and (report.skipped or report.when == "call"):
        return "XPASS" if report.passed else "XFAIL"  # xfail(run=False) and pytest.xfail() skip in setup
    if report.when == "call":
        return report.outcome.upper()
    if report.failed:  # a fixture's failure; xdist's report of a crashed worker has when="???"
        return "ERROR" if report.when in ("setup", "teardown") else "FAILED"
    if report.skipped:
        return "SKIPPED"
    return None


# status word -> the word a final line counts it under, in the order pytest's final line lists them
_COUNTED = {
    "FAILED": "failed",
    "PASSED": "passed",
    "SKIPPED": "skipped",
    "XFAIL": "xfailed",
    "XPASS": "xpassed",
    "ERROR": "error",
}


@dataclass
class Stage:
    path: str
    counts: dict = field(default_factory=dict)  # status word -> cases
    summary: list = field(default_factory=list)  # short-summary lines, in order
    seconds: float = 0.0


class StageLogs:
    """Registered where pytest reports (single process or xdist controller) with --stage-log."""

    def __init__(self, config: pytest.Config, template: str, backends: list[str]) -> None:
        self.config = config
        self.template = template
        self.backends = backends
        self.stages: dict[tuple[str, str], Stage] = {}

    # -- files ----------------------------------------------------------------------------------

    def _header(self, kernel: str, backend: str) -> str:
        session = os.environ.get(SESSION_LOG_VAR)
        source = f"; pytest's whole output: {session}" if session else ""
        args = shlex.join(self.config.invocation_params.args)
        return (
            f"tilekit stage log: kernel {kernel}, backend {backend}: this stage's cases from one pytest "
            f"session{source}\n$ python -m pytest {args}\n"
        )

    def _stage(self, kernel: str, backend: str) -> Stage:
        key = (kernel, backend)
        if key not in self.stages:
            path = stage_path(self.template, kernel, backend)
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(self._header(kernel, backend))
            self.stages[key] = Stage(path)
        return self.stages[key]

    @staticmethod
    def _append(stage: Stage, text: str) -> None:
        with open(stage.path, "a", encoding="utf-8") as f:  # closed per case: a killed run keeps what was written
            f.write(text if text.endswith("\n") else text + "\n")

    # -- hooks ----------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session) -> None:
        # Every expected stage gets a log now, even one whose file later fails to collect.
        for arg in self.config.args:
            kernel = kernel_of(arg.split("::")[0])
            for backend in self.backends if kernel else []:
                self._stage(kernel, backend)

    def pytest_collectreport(self, report) -> None:
        kernel = kernel_of(report.nodeid)
        if not report.failed or not kernel:
            return
        for (k, backend), stage in list(self.stages.items()):
            if k == kernel:
                self._append(stage, f"{report.nodeid} ERROR (collection)\n{report.longreprtext}")
                stage.counts["error"] = stage.counts.get("error", 0) + 1
                stage.summary.append(f"ERROR {report.nodeid} - {_reason(report)}")

    @pytest.hookimpl(trylast=True)  # after the record printer, so the session log reads the same way
    def pytest_runtest_logreport(self, report) -> None:
        key = stage_of(report.nodeid)
        if key is None:
            return  # not a case of a kernel suite: it stays in the session log only
        stage = self._stage(*key)
        stage.seconds += getattr(report, "duration", 0.0) or 0.0
        status = _status(report)
        if status is None:
            return
        node = getattr(report, "node", None)  # the xdist worker that ran it
        worker = getattr(getattr(node, "gateway", None), "id", None)
        text = f"{report.nodeid} {status}" + (f" [{worker}]" if worker else "") + "\n"
        for block in record_blocks(report):
            text += block + "\n"
        if status in ("FAILED", "ERROR"):
            text += f"____ {report.nodeid} ({report.when}) ____\n{report.longreprtext}\n"
            for title, content in report.sections:
                text += f"---- {title} ----\n{content}\n"
            stage.summary.append(f"{status} {report.nodeid} - {_reason(report)}")
        elif status == "SKIPPED" and isinstance(report.longrepr, tuple):
            path, line, reason = report.longrepr
            if os.path.isabs(path):  # relative to where pytest was started, as pytest's own -rs lines
                path = os.path.relpath(path, self.config.invocation_params.dir)
            stage.summary.append(f"SKIPPED [1] {path}:{line}: {reason.removeprefix('Skipped: ')}")
        word = _COUNTED[status]
        stage.counts[word] = stage.counts.get(word, 0) + 1
        self._append(stage, text)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        # ran (passed or failed) or collected nothing, and was not cut short by -x / --maxfail
        finished = int(exitstatus) in (0, 1, 5) and not (session.shouldfail or session.shouldstop)
        for stage in self.stages.values():
            lines = ["=" * 20 + " short test summary info (this stage) " + "=" * 20, *stage.summary]
            if finished:
                parts = [f"{stage.counts[w]} {w}" for w in _COUNTED.values() if stage.counts.get(w)]
                lines.append(
                    f"==== {', '.join(parts) or 'no tests ran'} in {stage.seconds:.2f}s (this stage's cases) ===="
                )
            else:
                why = session.shouldfail or session.shouldstop or f"exit status {int(exitstatus)}"
                lines.append(
                    f"tilekit: the pytest session stopped before it finished ({why}); this stage's "
                    "cases may be missing (see the session log)"
                )
            self._append(stage, "\n".join(lines))


def configure(config: pytest.Config) -> None:
    """Called by tilekit.testing.pytest_plugin: register StageLogs where pytest reports, with --stage-log."""
    template = config.getoption("--stage-log", default=None)
    if not template or hasattr(config, "workerinput"):
        return
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        fields = [f"a malformed brace ({exc})"]
    if sorted(set(fields)) != ["backend", "kernel"]:
        raise pytest.UsageError(
            f"--stage-log {template!r} must contain {{kernel}} and {{backend}} and no other "
            "{field} (double other braces: {{ }})"
        )
    backends = [b for b in (config.getoption("--stage-backends") or "").split(",") if b]
    unknown = [b for b in backends if b not in BACKEND_IDS]
    if unknown:
        raise pytest.UsageError(
            f"--stage-backends: unknown backend id {', '.join(unknown)} (known: {', '.join(BACKEND_IDS)})"
        )
    config.pluginmanager.register(StageLogs(config, template, backends), "tilekit-stage-logs")
