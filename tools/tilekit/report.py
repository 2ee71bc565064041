"""Render reports/performance.md and reports/correctness.md (DESIGN.md, "Reports").

``python -m tilekit report --kernel K --dir out/K`` re-sanitizes every raw perf log under
``reports/logs/``, compares, and renders both reports from what is on disk (no GPU). Rendering is
pure and deterministic (no timestamps, natural config order), so running it twice gives
byte-identical files; files are written atomically.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from tilekit import charts
from tilekit.compare import BANDS, Comparison, CompareError, band, compare, straddled_edges
from tilekit.records import (BASELINE_BACKENDS, INVESTIGATION_HEADER, PORT_BACKEND, ParsedLog, clean_text,
                             investigation_text, parse_log, read_text, write_atomic)

ENV_KEYS = ("gpu", "driver", "cuda", "torch", "triton", "cuda_tile", "cutile_crate")


# ---------------------------------------------------------------------------------------------
# The output tree (DESIGN.md, Make interface); every path is relative to the kernel's folder.

PORT_RAW = "reports/logs/perf_cutile_rs.full.txt"
PORT_CLEAN = "perf_cutile_rs.txt"
INVESTIGATION = "reports/logs/perf_investigation.log"
PERFORMANCE_MD = "reports/performance.md"
PERFORMANCE_CHART = "reports/performance.svg"
CORRECTNESS_MD = "reports/correctness.md"
CORRECTNESS_LOG = "correctness_cutile_rs.txt"
JUNIT = "reports/logs/correctness.junit.xml"
BUILD_LOG = "reports/build.log"


def baseline_raw(backend: str) -> str:
    return f"reports/logs/baseline_perf_{backend}.full.txt"


def baseline_clean(backend: str) -> str:
    return f"baseline_perf_{backend}.txt"


def baselines_on_disk(kernel_dir: str) -> list[str]:
    """Backends that have a raw baseline log, in name order."""
    pattern = os.path.join(kernel_dir, baseline_raw("*"))
    names = [os.path.basename(p)[len("baseline_perf_"):-len(".full.txt")] for p in glob.glob(pattern)]
    return sorted(names)


class MissingInput(Exception):
    """An input file is absent; the message names the file and the make target that writes it."""


# ---------------------------------------------------------------------------------------------
# Small formatting helpers

def _ms(value) -> str:
    return "-" if value is None else f"{value:.6f}"


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def markdown_table(rows: list[list[str]], headers: list[str]) -> str:
    """A GitHub pipe table of preformatted cells, columns padded to their widest cell.

    Written here rather than with tabulate: tabulate infers a type for every cell, which took
    most of the 2 s budget on a 10,000-config report whose cells are all strings already.
    """
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_label(config: dict, drop=("dtype", "variant")) -> str:
    items = [f"{k}={v if isinstance(v, (int, float, str)) else json.dumps(v)}"
             for k, v in sorted(config.items()) if k not in drop]
    return ", ".join(items) or "-"


def group_title(config: dict) -> tuple:
    """(variant, dtype): one table per dtype, per (variant, dtype) when configs name a variant."""
    return (str(config["variant"]) if "variant" in config else "", str(config.get("dtype", "")))


def _title_text(key: tuple) -> str:
    variant, dtype = key
    parts = ([f"variant {variant}"] if variant else []) + ([dtype] if dtype else [])
    return ", ".join(parts) or "all configs"


def peak_share(record) -> tuple[float, float | None, str] | None:
    """(throughput, % of peak or None, unit) of the port's record, GB/s preferred over TFLOP/s;
    None when the record has neither. The table's columns and the chart both read it."""
    if record is None:
        return None
    for value_key, peak_key, unit in (("gbps", "peak_gbps", "GB/s"), ("tflops", "peak_tflops", "TFLOP/s")):
        value = record.number(value_key)
        if value is not None:
            peak = record.number(peak_key)
            return value, (100 * value / peak if peak else None), unit
    return None


def throughput(record) -> tuple[str, str]:
    """(value, % of peak) of the port's record as the table prints them; '-' when absent."""
    share = peak_share(record)
    if share is None:
        return "-", "-"
    value, pct, _ = share
    return f"{value:.1f}", "-" if pct is None else f"{pct:.1f}%"


def _throughput_header(rows) -> str:
    records = [r.port for r in rows if r.port is not None]
    if any(r.number("gbps") is not None for r in records):
        return "GB/s"
    if any(r.number("tflops") is not None for r in records):
        return "TFLOP/s"
    return "GB/s"


# ---------------------------------------------------------------------------------------------
# performance.md

@dataclass
class PerfInputs:
    """What the performance report needs besides the comparison: logs, parsed, with their names."""
    kernel: str
    port: ParsedLog
    baselines: dict  # backend -> ParsedLog
    logs: list = field(default_factory=list)  # relative paths shown in the report
    notes: list = field(default_factory=list)  # e.g. a missing baseline log


def blocked_hint(parsed: ParsedLog) -> str:
    """Why a log holds no valid record, from what pytest printed (skip reasons first)."""
    skips = [o for o in parsed.outcomes if o.status == "SKIPPED"]
    failures = [o for o in parsed.outcomes if o.status in ("FAILED", "ERROR")]
    parts = []
    if skips:
        grouped: dict[tuple[str, str], int] = {}  # the stage logs name each case: one line per reason
        for o in skips:
            grouped[(o.case, o.reason)] = grouped.get((o.case, o.reason), 0) + o.count
        reasons = "; ".join(f"[{count}] {case}: {reason}" for (case, reason), count in grouped.items())
        parts.append(f"pytest skipped {sum(o.count for o in skips)} cases ({reasons})")
    if failures:
        first = failures[0]
        parts.append(f"{len(failures)} cases failed or errored (first: {first.status} {first.case} - {first.reason})")
    if parsed.rejected:
        parts.append(f"{len(parsed.rejected)} blocks rejected (see {INVESTIGATION})")
    if parsed.passed and not parsed.records:
        parts.append(f"{parsed.passed} cases passed but printed no record block (pytest run without --print-record?)")
    if not parts:
        parts.append("the log holds no test result (empty run, collection error, or killed before the first case)")
    return "; ".join(parts)


def _headline(c: Comparison) -> list[str]:
    lines = [f"Severity: {c.severity}"]
    if c.geomean is None:
        lines += ["geomean_ratio=nan", "Geo-mean ratio: n/a", "geomean_ratio_ci95=[nan,nan]"]
    else:
        low, high = c.ci95
        lines += [f"geomean_ratio={c.geomean:.4f}",
                  f"Geo-mean ratio: {c.geomean:.2f}x ({PORT_BACKEND} / {c.reference} over "
                  f"{len(c.matched)} matched configs; lower is faster)",
                  f"geomean_ratio_ci95=[{low:.4f},{high:.4f}]"]
        edges = straddled_edges(low, high)
        if edges:
            lines.append(f"Note: the 95 % interval straddles the band edge(s) {', '.join(f'{e:.2f}' for e in edges)}; "
                         "a re-run may land in another band.")
        if c.severity == "MISSING_DATA":
            lines.append(f"Band of the geomean over the matched configs alone: {c.band_of_geomean}")
    if c.verdict == "BLOCKED":
        lines.append(f"Blocked: {c.blocked_reason}")
    else:
        lines.append(f"Reference: {c.reference} ({c.reference_reason})")
    return lines


def _baselines_table(c: Comparison) -> list[str]:
    rows = [[s.backend + (" (reference)" if s.backend == c.reference else ""), str(s.configs),
             _ms(s.common_geomean_ms), _ratio(s.ratio_geomean)] for s in c.baselines]
    headers = ["baseline", "configs", "geomean ms (configs all baselines have)", f"{PORT_BACKEND} / baseline (geomean)"]
    return ["## Baselines", "", markdown_table(rows, headers)]


# The row verdict where a row has no ratio; otherwise the band of its ratio.
ROW_STATUS = {"missing_port": "MISSING", "missing_reference": "NO_REFERENCE", "gpu_mismatch": "GPU_MISMATCH"}


def grouped_rows(c: Comparison) -> list[tuple[tuple, list]]:
    """(group key, rows) in the report's order: groups sorted, rows in natural order within."""
    groups: dict[tuple, list] = {}
    for row in c.rows:
        groups.setdefault(group_title(row.config), []).append(row)
    return [(key, groups[key]) for key in sorted(groups)]


def _config_tables(c: Comparison) -> list[str]:
    backends = [s.backend for s in c.baselines]
    out = []
    for key, rows in grouped_rows(c):
        unit = _throughput_header(rows)
        headers = (["config", "reference ms", f"{PORT_BACKEND} ms", "ratio", unit, "% of peak", "verdict"]
                   + [f"vs {b}" for b in backends] + ["best baseline", "vs best"])
        table = []
        for row in rows:
            value, share = throughput(row.port)
            verdict = ROW_STATUS.get(row.status) or band(row.ratio)
            table.append([_cell(config_label(row.config)), _ms(row.reference_ms),
                          _ms(row.port.median_ms if row.port else None), _ratio(row.ratio), value, share, verdict]
                         + [_ratio(row.ratio_to(b)) for b in backends]
                         + [row.best_backend or "-", _ratio(row.ratio_to_best)])
        out += [f"## {_title_text(key)}", "", markdown_table(table, headers), ""]
    return out


def _lists(c: Comparison) -> list[str]:
    out = []
    flagged = [r for r in c.matched if band(r.ratio) != "DONE"]
    if flagged:
        out += [f"## Configs above {BANDS[0][0]:.2f} (flagged; the verdict follows the geomean)", ""]
        out += [f"- {r.config_key}: ratio {r.ratio:.4f} ({band(r.ratio)})" for r in flagged] + [""]
    if c.missing:
        out += ["## Missing data (these configs make the verdict INVESTIGATE, MISSING_DATA)", ""]
        for r in c.missing:
            why = (f"no valid {PORT_BACKEND} median" if r.status == "missing_port"
                   else r.mismatch_note(c.reference) if r.status == "gpu_mismatch"
                   else f"no valid median from the reference ({c.reference})")
            out.append(f"- {r.config_key}: {why}; see {INVESTIGATION}")
        out.append("")
    if c.unmatched:
        out += ["## Unmatched port configs (no baseline has them; not in the geomean)", ""]
        out += [f"- {r.config_key}: {PORT_BACKEND} {r.median_ms:.6f} ms" for r in c.unmatched] + [""]
    return out


def record_env(record) -> dict:
    """The record's `env`, with a top-level `gpu` key folded in when env lacks one."""
    env = dict(record.env())
    if "gpu" not in env and "gpu" in record.fields:
        env["gpu"] = record.fields["gpu"]
    return env


def _env_lines(inputs: PerfInputs, c: Comparison) -> list[str]:
    port = inputs.port.records
    out = ["## Environment", ""]
    if not port:
        return out + ["No valid port record, so no environment was recorded.", ""]
    env = record_env(port[0])
    keys = [k for k in ENV_KEYS if k in env] + sorted(k for k in env if k not in ENV_KEYS)
    rows = [[k, _cell(str(env[k]))] for k in keys]
    rows.append(["timer", ", ".join(sorted({r.timer for r in port}))])
    if "l2_flush" in port[0].fields:
        rows.append(["l2_flush", port[0].fields["l2_flush"]])
    out += [markdown_table(rows, ["key", f"{PORT_BACKEND} value"]), ""]
    if not env:
        out += ["The records carry no `env`: GPU, driver and versions are unknown.", ""]
    if len({r.fields.get("env") for r in port}) > 1:
        out.append(f"- Note: the {PORT_BACKEND} records do not all carry the same env.")
    for backend, parsed in sorted(inputs.baselines.items()):
        if not parsed.records:
            continue
        other = record_env(parsed.records[0])
        differ = sorted(k for k in set(env) | set(other) if env.get(k) != other.get(k))
        if differ:
            out.append(f"- Note: {backend}'s env differs from the port's in: " + ", ".join(
                f"{k} ({other.get(k, 'absent')} vs {env.get(k, 'absent')})" for k in differ))
        timers = sorted({r.timer for r in parsed.records})
        if timers != sorted({r.timer for r in port}):
            out.append(f"- Warning: {backend} was timed with {', '.join(timers)}, the port with "
                       f"{', '.join(sorted({r.timer for r in port}))}; ratios mix timers.")
    return out + ([""] if out[-1] != "" else [])


def _investigation_summary(inputs: PerfInputs) -> list[str]:
    out = ["## Investigation", ""]
    for label, parsed in [(PORT_BACKEND, inputs.port)] + sorted(inputs.baselines.items()):
        counts = {s: sum(o.count for o in parsed.outcomes if o.status == s) for s in ("FAILED", "ERROR", "SKIPPED")}
        out.append(f"- {label}: {len(parsed.records)} valid blocks, {len(parsed.rejected)} rejected, "
                   f"{counts['FAILED']} failed, {counts['ERROR']} errored, {counts['SKIPPED']} skipped")
    out += [f"- Details: {INVESTIGATION}", ""]
    return out


def render_performance(c: Comparison, inputs: PerfInputs, chart_line: str | None = None) -> str:
    """The report's text; ``chart_line`` (the image, or why there is none) goes after the notes."""
    lines = [f"VERDICT: {c.verdict}", "", f"# {c.kernel}: {PORT_BACKEND} performance", ""]
    lines += _headline(c) + [""]
    lines += [f"- {n}" for n in c.notes + inputs.notes] + ([""] if c.notes or inputs.notes else [])
    lines += [chart_line, ""] if chart_line else []
    if c.verdict != "BLOCKED":
        lines += _baselines_table(c) + [""] + _config_tables(c) + _lists(c)
    elif c.unmatched:
        lines += _lists(c)
    lines += _env_lines(inputs, c) + _investigation_summary(inputs)
    lines += ["## Logs (relative to the kernel's output folder)", ""] + [f"- {p}" for p in inputs.logs]
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------
# reports/performance.svg: the numbers of the tables above, drawn by tilekit.charts

def chart_data(c: Comparison) -> charts.PerformanceChart:
    """Each row's ratio to every baseline and the port's % of peak, as the tables print them."""
    backends = tuple(s.backend for s in c.baselines)
    bars = []
    for key, rows in grouped_rows(c):
        for row in rows:
            share = peak_share(row.port)
            value, pct = throughput(row.port)
            text = ("no throughput recorded" if share is None else f"{value} {share[2]}, no peak recorded"
                    if share[1] is None else f"{pct} · {value} {share[2]}")
            bars.append(charts.ConfigBars(
                "" if key == ("", "") else _title_text(key), config_label(row.config),
                {b: row.ratio_to(b) for b in backends if row.ratio_to(b) is not None},
                None if share is None else share[1], text, ROW_STATUS.get(row.status, "")))
    return charts.PerformanceChart(c.kernel, PORT_BACKEND, c.reference, backends, tuple(bars))


def write_chart(c: Comparison, kernel_dir: str) -> str | None:
    """Draw reports/performance.svg; return the report's line for it: the image, or why there is
    no chart; None on BLOCKED (nothing to draw). A chart never costs the report: a failure to draw
    becomes that one line, and no stale chart is left beside a report that does not show it."""
    path = _path(kernel_dir, PERFORMANCE_CHART)
    why = None
    if c.verdict == "BLOCKED":
        pass
    elif len(c.rows) > charts.MAX_CONFIGS:
        why = f"{len(c.rows)} configs, charts are drawn up to {charts.MAX_CONFIGS}; the tables hold every config"
    elif missing := charts.missing_matplotlib():
        why = f"{missing}; `make setup` installs it, then `make KERNEL={c.kernel} report` draws the chart"
    else:
        try:
            charts.write_performance(chart_data(c), path)
            return (f"![{c.kernel}: {PORT_BACKEND} time relative to each baseline per config, and % of peak]"
                    f"({os.path.relpath(PERFORMANCE_CHART, os.path.dirname(PERFORMANCE_MD))})")
        except Exception as exc:  # noqa: BLE001 - whatever breaks in matplotlib, the report is written
            why = f"drawing failed ({type(exc).__name__}: {' '.join(str(exc).split())})"
    if os.path.exists(path):
        os.remove(path)
    return None if why is None else f"Chart: not drawn: {why}"


# ---------------------------------------------------------------------------------------------
# correctness.md, from pytest's JUnit XML

@dataclass(frozen=True)
class Case:
    test: str
    config: str
    result: str  # PASSED | FAILED | ERROR | SKIPPED
    message: str
    collection: bool = False  # an ERROR collecting a module


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
        raise MalformedInput(f"{path}:{line}: not valid JUnit XML ({exc}); the run was probably cut off: "
                             "re-run the correctness stage (make test)") from None
    cases = []
    for node in root.iter("testcase"):
        name = node.get("name", "")
        module = node.get("classname", "").rsplit(".", 1)[-1]
        test, _, config = name.partition("[")
        outcome = next((child for child in node if child.tag in ("failure", "error", "skipped")), None)
        tags = {child.tag for child in node}
        result = ("FAILED" if "failure" in tags else "ERROR" if "error" in tags
                  else "SKIPPED" if "skipped" in tags else "PASSED")
        message = "" if outcome is None else (outcome.get("message") or (outcome.text or "").strip())
        if result in ("FAILED", "ERROR"):
            bad = node.find("failure") if result == "FAILED" else node.find("error")
            message = bad.get("message") or (bad.text or "").strip()
        cases.append(Case(f"{module}::{test}" if module else test, config.rstrip("]"), result, message,
                          collection=result == "ERROR" and message == "collection failure"))
    return cases


_KERNEL_FAILURE = re.compile(r"not close|mismatch|allclose|nan\b|Tensor-likes|-3\b|JIT|compile", re.I)
_ENV_BLOCK = re.compile(r"cuda|gpu|driver|cupti|nvidia|no module named|device", re.I)


def classify(cases: list[Case], raw_log: str) -> CorrectnessResult:
    passed = sum(c.result == "PASSED" for c in cases)
    failed = sum(c.result in ("FAILED", "ERROR") for c in cases)
    skipped = sum(c.result == "SKIPPED" for c in cases)
    really_failed = sum(c.result == "FAILED" for c in cases)
    bad = [c for c in cases if c.result in ("FAILED", "ERROR")]
    # A case skipped because this machine cannot run it (no GPU, no driver) did not verify the port:
    # a run with such skips is not ALL_PASS (a skip by design, e.g. an unsupported dtype, is).
    env_skipped = [c for c in cases if c.result == "SKIPPED" and _ENV_BLOCK.search(c.message)]
    blocked = (any(c.collection for c in cases) or (passed == 0 and really_failed == 0)
               or (bool(env_skipped) and not bad))
    kernel_bad = [c for c in bad if not c.collection and _KERNEL_FAILURE.search(c.message + " " + c.config)]
    host_bad = [c for c in bad if c not in kernel_bad]
    if blocked:
        verdict = "BLOCKED"
        texts = " ".join(c.message for c in cases if c.result != "PASSED") or raw_log[-2000:]
        block_class = ("env" if _ENV_BLOCK.search(texts) and not host_bad
                       else "kernel" if kernel_bad and not host_bad else "host")
        if not cases:
            block_class = "env" if _ENV_BLOCK.search(raw_log[-4000:]) else "host"
    else:
        verdict, block_class = ("FAIL" if bad else "ALL_PASS"), ""
    fail_class = "" if not bad or verdict == "BLOCKED" else ("host" if host_bad else "kernel")
    host_fix = (f"{len(host_bad)} case(s) fail in the host code (op.py, ffi.rs, the test): fix those first; "
                f"first: {host_bad[0].test}[{host_bad[0].config}]: {_first_line(host_bad[0].message)}") if host_bad else ""
    kernel_followup = (f"{len(kernel_bad)} case(s) give wrong results from the device code (kernel.rs); "
                       f"first: {kernel_bad[0].test}[{kernel_bad[0].config}]: {_first_line(kernel_bad[0].message)}"
                       ) if kernel_bad else ""
    return CorrectnessResult(verdict, cases, passed, failed, skipped, fail_class, host_fix, kernel_followup,
                             block_class, env_skipped)


def _first_line(message: str, limit: int = 160) -> str:
    line = message.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def render_correctness(kernel: str, result: CorrectnessResult, raw_log: str | None) -> str:
    lines = [f"VERDICT: {result.verdict}", "", f"# {kernel}: {PORT_BACKEND} correctness", "",
             f"Summary: {result.passed} passed, {result.failed} failed, {result.skipped} skipped", ""]
    if raw_log is not None and re.search(r"^!+ stopping after \d+ failures? !+$", raw_log, re.M):
        lines += ["Note: pytest stopped at the first failure (-x); later cases did not run.", ""]
    if not result.cases:
        lines += ["Note: the JUnit XML holds no test case (empty selection or a run that never started).", ""]
    if result.env_skipped and result.passed:
        lines += [f"Note: {len(result.env_skipped)} case(s) were skipped because this machine cannot run them "
                  f"(first: {_first_line(result.env_skipped[0].message)}); the port is not verified on them.", ""]
    rows = [[_cell(c.test), _cell(c.config or "-"), c.result, _cell(_first_line(c.message)) or "-"]
            for c in result.cases]
    lines += [markdown_table(rows, ["Test", "Config", "Result", "Error"]), ""]
    lines += [f"fail_class: {result.fail_class}", f"host_fix: {result.host_fix}",
              f"kernel_followup: {result.kernel_followup}"]
    if result.verdict == "BLOCKED":
        lines.append(f"block_class: {result.block_class}")
    missing = "" if raw_log is not None else " (missing: make KERNEL=" + kernel + " test writes it)"
    lines += [f"pytest_log: {CORRECTNESS_LOG}{missing}", f"junit_xml: {JUNIT}"]
    return "\n".join(line.rstrip() for line in lines) + "\n"


# ---------------------------------------------------------------------------------------------
# I/O: sanitize what is on disk, then render

def _path(kernel_dir: str, rel: str) -> str:
    return os.path.join(kernel_dir, rel)


def load_perf(kernel: str, kernel_dir: str) -> PerfInputs:
    """Re-sanitize every raw perf log; write the clean logs and the investigation log."""
    raw = _path(kernel_dir, PORT_RAW)
    baselines = {b: parse_log(read_text(_path(kernel_dir, baseline_raw(b))), kernel, b)
                 for b in baselines_on_disk(kernel_dir)}
    if not os.path.isfile(raw):
        for b, parsed in baselines.items():  # `make baseline` alone still gets its clean logs
            write_atomic(_path(kernel_dir, baseline_clean(b)), clean_text(parsed.records))
        raise MissingInput(f"{raw}: missing; `make KERNEL={kernel} perf` writes it")
    port = parse_log(read_text(raw), kernel, PORT_BACKEND)
    # The clean logs and the investigation log first: a port timed without baselines keeps them.
    write_atomic(_path(kernel_dir, PORT_CLEAN), clean_text(port.records))
    sections = [investigation_text(f"{PORT_RAW} -> {PORT_CLEAN}", port)]
    logs = [PORT_RAW, PORT_CLEAN]
    for b, parsed in baselines.items():
        write_atomic(_path(kernel_dir, baseline_clean(b)), clean_text(parsed.records))
        sections.append(investigation_text(f"{baseline_raw(b)} -> {baseline_clean(b)}", parsed))
        logs += [baseline_raw(b), baseline_clean(b)]
    write_atomic(_path(kernel_dir, INVESTIGATION), INVESTIGATION_HEADER + "\n".join(sections))
    notes = []
    if not baselines:
        message = (f"{_path(kernel_dir, baseline_raw('<backend>'))}: no baseline raw log "
                   f"(backends {', '.join(BASELINE_BACKENDS)}); `make KERNEL={kernel} baseline` writes them")
        if port.records:
            raise MissingInput(f"{message} (wrote {_path(kernel_dir, PORT_CLEAN)}; no verdict without a baseline)")
        notes.append(message.replace(kernel_dir + os.sep, "", 1))
    return PerfInputs(kernel, port, baselines, logs + [INVESTIGATION], notes)


def compare_inputs(inputs: PerfInputs, reference: str | None = None) -> Comparison:
    labels = {PORT_BACKEND: PORT_RAW, **{b: baseline_raw(b) for b in inputs.baselines}}
    return compare(inputs.kernel, inputs.port.records, {b: p.records for b, p in inputs.baselines.items()},
                   reference=reference, blocked_hint=blocked_hint(inputs.port), labels=labels)


def build_correctness(kernel: str, kernel_dir: str) -> tuple[str, CorrectnessResult, bool]:
    junit = _path(kernel_dir, JUNIT)
    if not os.path.isfile(junit):
        raise MissingInput(f"{junit}: missing; `make KERNEL={kernel} test` writes it")
    raw_path = _path(kernel_dir, CORRECTNESS_LOG)
    raw = read_text(raw_path) if os.path.isfile(raw_path) else None
    result = classify(parse_junit(read_text(junit), junit), raw or "")
    return render_correctness(kernel, result, raw), result, raw is not None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tilekit report",
        description="Re-sanitize the raw logs of a kernel and render reports/performance.md and "
                    "reports/correctness.md (no GPU needed).")
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--dir", required=True, help="the kernel's output folder, e.g. out/rms_norm")
    parser.add_argument("--only", choices=("performance", "correctness"))
    parser.add_argument("--reference", choices=BASELINE_BACKENDS,
                        help="compare against this baseline instead of the winning one")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 unless performance is DONE and correctness is ALL_PASS")
    args = parser.parse_args(argv)
    status, verdicts = 0, []

    if args.only in (None, "performance"):
        try:
            inputs = load_perf(args.kernel, args.dir)
            comparison = compare_inputs(inputs, args.reference)
            chart_line = write_chart(comparison, args.dir)
            write_atomic(_path(args.dir, PERFORMANCE_MD), render_performance(comparison, inputs, chart_line))
            print(f"tilekit report: {_path(args.dir, PERFORMANCE_MD)}: VERDICT {comparison.verdict} "
                  f"({comparison.severity}, geomean_ratio="
                  f"{'nan' if comparison.geomean is None else f'{comparison.geomean:.4f}'})")
            for note in inputs.notes:
                print(f"tilekit report: note: {note}", file=sys.stderr)
            if chart_line and chart_line.startswith("Chart: "):
                print(f"tilekit report: note: {_path(args.dir, PERFORMANCE_CHART)}: {chart_line}", file=sys.stderr)
            verdicts.append(comparison.verdict == "DONE")
        except (MissingInput, CompareError) as exc:
            print(f"tilekit report: {exc}", file=sys.stderr)
            status = 2

    if args.only in (None, "correctness"):
        try:
            text, result, has_raw = build_correctness(args.kernel, args.dir)
            write_atomic(_path(args.dir, CORRECTNESS_MD), text)
            print(f"tilekit report: {_path(args.dir, CORRECTNESS_MD)}: VERDICT {result.verdict} "
                  f"({result.passed} passed, {result.failed} failed, {result.skipped} skipped)")
            if not has_raw:
                print(f"tilekit report: note: {_path(args.dir, CORRECTNESS_LOG)} is missing; "
                      f"`make KERNEL={args.kernel} test` writes it", file=sys.stderr)
            verdicts.append(result.verdict == "ALL_PASS")
        except (MissingInput, MalformedInput) as exc:
            print(f"tilekit report: {exc}", file=sys.stderr)
            status = 2

    if status == 0 and args.strict and not all(verdicts):
        print("tilekit report: --strict: a verdict is not DONE / ALL_PASS", file=sys.stderr)
        status = 1
    return status
