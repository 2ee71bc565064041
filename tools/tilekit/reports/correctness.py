"""reports/correctness.md from pytest's JUnit XML (DESIGN.md, "Reports").

``parse_junit`` reads the cases, ``classify`` makes the verdict and says whether a failure is in
the host code or the kernel, ``render_correctness`` writes the text; ``build_correctness`` reads a
kernel's folder. Pure apart from that last one.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from tilekit.reports.layout import CORRECTNESS_LOG, JUNIT, MissingInput
from tilekit.reports.markdown import cell, markdown_table
from tilekit.reports.records import PORT_BACKEND, read_text


@dataclass(frozen=True)
class Case:
    test: str
    config: str
    result: str  # PASSED | FAILED | ERROR | SKIPPED
    message: str
    collection: bool = False  # an ERROR collecting a module
    exc_type: str = ""  # the exception class of a FAILED or ERROR case, e.g. "AssertionError"; "" when unknown


@dataclass(frozen=True)
class CorrectnessResult:
    verdict: str
    cases: list
    passed: int
    failed: int  # FAILED and ERROR cases together
    skipped: int
    fail_class: str
    host_fix: str
    kernel_followup: str
    block_class: str
    env_skipped: list = field(default_factory=list)  # cases skipped because this machine cannot run them


class MalformedInput(Exception):
    pass


def parse_junit(text: str, path: str = JUNIT) -> list[Case]:
    try:
        root = ET.fromstring(text.rstrip("\n"))  # a cut-off file's error is on its last line, not after it
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else "?"
        raise MalformedInput(
            f"{path}:{line}: not valid JUnit XML ({exc}); the run was probably cut off: "
            "re-run the correctness stage (make test)"
        ) from None
    cases = []
    for node in root.iter("testcase"):
        name = node.get("name", "")
        module = node.get("classname", "").rsplit(".", 1)[-1]
        test, _, config = name.partition("[")
        outcome = next((child for child in node if child.tag in ("failure", "error", "skipped")), None)
        tags = {child.tag for child in node}
        result = (
            "FAILED"
            if "failure" in tags
            else "ERROR"
            if "error" in tags
            else "SKIPPED"
            if "skipped" in tags
            else "PASSED"
        )
        message = "" if outcome is None else (outcome.get("message") or (outcome.text or "").strip())
        exc_type = ""
        if result in ("FAILED", "ERROR"):
            bad = node.find("failure") if result == "FAILED" else node.find("error")
            message = bad.get("message") or (bad.text or "").strip()
            exc_type = bad.get("type") or exception_type(message)
        cases.append(
            Case(
                f"{module}::{test}" if module else test,
                config.rstrip("]"),
                result,
                message,
                collection=result == "ERROR" and message == "collection failure",
                exc_type=exc_type,
            )
        )
    return cases


# Failures are classified by structure, never by a word anywhere in the text (a value check whose
# message says "cuda:0" is still a value check): the exception class pytest reports, whether the
# test body failed (<failure>) or its set-up / tear-down or collection did (<error>), and for skips
# the reason's own statement that this machine lacks something.
_EXC_NAME = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s|:?$)")
# pytest's <error> message for a fixture that raised: failed on setup with "ExcType: text"
_PHASE_ERROR = re.compile(r'^failed on (?:setup|teardown) with "(.*)"$', re.S)
_RAW_EXC = re.compile(r"^E?\s*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)):", re.M)  # E   Foo: ...
# A test body's failed value check: torch.testing.assert_close, harness.check_close, numpy, assert.
KERNEL_EXCEPTIONS = ("AssertionError",)
# ffi.KernelError for a non-zero return code; code -3 (ffi.RETURN_CODES) is the device code's own:
# its JIT compile or launch failed. Any other code is a refused call, a host-side error.
_KERNEL_ERROR_JIT = re.compile(r"\breturned -3 \(JIT_OR_LAUNCH\b")
# The machine lacks a module or a usable device: not something the port's code can fix.
ENV_EXCEPTIONS = (
    "ModuleNotFoundError",
    "ImportError",
    "torch.OutOfMemoryError",
    "torch.AcceleratorError",
)  # and torch.cuda.*
# A skip reason that says this machine cannot run the case ("no CUDA GPU here", "triton: requires a
# GPU", "CUDA is not available", importorskip's "could not import 'torch'"), at the reason's start.
_MACHINE_SKIP = re.compile(
    r"^(?:[\w.-]+: )?(?:(?:no|without|requires?|needs?) (?:an? )?(?:cuda|gpu|nvidia|driver|cupti)\b"
    r"|(?:cuda|gpu|nvidia driver|driver|cupti)\b[\w ]{0,20}?\b(?:not available|unavailable|not found)\b"
    r"|could not import\b|no module named\b)",
    re.I,
)


def exception_type(message: str) -> str:
    """The exception class a JUnit failure or error message starts with ("AssertionError: ..."); a
    set-up error's inner one; "" when the message does not start with one."""
    phase = _PHASE_ERROR.match(message.strip())
    first = (phase.group(1) if phase else message).strip().split("\n", 1)[0]
    found = _EXC_NAME.match(first)
    return found.group(1) if found else ""


def is_env_exception(exc_type: str) -> bool:
    return exc_type in ENV_EXCEPTIONS or exc_type.startswith("torch.cuda.")


def is_kernel_failure(case: Case) -> bool:
    """The test body ran and the port's results were wrong, or its JIT compile / launch failed."""
    if case.result != "FAILED":
        return False  # set-up, tear-down and collection errors happen before or after the kernel
    name = case.exc_type.rsplit(".", 1)[-1]
    return name in KERNEL_EXCEPTIONS or (name == "KernelError" and bool(_KERNEL_ERROR_JIT.search(case.message)))


def is_machine_skip(case: Case) -> bool:
    return case.result == "SKIPPED" and bool(_MACHINE_SKIP.match(case.message.strip()))


def classify(cases: list[Case], raw_log: str) -> CorrectnessResult:
    passed = sum(c.result == "PASSED" for c in cases)
    failed = sum(c.result in ("FAILED", "ERROR") for c in cases)
    skipped = sum(c.result == "SKIPPED" for c in cases)
    really_failed = sum(c.result == "FAILED" for c in cases)
    bad = [c for c in cases if c.result in ("FAILED", "ERROR")]
    # A case skipped because this machine cannot run it (no GPU, no driver) did not verify the port:
    # a run with such skips is not ALL_PASS (a skip by design, e.g. an unsupported dtype, is).
    env_skipped = [c for c in cases if is_machine_skip(c)]
    blocked = (
        any(c.collection for c in cases) or (passed == 0 and really_failed == 0) or (bool(env_skipped) and not bad)
    )
    kernel_bad = [c for c in bad if is_kernel_failure(c)]
    host_bad = [c for c in bad if c not in kernel_bad]
    if blocked:
        verdict = "BLOCKED"
        if not cases:  # nothing ran: the exceptions pytest printed say why
            block_class = "env" if any(is_env_exception(e) for e in _RAW_EXC.findall(raw_log[-4000:])) else "host"
        elif (env_skipped or bad) and all(is_env_exception(c.exc_type) for c in bad):
            block_class = "env"
        else:
            block_class = "kernel" if kernel_bad and not host_bad else "host"
    else:
        verdict, block_class = ("FAIL" if bad else "ALL_PASS"), ""
    fail_class = "" if not bad or verdict == "BLOCKED" else ("host" if host_bad else "kernel")
    host_fix = (
        (
            f"{len(host_bad)} case(s) fail in the host code (op.py, ffi.rs, the test): fix those first; "
            f"first: {host_bad[0].test}[{host_bad[0].config}]: {_first_line(host_bad[0].message)}"
        )
        if host_bad
        else ""
    )
    kernel_followup = (
        (
            f"{len(kernel_bad)} case(s) give wrong results from the device code (kernel.rs); "
            f"first: {kernel_bad[0].test}[{kernel_bad[0].config}]: {_first_line(kernel_bad[0].message)}"
        )
        if kernel_bad
        else ""
    )
    return CorrectnessResult(
        verdict, cases, passed, failed, skipped, fail_class, host_fix, kernel_followup, block_class, env_skipped
    )


def _first_line(message: str, limit: int = 160) -> str:
    line = message.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def render_correctness(
    kernel: str, result: CorrectnessResult, raw_log: str | None, *, title: str = "", intro: str = "",
    logs: tuple[str, str] = (CORRECTNESS_LOG, JUNIT),
) -> str:  # fmt: skip
    """The report's text; `title` (default: the port's correctness), an `intro` paragraph and the
    (pytest log, JUnit XML) paths it names serve another suite's report (make tilegym-tests)."""
    lines = [
        f"VERDICT: {result.verdict}",
        "",
        f"# {kernel}: {title or PORT_BACKEND + ' correctness'}",
        "",
        *([intro, ""] if intro else []),
        f"Summary: {result.passed} passed, {result.failed} failed, {result.skipped} skipped",
        "",
    ]
    if raw_log is not None and re.search(r"^!+ stopping after \d+ failures? !+$", raw_log, re.M):
        lines += ["Note: pytest stopped at the first failure (-x); later cases did not run.", ""]
    if not result.cases:
        lines += ["Note: the JUnit XML holds no test case (empty selection or a run that never started).", ""]
    if result.env_skipped and result.passed:
        lines += [
            f"Note: {len(result.env_skipped)} case(s) were skipped because this machine cannot run them "
            f"(first: {_first_line(result.env_skipped[0].message)}); the port is not verified on them.",
            "",
        ]
    rows = [[cell(c.test), cell(c.config or "-"), c.result, cell(_first_line(c.message)) or "-"] for c in result.cases]
    lines += [markdown_table(rows, ["Test", "Config", "Result", "Error"]), ""]
    lines += [
        f"fail_class: {result.fail_class}",
        f"host_fix: {result.host_fix}",
        f"kernel_followup: {result.kernel_followup}",
    ]
    if result.verdict == "BLOCKED":
        lines.append(f"block_class: {result.block_class}")
    missing = "" if raw_log is not None else " (missing: make KERNEL=" + kernel + " test writes it)"
    lines += [f"pytest_log: {logs[0]}{missing}", f"junit_xml: {logs[1]}"]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def build_correctness(kernel: str, kernel_dir: str) -> tuple[str, CorrectnessResult, bool]:
    junit = os.path.join(kernel_dir, JUNIT)
    if not os.path.isfile(junit):
        raise MissingInput(f"{junit}: missing; `make KERNEL={kernel} test` writes it")
    raw_path = os.path.join(kernel_dir, CORRECTNESS_LOG)
    raw = read_text(raw_path) if os.path.isfile(raw_path) else None
    result = classify(parse_junit(read_text(junit), junit), raw or "")
    return render_correctness(kernel, result, raw), result, raw is not None
