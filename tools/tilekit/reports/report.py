"""The performance report and the ``report`` CLI (DESIGN.md, "Reports").

``python -m tilekit report --kernel K --dir out/K`` re-sanitizes every raw perf log under
``reports/logs/``, compares, and renders reports/performance.md (here) and reports/correctness.md
(tilekit.reports.correctness) from what is on disk (no GPU). Rendering is pure and deterministic (no
timestamps, natural config order), so running it twice gives byte-identical files; files are
written atomically. Paths come from tilekit.reports.layout, table cells from tilekit.reports.markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field

from tilekit.reports import charts
from tilekit.reports.compare import (
    BANDS,
    FIGURES,
    SETTLE_BAND,
    Comparison,
    CompareError,
    band,
    check_settle_log,
    compare,
    straddled_edges,
)
from tilekit.reports.correctness import MalformedInput, build_correctness
from tilekit.reports.layout import (
    CORRECTNESS_LOG,
    CORRECTNESS_MD,
    INVESTIGATION,
    PERFORMANCE_CHART,
    PERFORMANCE_MD,
    PORT_CLEAN,
    PORT_RAW,
    SETTLE_CLEAN,
    SETTLE_RAW,
    MissingInput,
    baseline_clean,
    baseline_raw,
    baselines_on_disk,
)
from tilekit.reports.markdown import cell, markdown_table, ms_text, peak_share, ratio_text, throughput
from tilekit.reports.records import (
    BASELINE_BACKENDS,
    INVESTIGATION_HEADER,
    PORT_BACKEND,
    ParsedLog,
    clean_text,
    investigation_text,
    parse_log,
    read_text,
    write_atomic,
)

ENV_KEYS = ("gpu", "driver", "cuda", "torch", "triton", "cuda_tile", "cutile_crate")


# ---------------------------------------------------------------------------------------------
# Labels of configs and tables


def config_label(config: dict, drop=("dtype", "variant")) -> str:
    items = [
        f"{k}={v if isinstance(v, (int, float, str)) else json.dumps(v)}"
        for k, v in sorted(config.items())
        if k not in drop
    ]
    return ", ".join(items) or "-"


def group_title(config: dict) -> tuple:
    """(variant, dtype): one table per dtype, per (variant, dtype) when configs name a variant."""
    return (str(config["variant"]) if "variant" in config else "", str(config.get("dtype", "")))


def _title_text(key: tuple) -> str:
    variant, dtype = key
    parts = ([f"variant {variant}"] if variant else []) + ([dtype] if dtype else [])
    return ", ".join(parts) or "all configs"


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
    settle: ParsedLog | None = None  # the settle log (every backend, one process), when on disk


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
        lines += [
            f"geomean_ratio={c.geomean:.4f}",
            f"Geo-mean ratio: {c.geomean:.2f}x ({PORT_BACKEND} / {c.reference} over "
            f"{len(c.matched)} matched configs; lower is faster)",
            f"geomean_ratio_ci95=[{low:.4f},{high:.4f}]",
        ]
        edges = straddled_edges(low, high)
        if edges:
            lines.append(
                f"Note: the 95 % interval straddles the band edge(s) {', '.join(f'{e:.2f}' for e in edges)}; "
                "a re-run may land in another band."
            )
        if c.severity == "MISSING_DATA":
            lines.append(f"Band of the geomean over the matched configs alone: {c.band_of_geomean}")
    if c.settled_rows:
        lines.append(_settled_line(c))
    if c.verdict == "BLOCKED":
        lines.append(f"Blocked: {c.blocked_reason}")
    else:
        lines.append(f"Reference: {c.reference} ({c.reference_reason})")
    return lines


def _settled_line(c: Comparison) -> str:
    """How many configs were settled in one process, and their labels (of the figure each uses)."""
    labels = [r.settled.label for r in c.settled_rows]
    counts = [f"{labels.count(name)} {name}" for name in ("FASTER", "SAME", "SLOWER")]
    cold = sum(r.settled.figure != c.figure for r in c.settled_rows)
    figure = f"{c.figure} figure" + (f"; {cold} judged on the cold one, without a hot time" if cold else "")
    return f"Settled configs: {len(labels)} of {len(c.rows)} ({figure}): {', '.join(counts)}, {c.unsettled_count} UNSETTLED"


def _baselines_table(c: Comparison) -> list[str]:
    rows = [
        [
            s.backend + (" (reference)" if s.backend == c.reference else ""),
            str(s.configs),
            ms_text(s.common_geomean_ms),
            ratio_text(s.ratio_geomean),
        ]
        for s in c.baselines
    ]
    headers = ["baseline", "configs", "geomean ms (configs all baselines have)", f"{PORT_BACKEND} / baseline (geomean)"]
    return ["## Baselines", "", markdown_table(rows, headers)]


# The row verdict where a row has no ratio; otherwise the band of its ratio.
ROW_STATUS = {"missing_port": "MISSING", "missing_reference": "NO_REFERENCE", "gpu_mismatch": "GPU_MISMATCH"}
# Below this time a kernel's duration depends on where the allocator placed its tensors, by more
# than a close ratio's margin, and port and baselines are timed in separate processes
# (docs/reports.md, "Configs of a few µs").
FEW_US_MS = 0.010
FEW_US_TEXT = (
    "Port and baselines are timed in separate processes. At these durations a kernel's time depends "
    "on where its tensors lie: on the H200 one kernel and config took 2.21-2.77 µs across processes "
    "and allocation histories (rms_norm bf16 256×4096), and even in one process its ratio to a peer "
    "moved from 0.96 to 1.15 with what had run before it in the process (docs/reports.md, "
    '"Configs of a few µs"). Before reading a ratio within ~15 % of 1 here (at 2.5 µs; ~5 % at 7 µs), '
    "time the port and the baseline in one process, in more than one order and process "
    "(`scripts/sweep_variants.py --kernel K --nrep 100 --shapes ... --backends ...`), and compare "
    "the spread."
)


# The paragraph above the settled configs' table (docs/reports.md, "Settled in one process").
SETTLED_TEXT = (
    "Port and baselines timed in one process (`make KERNEL={kernel} settle`), interleaved in a seeded random "
    "order over several placements of their inputs, samples taken while the SM clock had dropped left out. "
    "Ratio = {port} / {reference}; its 95 % interval is a paired bootstrap over placements × repetitions. "
    "Label: SAME when the interval lies within 1 ± {band:g}, FASTER when it lies below 1, SLOWER when above, "
    "else UNSETTLED (time more, or accept a tie). Cold: the L2 flushed before each call (the contract); hot: "
    "back-to-back launches replayed from a CUDA graph, per launch. The times, the verdict cells and the geomean "
    "use the {figure} figure (`report --figure cold|hot`); a cold time is the geometric mean over placements of "
    "each placement's median. Spread: (max - min) of the per-placement medians / that mean."
)


def _interval_text(result: dict | None, why: str = "") -> tuple[str, str]:
    """(ratio [lo, hi], label) of a settle.settle result; ('- (why)', '-') without one."""
    if result is None:
        return cell(f"- ({why})"), "-"
    low, high = result["ci95"]
    return f"{result['ratio']:.4f} [{low:.4f}, {high:.4f}]", result["label"]


def _settled_section(c: Comparison) -> list[str]:
    rows = []
    for r in c.settled_rows:
        s = r.settled
        rows.append(
            [
                cell(config_label(r.config, drop=())),
                f"{s.port_ms * 1e3:.3f}",
                f"{s.reference_ms * 1e3:.3f}",
                *_interval_text(s.cold),
                *_interval_text(s.hot, s.hot_missing),
                f"{100 * s.cold['port_spread']:.1f}%",
                f"{100 * s.cold['base_spread']:.1f}%",
                f"{s.placements} × {s.laps}",
                f"{s.dropped[0]} / {s.dropped[1]}",
            ]
        )
    ref = c.reference
    headers = [
        "config",
        f"{PORT_BACKEND} µs",
        f"{ref} µs",
        "cold ratio [95 %]",
        "cold",
        "hot ratio [95 %]",
        "hot",
        f"{PORT_BACKEND} spread",
        f"{ref} spread",
        "placements × laps",
        f"dropped ({PORT_BACKEND} / {ref})",
    ]
    text = SETTLED_TEXT.format(kernel=c.kernel, port=PORT_BACKEND, reference=ref, band=SETTLE_BAND, figure=c.figure)
    return ["## Configs settled in one process", "", text, "", markdown_table(rows, headers), ""]


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
        headers = (
            ["config", "reference ms", f"{PORT_BACKEND} ms", "ratio", unit, "% of peak", "verdict"]
            + [f"vs {b}" for b in backends]
            + ["best baseline", "vs best"]
        )
        table = []
        for row in rows:
            value, share = throughput(row.port)
            # a settled row's verdict is its label: the band of one ratio at a few µs says too much
            verdict = ROW_STATUS.get(row.status) or (row.settled.label if row.settled else band(row.ratio))
            table.append(
                [
                    cell(config_label(row.config)),
                    ms_text(row.reference_ms),
                    ms_text(row.port_ms),
                    ratio_text(row.ratio),
                    value,
                    share,
                    verdict,
                ]
                + [ratio_text(row.ratio_to(b)) for b in backends]
                + [row.best_backend or "-", ratio_text(row.ratio_to_best)]
            )
        out += [f"## {_title_text(key)}", "", markdown_table(table, headers), ""]
    return out


def _lists(c: Comparison) -> list[str]:
    out = []
    flagged = [r for r in c.matched if band(r.ratio) != "DONE"]
    if flagged:
        out += [f"## Configs above {BANDS[0][0]:.2f} (flagged; the verdict follows the geomean)", ""]
        out += [f"- {r.config_key}: ratio {r.ratio:.4f} ({band(r.ratio)})" for r in flagged] + [""]
    if c.settled_rows:
        out += _settled_section(c)
    few = [r for r in c.matched if r.settled is None and min([r.port_ms, *r.baseline_ms.values()]) < FEW_US_MS]
    if few:
        out += [f"## Configs under {FEW_US_MS * 1e3:g} µs (a ratio near 1 is not settled by this table)", ""]
        out += [FEW_US_TEXT, ""]
        if c.settled_rows:
            out += [
                f"These configs have no {PORT_BACKEND} and {c.reference} records of one session in the settle log; "
                f'`make KERNEL={c.kernel} settle` times them in one process ("Configs settled in one process" above).',
                "",
            ]
        out += [
            f"- {r.config_key}: {PORT_BACKEND} {r.port_ms * 1e3:.3f} µs, ratio {r.ratio:.4f}, "
            f"best baseline {r.best_backend} {r.baseline_ms[r.best_backend] * 1e3:.3f} µs, vs best {r.ratio_to_best:.4f}"
            for r in few
        ] + [""]
    if c.missing:
        out += ["## Missing data (these configs make the verdict INVESTIGATE, MISSING_DATA)", ""]
        for r in c.missing:
            why = (
                f"no valid {PORT_BACKEND} median"
                if r.status == "missing_port"
                else r.mismatch_note(c.reference)
                if r.status == "gpu_mismatch"
                else f"no valid median from the reference ({c.reference})"
            )
            out.append(f"- {r.config_key}: {why}; see {INVESTIGATION}")
        out.append("")
    if c.unmatched:
        out += ["## Unmatched port configs (no baseline has them; not in the geomean)", ""]
        out += [f"- {r.config_key}: {PORT_BACKEND} {r.median_ms:.6f} ms" for r in c.unmatched] + [""]
    return out


def _variant_lines(inputs: PerfInputs) -> list[str]:
    """Which variant the port ran per config (its records' `variant`, where they name one)."""
    named = [r for r in inputs.port.records if "variant" in r.fields]
    if not named:
        return []
    out = [f"## Variants {PORT_BACKEND} ran (per config: autotune's pick, or the variant asked for)", ""]
    return out + [f"- {r.config_key}: {r.fields['variant']}" for r in named] + [""]


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
    rows = [[k, cell(str(env[k]))] for k in keys]
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
            out.append(
                f"- Note: {backend}'s env differs from the port's in: "
                + ", ".join(f"{k} ({other.get(k, 'absent')} vs {env.get(k, 'absent')})" for k in differ)
            )
        timers = sorted({r.timer for r in parsed.records})
        if timers != sorted({r.timer for r in port}):
            out.append(
                f"- Warning: {backend} was timed with {', '.join(timers)}, the port with "
                f"{', '.join(sorted({r.timer for r in port}))}; ratios mix timers."
            )
    return out + ([""] if out[-1] != "" else [])


def _investigation_summary(inputs: PerfInputs) -> list[str]:
    out = ["## Investigation", ""]
    settle = [("settle", inputs.settle)] if inputs.settle is not None else []
    for label, parsed in [(PORT_BACKEND, inputs.port)] + sorted(inputs.baselines.items()) + settle:
        counts = {s: sum(o.count for o in parsed.outcomes if o.status == s) for s in ("FAILED", "ERROR", "SKIPPED")}
        out.append(
            f"- {label}: {len(parsed.records)} valid blocks, {len(parsed.rejected)} rejected, "
            f"{counts['FAILED']} failed, {counts['ERROR']} errored, {counts['SKIPPED']} skipped"
        )
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
    lines += _variant_lines(inputs) + _env_lines(inputs, c) + _investigation_summary(inputs)
    lines += ["## Logs (relative to the kernel's output folder)", ""] + [f"- {p}" for p in inputs.logs]
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------
# reports/performance.svg: the numbers of the tables above, drawn by tilekit.reports.charts


def chart_data(c: Comparison) -> charts.PerformanceChart:
    """Each row's ratio to every baseline and the port's % of peak, as the tables print them."""
    backends = tuple(s.backend for s in c.baselines)
    bars = []
    for key, rows in grouped_rows(c):
        for row in rows:
            share = peak_share(row.port)
            value, pct = throughput(row.port)
            text = (
                "no throughput recorded"
                if share is None
                else f"{value} {share[2]}, no peak recorded"
                if share[1] is None
                else f"{pct} · {value} {share[2]}"
            )
            bars.append(
                charts.ConfigBars(
                    "" if key == ("", "") else _title_text(key),
                    config_label(row.config),
                    {b: row.ratio_to(b) for b in backends if row.ratio_to(b) is not None},
                    None if share is None else share[1],
                    text,
                    ROW_STATUS.get(row.status, ""),
                )
            )
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
            return (
                f"![{c.kernel}: {PORT_BACKEND} time relative to each baseline per config, and % of peak]"
                f"({os.path.relpath(PERFORMANCE_CHART, os.path.dirname(PERFORMANCE_MD))})"
            )
        except Exception as exc:  # noqa: BLE001 - whatever breaks in matplotlib, the report is written
            why = f"drawing failed ({type(exc).__name__}: {' '.join(str(exc).split())})"
    if os.path.exists(path):
        os.remove(path)
    return None if why is None else f"Chart: not drawn: {why}"


# ---------------------------------------------------------------------------------------------
# I/O: sanitize what is on disk, then render


def _path(kernel_dir: str, rel: str) -> str:
    return os.path.join(kernel_dir, rel)


def load_perf(kernel: str, kernel_dir: str) -> PerfInputs:
    """Re-sanitize every raw perf log; write the clean logs and the investigation log."""
    raw = _path(kernel_dir, PORT_RAW)
    baselines = {
        b: parse_log(read_text(_path(kernel_dir, baseline_raw(b))), kernel, b) for b in baselines_on_disk(kernel_dir)
    }
    settle = load_settle(kernel, kernel_dir)
    if not os.path.isfile(raw):
        for b, parsed in baselines.items():  # `make baseline` alone still gets its clean logs
            write_atomic(_path(kernel_dir, baseline_clean(b)), clean_text(parsed.records))
        if settle is not None:
            write_atomic(_path(kernel_dir, SETTLE_CLEAN), clean_text(settle.records))
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
    if settle is not None:
        write_atomic(_path(kernel_dir, SETTLE_CLEAN), clean_text(settle.records))
        sections.append(investigation_text(f"{SETTLE_RAW} -> {SETTLE_CLEAN}", settle))
        logs += [SETTLE_RAW, SETTLE_CLEAN]
    write_atomic(_path(kernel_dir, INVESTIGATION), INVESTIGATION_HEADER + "\n".join(sections))
    notes = []
    if not baselines:
        message = (
            f"{_path(kernel_dir, baseline_raw('<backend>'))}: no baseline raw log "
            f"(backends {', '.join(BASELINE_BACKENDS)}); `make KERNEL={kernel} baseline` writes them"
        )
        if port.records:
            raise MissingInput(f"{message} (wrote {_path(kernel_dir, PORT_CLEAN)}; no verdict without a baseline)")
        notes.append(message.replace(kernel_dir + os.sep, "", 1))
    return PerfInputs(kernel, port, baselines, logs + [INVESTIGATION], notes, settle)


def load_settle(kernel: str, kernel_dir: str) -> ParsedLog | None:
    """The settle log parsed (records of any backend of this kernel; a record without a valid
    `settle` object rejected, naming its line); None when `make settle` has not written one."""
    path = _path(kernel_dir, SETTLE_RAW)
    if not os.path.isfile(path):
        return None
    return check_settle_log(parse_log(read_text(path), kernel))


def compare_inputs(inputs: PerfInputs, reference: str | None = None, figure: str = "cold") -> Comparison:
    labels = {PORT_BACKEND: PORT_RAW, **{b: baseline_raw(b) for b in inputs.baselines}, "settle": SETTLE_RAW}
    return compare(
        inputs.kernel,
        inputs.port.records,
        {b: p.records for b, p in inputs.baselines.items()},
        reference=reference,
        blocked_hint=blocked_hint(inputs.port),
        labels=labels,
        settled=None if inputs.settle is None else inputs.settle.records,
        figure=figure,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tilekit report",
        description="Re-sanitize the raw logs of a kernel and render reports/performance.md and "
        "reports/correctness.md (no GPU needed).",
    )
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--dir", required=True, help="the kernel's output folder, e.g. out/rms_norm")
    parser.add_argument("--only", choices=("performance", "correctness"))
    parser.add_argument(
        "--reference", choices=BASELINE_BACKENDS, help="compare against this baseline instead of the winning one"
    )
    parser.add_argument(
        "--figure",
        choices=FIGURES,
        default="cold",
        help="the figure configs settled in one process are judged on: cold (L2 flushed, the default) or hot "
        "(CUDA-graph replay, as a decode step runs them)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 unless performance is DONE and correctness is ALL_PASS"
    )
    args = parser.parse_args(argv)
    status, verdicts = 0, []

    if args.only in (None, "performance"):
        try:
            inputs = load_perf(args.kernel, args.dir)
            comparison = compare_inputs(inputs, args.reference, args.figure)
            chart_line = write_chart(comparison, args.dir)
            write_atomic(_path(args.dir, PERFORMANCE_MD), render_performance(comparison, inputs, chart_line))
            print(
                f"tilekit report: {_path(args.dir, PERFORMANCE_MD)}: VERDICT {comparison.verdict} "
                f"({comparison.severity}, geomean_ratio="
                f"{'nan' if comparison.geomean is None else f'{comparison.geomean:.4f}'})"
            )
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
            print(
                f"tilekit report: {_path(args.dir, CORRECTNESS_MD)}: VERDICT {result.verdict} "
                f"({result.passed} passed, {result.failed} failed, {result.skipped} skipped)"
            )
            if not has_raw:
                print(
                    f"tilekit report: note: {_path(args.dir, CORRECTNESS_LOG)} is missing; "
                    f"`make KERNEL={args.kernel} test` writes it",
                    file=sys.stderr,
                )
            verdicts.append(result.verdict == "ALL_PASS")
        except (MissingInput, MalformedInput) as exc:
            print(f"tilekit report: {exc}", file=sys.stderr)
            status = 2

    if status == 0 and args.strict and not all(verdicts):
        print("tilekit report: --strict: a verdict is not DONE / ALL_PASS", file=sys.stderr)
        status = 1
    return status
