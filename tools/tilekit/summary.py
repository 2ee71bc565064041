"""``make KERNEL=all ...`` ends here: one row per kernel in ``$(OUT_ROOT)/summary.md``.

    python -m tilekit summary --out-root out rms_norm softmax ...

Each row is recomputed from the kernel's files on disk, like ``validate`` does, never copied from
its markdown: the performance verdict, severity, geomean ratio and its interval and the reference
backend from the sanitized perf logs (tilekit.compare), the best % of peak from the port's records,
and the correctness verdict from the JUnit XML. A kernel whose files are missing gets a row that
says which make target writes them.
"""
from __future__ import annotations

import argparse
import os
import sys

from tilekit import records, report
from tilekit.compare import CompareError, compare


def best_peak(port_records) -> str:
    shares = []
    for rec in port_records:
        value, share = report.throughput(rec)
        if share != "-":
            shares.append((float(share.rstrip("%")), f"{share} ({value} {'GB/s' if rec.number('gbps') is not None else 'TFLOP/s'})"))
    return max(shares)[1] if shares else "-"


def perf_row(kernel: str, kernel_dir: str) -> list[str]:
    port_path = os.path.join(kernel_dir, report.PORT_CLEAN)
    if not os.path.isfile(port_path):
        return ["not run", "-", "-", "-", "-", f"`make KERNEL={kernel} perf` writes {report.PORT_CLEAN}"]
    port = records.parse_log(records.read_text(port_path), kernel, report.PORT_BACKEND).records
    baselines = {}
    for b in report.BASELINE_BACKENDS:
        path = os.path.join(kernel_dir, report.baseline_clean(b))
        if os.path.isfile(path):
            baselines[b] = records.parse_log(records.read_text(path), kernel, b).records
    c = compare(kernel, port, baselines)
    geomean = "-" if c.geomean is None else f"{c.geomean:.4f}"
    ci = "-" if not c.ci95 else f"[{c.ci95[0]:.4f}, {c.ci95[1]:.4f}]"
    note = "" if baselines else f"no baseline log: `make KERNEL={kernel} baseline`"
    return [f"{c.verdict} ({c.severity})", geomean, ci, c.reference or "-", best_peak(port), note]


def correctness_cell(kernel: str, kernel_dir: str) -> str:
    junit = os.path.join(kernel_dir, report.JUNIT)
    if not os.path.isfile(junit):
        return f"not run (`make KERNEL={kernel} test`)"
    result = report.classify(report.parse_junit(records.read_text(junit), junit), "")
    return result.verdict


def render(out_root: str, kernels: list[str]) -> str:
    rows = []
    for k in kernels:
        kdir = os.path.join(out_root, k)
        perf = perf_row(k, kdir)
        rows.append([k, correctness_cell(k, kdir), *perf])
    headers = ["kernel", "correctness", "performance", "geomean_ratio", "95% CI", "reference", "best % of peak", "note"]
    lines = ["# tilekit summary", "",
             f"Kernels: {', '.join(kernels)}. Each row is recomputed from `{out_root}/<kernel>/` "
             "(sanitized logs, JUnit XML); the kernel's own reports give the details.", "",
             report.markdown_table(rows, headers)]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tilekit summary", description=__doc__.split("\n\n")[0])
    p.add_argument("--out-root", default="out")
    p.add_argument("kernels", nargs="+")
    args = p.parse_args(argv)
    try:
        text = render(args.out_root, args.kernels)
    except (report.MalformedInput, CompareError, ValueError) as e:
        print(f"tilekit summary: {e}", file=sys.stderr)
        return 2
    path = os.path.join(args.out_root, "summary.md")
    os.makedirs(args.out_root, exist_ok=True)
    records.write_atomic(path, text)
    print(f"tilekit summary: wrote {path}")
    return 0
