"""Check every output file of a kernel: ``python -m tilekit validate --kernel K --dir out/K``.

Prints one <VALIDATOR_OUTPUT> block with a ``$ check`` / ``exit=N`` pair per check, then the
reasons of failed checks on stderr; exits 1 if any check failed. Checks parse structure and
recompute the numbers (geomean, interval, verdict) from the sanitized logs; they never grep text
for a number and trust it. Each check is a pure function from texts to a list of problems.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from tilekit.reports.correctness import MalformedInput, classify, parse_junit
from tilekit.reports.layout import (
    BUILD_LOG,
    CORRECTNESS_LOG,
    CORRECTNESS_MD,
    INVESTIGATION,
    JUNIT,
    PERFORMANCE_MD,
    PORT_CLEAN,
    PORT_RAW,
    SETTLE_CLEAN,
    SETTLE_RAW,
    baseline_clean,
    baseline_raw,
    baselines_on_disk,
)
from tilekit.reports.compare import CompareError, check_settle_log, compare, figure_of, settled_records
from tilekit.reports.records import BASELINE_BACKENDS, PORT_BACKEND, clean_text, parse_log, read_text

VERDICTS = ("DONE", "INVESTIGATE", "BLOCKED")
SEVERITIES = ("DONE", "MILD_GAP", "MODERATE_GAP", "LARGE_GAP", "MISSING_DATA")
CORRECTNESS_VERDICTS = ("ALL_PASS", "FAIL", "BLOCKED")
PYTEST_HEADER = (("platform ", "platform"), ("rootdir:", "rootdir:"), ("plugins:", "plugins:"))


# ---------------------------------------------------------------------------------------------
# Pure checks: text in, problems out


def check_pytest_header(text: str) -> list[str]:
    lines = text.splitlines()
    return [
        f"no line starting with {shown!r} (pytest's header was cut from the log)"
        for prefix, shown in PYTEST_HEADER
        if not any(line.startswith(prefix) for line in lines)
    ]


def check_sanitized(clean: str, raw: str | None, kernel: str, backend: str) -> list[str]:
    """A sanitized log holds complete valid blocks only and equals what its raw log sanitizes to."""
    parsed = parse_log(clean, kernel, backend)
    problems = [f"line {r.line}: rejected block ({r.reason})" for r in parsed.rejected]
    if not problems and clean_text(parsed.records) != clean:
        problems.append("holds text outside the record blocks")
    if raw is not None and clean_text(parse_log(raw, kernel, backend).records) != clean:
        problems.append("differs from what its raw log sanitizes to (stale: re-run make report)")
    return problems


def check_settle_sanitized(clean: str, raw: str, kernel: str) -> list[str]:
    """The settle log's clean form (records of every backend, each with a valid `settle` object)
    holds complete valid blocks only and equals what its raw log sanitizes to."""
    parsed = check_settle_log(parse_log(clean, kernel))
    problems = [f"line {r.line}: rejected block ({r.reason})" for r in parsed.rejected]
    if not problems and clean_text(parsed.records) != clean:
        problems.append("holds text outside the record blocks")
    if clean_text(check_settle_log(parse_log(raw, kernel)).records) != clean:
        problems.append("differs from what its raw log sanitizes to (stale: re-run make report)")
    return problems


def _single(lines: list[str], pattern: str, what: str, problems: list[str]):
    found = [m for m in (re.fullmatch(pattern, line) for line in lines) if m]
    if len(found) != 1:
        problems.append(f"expected exactly one {what} line, found {len(found)}")
        return None
    return found[0]


def parse_performance_md(text: str) -> tuple[dict, list[str]]:
    """The machine-read lines of performance.md, and the structure problems found."""
    lines = text.splitlines()
    problems: list[str] = []
    fields: dict = {}
    first = re.fullmatch(r"VERDICT: (\w+)", lines[0]) if lines else None
    if not first or first.group(1) not in VERDICTS:
        problems.append(f"line 1 must be `VERDICT: {'|'.join(VERDICTS)}`, is {lines[0]!r}" if lines else "empty file")
    else:
        fields["verdict"] = first.group(1)
    number = r"(nan|\d+\.\d{4})"
    if m := _single(lines, rf"geomean_ratio={number}", "`geomean_ratio=X.XXXX`", problems):
        fields["geomean"] = m.group(1)
    if m := _single(lines, r"Geo-mean ratio: (n/a|\d+\.\d{2}x)(?: .*)?", "`Geo-mean ratio: X.XXx`", problems):
        fields["geomean_short"] = m.group(1)
    if m := _single(lines, r"Severity: (\w+)", "`Severity:`", problems):
        if m.group(1) in SEVERITIES:
            fields["severity"] = m.group(1)
        else:
            problems.append(f"Severity {m.group(1)!r} is not one of {', '.join(SEVERITIES)}")
    if m := _single(lines, rf"geomean_ratio_ci95=\[{number},{number}\]", "`geomean_ratio_ci95=[lo,hi]`", problems):
        fields["ci95"] = (m.group(1), m.group(2))
    refs = [m for m in (re.fullmatch(r"Reference: (\S+) \((.*)\)", line) for line in lines) if m]
    if refs:
        fields["reference"], fields["forced"] = refs[0].group(1), refs[0].group(2).startswith("chosen with --reference")
    elif fields.get("verdict") in ("DONE", "INVESTIGATE"):
        problems.append("no `Reference: <backend> (...)` line")
    fields["images"] = [m.group(1) for m in (re.fullmatch(r"!\[[^\]]*\]\(([^)\s]+)\)", line) for line in lines) if m]
    logs_at = next((i for i, line in enumerate(lines) if line.startswith("## Logs")), None)
    if logs_at is None:
        problems.append("no `## Logs` section")
    else:
        fields["logs"] = [line[2:] for line in lines[logs_at + 1 :] if line.startswith("- ")]
    return fields, problems


def _expected(c) -> dict:
    def fmt(value):
        return "nan" if value is None else f"{value:.4f}"

    return {
        "verdict": c.verdict,
        "severity": c.severity,
        "geomean": fmt(c.geomean),
        "geomean_short": "n/a" if c.geomean is None else f"{c.geomean:.2f}x",
        "ci95": (fmt(c.ci95[0]), fmt(c.ci95[1])) if c.ci95 else ("nan", "nan"),
        "reference": c.reference,
    }


def check_performance_numbers(
    text: str, kernel: str, port_clean: str, baselines_clean: dict[str, str], settle_clean: str | None = None
) -> list[str]:
    """Recompute geomean, interval, severity, verdict and reference (with the settle log's records
    and the figure the report names, where there is one); any disagreement is a problem."""
    fields, problems = parse_performance_md(text)
    if problems:
        return ["cannot recompute: the report's structure is broken"]
    port = parse_log(port_clean, kernel, PORT_BACKEND).records
    baselines = {b: parse_log(t, kernel, b).records for b, t in baselines_clean.items()}
    reference = fields.get("reference") if fields.get("forced") else None
    try:
        settled = settled_records(settle_clean, kernel)
        want = _expected(compare(kernel, port, baselines, reference=reference, settled=settled, figure=figure_of(text)))
    except CompareError as exc:
        return [f"the sanitized logs cannot be compared: {exc}"]
    return [
        f"{key}: report says {fields.get(key)!r}, the sanitized logs give {want[key]!r}"
        for key in ("verdict", "severity", "geomean", "geomean_short", "ci95", "reference")
        if key in want and (key != "reference" or want[key] is not None) and fields.get(key) != want[key]
    ]


def check_correctness_md(text: str, junit: str, raw_log: str | None, kernel: str) -> list[str]:
    """Structure of correctness.md, and its verdict and counts recomputed from the JUnit XML."""
    lines = text.splitlines()
    problems = []
    first = re.fullmatch(r"VERDICT: (\w+)", lines[0]) if lines else None
    verdict = first.group(1) if first and first.group(1) in CORRECTNESS_VERDICTS else None
    if verdict is None:
        problems.append(f"line 1 must be `VERDICT: {'|'.join(CORRECTNESS_VERDICTS)}`")
    summary = _single(lines, r"Summary: (\d+) passed, (\d+) failed, (\d+) skipped", "`Summary:`", problems)
    if not any(re.fullmatch(r"\|\s*Test\s*\|\s*Config\s*\|\s*Result\s*\|\s*Error\s*\|", line) for line in lines):
        problems.append("no `| Test | Config | Result | Error |` table")
    for key in ("fail_class", "host_fix", "kernel_followup", "pytest_log"):
        _single(lines, rf"{key}:( .*)?", f"`{key}:`", problems)
    block = [line for line in lines if line.startswith("block_class:")]
    if verdict == "BLOCKED" and not any(re.fullmatch(r"block_class: (env|host|kernel)", b) for b in block):
        problems.append("BLOCKED without a `block_class: env|host|kernel` line")
    try:
        result = classify(parse_junit(junit), raw_log or "")
    except MalformedInput as exc:
        return problems + [str(exc)]
    if verdict is not None and verdict != result.verdict:
        problems.append(f"verdict: report says {verdict}, the JUnit XML gives {result.verdict}")
    counts = (result.passed, result.failed, result.skipped)
    if summary and tuple(int(g) for g in summary.groups()) != counts:
        problems.append(
            f"Summary: report says {summary.group(0)!r}, the JUnit XML gives "
            f"{counts[0]} passed, {counts[1]} failed, {counts[2]} skipped"
        )
    rows = [line for line in lines if re.match(r"\| .* \| (PASSED|FAILED|ERROR|SKIPPED) +\|", line)]
    if len(rows) != len(result.cases):
        problems.append(f"the table has {len(rows)} rows, the JUnit XML {len(result.cases)} cases")
    return problems


# ---------------------------------------------------------------------------------------------
# The checks of one kernel folder


class Check:
    def __init__(self, description: str, problems: list[str]):
        self.description, self.problems = description, problems


def _read(kernel_dir: str, rel: str) -> str | None:
    path = os.path.join(kernel_dir, rel)
    return read_text(path) if os.path.isfile(path) else None


def run_checks(kernel: str, kernel_dir: str, baselines: list[str] | None = None) -> list[Check]:
    def path(rel: str) -> str:
        return os.path.join(kernel_dir, rel)

    def missing(rel: str, target: str) -> list[str]:
        return [f"{path(rel)} is missing; `make KERNEL={kernel} {target}` writes it"]

    checks = []

    def check(description: str, problems: list[str]) -> None:
        checks.append(Check(description, problems))

    build = _read(kernel_dir, BUILD_LOG)
    check(
        f"test -s {path(BUILD_LOG)}",
        missing(BUILD_LOG, "build") if build is None else ([] if build.strip() else [f"{path(BUILD_LOG)} is empty"]),
    )

    raw_correctness = _read(kernel_dir, CORRECTNESS_LOG)
    check(
        f"pytest header (platform, rootdir:, plugins:) in {path(CORRECTNESS_LOG)}",
        missing(CORRECTNESS_LOG, "test") if raw_correctness is None else check_pytest_header(raw_correctness),
    )
    junit = _read(kernel_dir, JUNIT)
    correctness = _read(kernel_dir, CORRECTNESS_MD)
    check(
        f"{path(CORRECTNESS_MD)}: structure; verdict and counts recomputed from {path(JUNIT)}",
        missing(JUNIT, "test")
        if junit is None
        else missing(CORRECTNESS_MD, "test")
        if correctness is None
        else check_correctness_md(correctness, junit, raw_correctness, kernel),
    )

    backends = baselines if baselines is not None else baselines_on_disk(kernel_dir)
    if not backends:
        check(f"a baseline raw log {path(baseline_raw('<backend>'))}", missing(baseline_raw("<backend>"), "baseline"))
    logs = [(PORT_BACKEND, PORT_RAW, PORT_CLEAN, "perf")] + [
        (b, baseline_raw(b), baseline_clean(b), "baseline") for b in backends
    ]
    cleans: dict[str, str] = {}
    for backend, raw_rel, clean_rel, target in logs:
        raw, clean = _read(kernel_dir, raw_rel), _read(kernel_dir, clean_rel)
        problems = (
            missing(raw_rel, target)
            if raw is None
            else missing(clean_rel, "report")
            if clean is None
            else check_sanitized(clean, raw, kernel, backend)
        )
        check(f"{path(clean_rel)} holds complete valid blocks only and matches {path(raw_rel)}", problems)
        if clean is not None:
            cleans[backend] = clean
    settle_raw, settle_clean = _read(kernel_dir, SETTLE_RAW), _read(kernel_dir, SETTLE_CLEAN)
    if settle_raw is not None:  # make settle ran
        problems = (
            missing(SETTLE_CLEAN, "report")
            if settle_clean is None
            else check_settle_sanitized(settle_clean, settle_raw, kernel)
        )
        check(f"{path(SETTLE_CLEAN)} holds complete valid settled blocks only and matches {path(SETTLE_RAW)}", problems)
    check(
        f"test -f {path(INVESTIGATION)}",
        [] if _read(kernel_dir, INVESTIGATION) is not None else missing(INVESTIGATION, "perf"),
    )

    perf = _read(kernel_dir, PERFORMANCE_MD)
    if perf is None:
        check(f"{path(PERFORMANCE_MD)}: structure", missing(PERFORMANCE_MD, "perf"))
        return checks
    fields, structure = parse_performance_md(perf)
    structure += [f"listed log {path(p)} does not exist" for p in fields.get("logs", []) if not os.path.exists(path(p))]
    charts_dir = os.path.dirname(path(PERFORMANCE_MD))  # image links are relative to the report
    structure += [
        f"links to the chart {os.path.normpath(os.path.join(charts_dir, p))}, which does not exist; "
        f"`make KERNEL={kernel} report` draws it"
        for p in fields.get("images", [])
        if not os.path.isfile(os.path.join(charts_dir, p))
    ]
    check(f"{path(PERFORMANCE_MD)}: structure (VERDICT, geomean_ratio=, Severity, interval, logs, chart)", structure)
    if PORT_BACKEND in cleans:
        numbers = check_performance_numbers(
            perf, kernel, cleans[PORT_BACKEND], {b: t for b, t in cleans.items() if b != PORT_BACKEND}, settle_clean
        )
    else:
        numbers = missing(PORT_CLEAN, "perf")
    check(f"{path(PERFORMANCE_MD)}: geomean, interval and verdict recomputed from the sanitized logs", numbers)
    return checks


def render(checks: list[Check]) -> str:
    lines = ["<VALIDATOR_OUTPUT>"]
    for check in checks:
        lines += [f"$ {check.description}", f"exit={1 if check.problems else 0}"]
    return "\n".join(lines + ["</VALIDATOR_OUTPUT>"]) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tilekit validate", description="Check every output file of a kernel."
    )
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--dir", required=True, help="the kernel's output folder, e.g. out/rms_norm")
    parser.add_argument(
        "--baselines",
        help="space- or comma-separated baselines that must be present "
        f"(default: those with a raw log; known: {' '.join(BASELINE_BACKENDS)})",
    )
    args = parser.parse_args(argv)
    wanted = args.baselines.replace(",", " ").split() if args.baselines else None
    checks = run_checks(args.kernel, args.dir, wanted)
    sys.stdout.write(render(checks))
    sys.stdout.flush()
    for check in checks:
        for problem in check.problems:
            print(f"validate: FAILED {check.description}: {problem}", file=sys.stderr)
    failed = sum(bool(c.problems) for c in checks)
    print(f"validate: {len(checks) - failed}/{len(checks)} checks passed", file=sys.stderr)
    return 1 if failed else 0
