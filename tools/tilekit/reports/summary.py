"""``make KERNEL=all ...`` ends here: one row per kernel in ``$(OUT_ROOT)/summary.md``.

    python -m tilekit summary --out-root out rms_norm softmax ...

Each row is recomputed from the kernel's files on disk, like ``validate`` does, never copied from
its markdown: the performance verdict, severity, geomean ratio and its interval and the reference
backend from the sanitized perf logs (tilekit.reports.compare), the best % of peak from the port's records,
and the correctness verdict from the JUnit XML. A kernel whose files are missing gets a row that
says which make target writes them. ``summary.svg`` beside it draws each kernel's geomean ratio,
interval and per-config ratios (tilekit.reports.charts), linked from the line after the table.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from tilekit.reports import charts, correctness, layout, markdown, records
from tilekit.reports.compare import CompareError, Comparison, compare, figure_of, settled_records

CHART = "summary.svg"  # beside summary.md


def best_peak(port_records) -> str:
    shares = []
    for rec in port_records:
        value, share = markdown.throughput(rec)
        if share != "-":
            shares.append(
                (
                    float(share.rstrip("%")),
                    f"{share} ({value} {'GB/s' if rec.number('gbps') is not None else 'TFLOP/s'})",
                )
            )
    return max(shares)[1] if shares else "-"


@dataclass(frozen=True)
class KernelPerf:
    """A kernel's performance as recomputed from its sanitized logs; comparison None when the
    port's log is not there."""

    kernel: str
    comparison: Comparison | None
    port: list  # the port's valid records
    has_baselines: bool


def kernel_perf(kernel: str, kernel_dir: str) -> KernelPerf:
    port_path = os.path.join(kernel_dir, layout.PORT_CLEAN)
    if not os.path.isfile(port_path):
        return KernelPerf(kernel, None, [], False)
    port = records.parse_log(records.read_text(port_path), kernel, records.PORT_BACKEND).records
    baselines = {}
    for b in records.BASELINE_BACKENDS:
        path = os.path.join(kernel_dir, layout.baseline_clean(b))
        if os.path.isfile(path):
            baselines[b] = records.parse_log(records.read_text(path), kernel, b).records
    settle_path, md_path = (
        os.path.join(kernel_dir, layout.SETTLE_CLEAN),
        os.path.join(kernel_dir, layout.PERFORMANCE_MD),
    )
    settle_text = records.read_text(settle_path) if os.path.isfile(settle_path) else None
    figure = figure_of(records.read_text(md_path)) if os.path.isfile(md_path) else "cold"
    comparison = compare(kernel, port, baselines, settled=settled_records(settle_text, kernel), figure=figure)
    return KernelPerf(kernel, comparison, port, bool(baselines))


def perf_row(perf: KernelPerf) -> list[str]:
    c, kernel = perf.comparison, perf.kernel
    if c is None:
        return ["not run", "-", "-", "-", "-", f"`make KERNEL={kernel} perf` writes {layout.PORT_CLEAN}"]
    geomean = "-" if c.geomean is None else f"{c.geomean:.4f}"
    ci = "-" if not c.ci95 else f"[{c.ci95[0]:.4f}, {c.ci95[1]:.4f}]"
    note = "" if perf.has_baselines else f"no baseline log: `make KERNEL={kernel} baseline`"
    return [f"{c.verdict} ({c.severity})", geomean, ci, c.reference or "-", best_peak(perf.port), note]


def correctness_cell(kernel: str, kernel_dir: str) -> str:
    junit = os.path.join(kernel_dir, layout.JUNIT)
    if not os.path.isfile(junit):
        return f"not run (`make KERNEL={kernel} test`)"
    result = correctness.classify(correctness.parse_junit(records.read_text(junit), junit), "")
    return result.verdict


def chart_data(perfs: list[KernelPerf]) -> charts.SummaryChart | None:
    """Each kernel's geomean ratio, interval and per-config ratios against its reference, as the
    table and the kernel's report have them; None when no kernel has a geomean to draw."""
    kernels = []
    for p in perfs:
        c = p.comparison
        if c is None or c.geomean is None:
            kernels.append(
                charts.KernelRatios(
                    p.kernel, None, None, None, (), "not run" if c is None else f"{c.verdict} ({c.severity})"
                )
            )
        else:
            kernels.append(
                charts.KernelRatios(
                    p.kernel, c.reference, c.geomean, c.ci95, tuple(r.ratio for r in c.matched), c.severity
                )
            )
    if all(k.geomean is None for k in kernels):
        return None
    return charts.SummaryChart(records.PORT_BACKEND, tuple(kernels))


def write_chart(chart: charts.SummaryChart | None, out_root: str) -> str | None:
    """Draw summary.svg beside summary.md; return the summary's line for it (the image, or why
    there is none), None when there is nothing to draw. Never fails the summary."""
    path = os.path.join(out_root, CHART)
    why = None
    if chart is None:
        pass
    elif missing := charts.missing_matplotlib():
        why = f"{missing}; `make setup` installs it, then `make KERNEL=all report` draws the chart"
    else:
        try:
            charts.write_summary(chart, path)
            return f"![{records.PORT_BACKEND}: geomean ratio per kernel against its reference baseline]({CHART})"
        except Exception as exc:  # noqa: BLE001 - whatever breaks in matplotlib, the summary is written
            why = f"drawing failed ({type(exc).__name__}: {' '.join(str(exc).split())})"
    if os.path.exists(path):
        os.remove(path)
    return None if why is None else f"Chart: not drawn: {why}"


def collect(out_root: str, kernels: list[str]) -> tuple[list[list[str]], list[KernelPerf]]:
    rows, perfs = [], []
    for k in kernels:
        kdir = os.path.join(out_root, k)
        perf = kernel_perf(k, kdir)
        perfs.append(perf)
        rows.append([k, correctness_cell(k, kdir), *perf_row(perf)])
    return rows, perfs


def render(out_root: str, kernels: list[str], rows: list[list[str]], chart_line: str | None = None) -> str:
    headers = ["kernel", "correctness", "performance", "geomean_ratio", "95% CI", "reference", "best % of peak", "note"]
    lines = [
        "# tilekit summary",
        "",
        f"Kernels: {', '.join(kernels)}. Each row is recomputed from `{out_root}/<kernel>/` "
        "(sanitized logs, JUnit XML); the kernel's own reports give the details.",
        "",
        markdown.markdown_table(rows, headers),
    ]
    lines += ["", chart_line] if chart_line else []
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tilekit summary", description=__doc__.split("\n\n")[0])
    p.add_argument("--out-root", default="out")
    p.add_argument("kernels", nargs="+")
    args = p.parse_args(argv)
    try:
        rows, perfs = collect(args.out_root, args.kernels)
    except (correctness.MalformedInput, CompareError, ValueError) as e:
        print(f"tilekit summary: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out_root, exist_ok=True)
    chart_line = write_chart(chart_data(perfs), args.out_root)
    path = os.path.join(args.out_root, "summary.md")
    records.write_atomic(path, render(args.out_root, args.kernels, rows, chart_line))
    print(f"tilekit summary: wrote {path}")
    if chart_line and chart_line.startswith("Chart: "):
        print(f"tilekit summary: note: {os.path.join(args.out_root, CHART)}: {chart_line}", file=sys.stderr)
    return 0
