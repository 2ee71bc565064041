"""Shape sweeps (docs/sweep.md): the port and its baselines over a kernel's declared grid
(KernelSpec.sweep), timed by the suites' own harness, spread over the GPUs of a host and over hosts.

    make KERNEL=rms_norm SWEEP=quick sweep          # every GPU of this host
    make KERNEL=rms_norm SWEEP=full SHARD=2/4 sweep # one host of four (a Slurm array task)
    make KERNEL=rms_norm sweep-merge                # the four shards' records -> one report

- Cases: tilekit.testing.suite generates ``test_sweep[<backend>-<config>-<dtype>]`` when TILEKIT_SWEEP names
  a size (make sets it from SWEEP=), costliest config first, so the xdist workers (one per GPU,
  tilekit.testing.gpu_workers) take the big cases early and the small ones balance the end.
- Shards: SHARD=i/N keeps every N-th config of the grid in snake order of expected cost
  (``shard``): deterministic, disjoint, their union the whole grid, each shard about 1/N of the
  time; all the backends of a config stay on one host.
- Records: format v1 (tilekit.reports.records), plus `host`, `kit` (a digest of the kit's code and
  library), `sweep` (size and shard) and the port's JIT counters (`jit`). A shard writes its raw
  logs under ``sweep/shard-<i>-of-<N>/logs/``, a whole run under ``sweep/logs/``.
- Report (no GPU): ``python -m tilekit sweep report|merge`` reads those logs, refuses a mix of GPU
  models, kit versions or sweep sizes (naming the files), and writes ``sweep/records.txt`` (every
  valid record), ``sweep/sweep.csv``, ``sweep/sweep.md`` (worst configs first) and
  ``sweep/sweep.svg``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import glob
import hashlib
import io
import os
import re
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from tilekit.runtime.kernel import SWEEP_SIZES

SIZE_VAR = "TILEKIT_SWEEP"  # quick | full: the suites generate test_sweep (make sweep sets it)
SHARD_VAR = "TILEKIT_SHARD"  # i/N or empty
SWEEP_DIR = "sweep"
LOG_NAME = "sweep_{backend}.full.txt"
SHARD_DIR = re.compile(r"^shard-(\d+)-of-(\d+)$")
# A case's fixed cost (warm-up, the float64 check, the profiler sessions) in seconds, beside its
# modelled device time; only the order of costs matters.
CASE_OVERHEAD_S = 0.5
MODEL_GBPS, MODEL_TFLOPS = 4000.0, 600.0


class SweepError(ValueError):
    """A sweep that cannot run or merge as asked; the message names the input and the fix."""


# ---------------------------------------------------------------------------------------------
# Which cases (pure)


def check_size(size: str) -> str:
    if size not in SWEEP_SIZES:
        raise SweepError(f"SWEEP={size!r}: use one of {', '.join(SWEEP_SIZES)} (e.g. make SWEEP=quick sweep)")
    return size


def parse_shard(text: str | None) -> tuple[int, int]:
    """SHARD=i/N as (i, N), 1-based; (1, 1) when empty."""
    if not text or not text.strip():
        return 1, 1
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not found or not 1 <= int(found[1]) <= int(found[2]):
        raise SweepError(f"SHARD={text!r}: use i/N with 1 <= i <= N (e.g. SHARD=2/4 for the second of four hosts)")
    return int(found[1]), int(found[2])


def shard_dir(shard: tuple[int, int]) -> str:
    """Where a shard's logs go under the kernel's sweep/ folder ('' for a whole run)."""
    i, n = shard
    return "" if n == 1 else f"shard-{i}-of-{n}"


def configs(spec, size: str) -> list[dict]:
    """The kernel's sweep of this size; its perf configs when it declares none."""
    return list(spec.sweep.get(check_size(size)) or spec.perf_configs)


def cost(spec, cfg: dict) -> float:
    """Expected seconds of one timed case: a fixed overhead plus ~105 calls at a modelled rate."""
    work = spec.flops(cfg) / (MODEL_TFLOPS * 1e12) if spec.flops else spec.bytes_moved(cfg) / (MODEL_GBPS * 1e9)
    return CASE_OVERHEAD_S + 105 * work


def case_id(spec, cfg: dict) -> str:
    """A timed config's part of its test_perf and test_sweep ids: '16x4096x4096-bt1-bfloat16'."""
    return f"{spec.shape_id(cfg, sep=spec.perf_id_sep)}-{cfg['dtype']}"


def shard(spec, cfgs: list[dict], index: int, count: int) -> list[dict]:
    """The configs of shard `index` of `count`, costliest first: the grid sorted by (cost, id)
    dealt out in snake order (1..N, N..1, ...), so each shard gets as many configs (±1) and about
    the same cost, and the result does not depend on the declaration's order."""
    ordered = sorted(cfgs, key=lambda c: (-cost(spec, c), case_id(spec, c)))
    mine = []
    for j, cfg in enumerate(ordered):
        lap, at = divmod(j, count)
        if (at if lap % 2 == 0 else count - 1 - at) == index - 1:
            mine.append(cfg)
    return mine


def cases(spec, size: str, shard_text: str | None = None) -> list[dict]:
    """The configs a sweep of `size` times in shard SHARD (all when empty), costliest first."""
    index, count = parse_shard(shard_text)
    return shard(spec, configs(spec, size), index, count)


def from_env(env=os.environ) -> tuple[str, str] | None:
    """(size, shard) when the environment asks the suites for test_sweep, else None."""
    size = env.get(SIZE_VAR, "").strip()
    if not size:
        return None
    shard_text = env.get(SHARD_VAR, "")
    check_size(size), parse_shard(shard_text)
    return size, shard_text.strip()


# ---------------------------------------------------------------------------------------------
# What a sweep record carries beyond v1's keys


@functools.lru_cache(maxsize=1)
def kit_version(root: Path | None = None) -> str:
    """A digest of what the timings run: the kit's Python, every kernel's files (not its notes) and
    the library.
    Hosts that run the same bundle or checkout agree; a changed file changes it."""
    from tilekit.runtime import ffi

    root = root or ffi.ROOT
    kernel_files = [p for p in sorted((root / "kernels").glob("*/*")) if p.suffix != ".md"]
    files = sorted((root / "tools" / "tilekit").glob("*.py")) + kernel_files
    h = hashlib.sha256()
    for path in files + [ffi.library_path()]:
        if path.is_file():
            h.update(str(path.relative_to(root) if path.is_relative_to(root) else path.name).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def record_extra(backend_id: str, size: str, shard_text: str) -> dict:
    """host, kit, sweep and (for the port, when the library reports them) its JIT counters."""
    extra = {"host": socket.gethostname(), "kit": kit_version(), "sweep": f"{size} {shard_text or '1/1'}"}
    if backend_id == "cutile_rs":
        from tilekit.runtime import ffi

        stats = ffi.library().jit_stats()
        if stats is not None:
            extra["jit"] = stats
    return extra


# ---------------------------------------------------------------------------------------------
# Reading and merging records (no GPU)


@dataclass(frozen=True)
class Loaded:
    records: list  # records.Record, every valid one
    sources: dict  # id(record) -> the raw log it came from
    problems: list  # "<file>: <rejected block or failed case>" lines


def log_files(kernel_dir: str, merge: bool) -> list[str]:
    """The raw logs of a whole run (sweep/logs/) or, for a merge, of every shard folder."""
    base = os.path.join(kernel_dir, SWEEP_DIR)
    pattern = (
        os.path.join(base, "shard-*-of-*", "logs", "sweep_*.full.txt")
        if merge
        else os.path.join(base, "logs", "sweep_*.full.txt")
    )
    return sorted(glob.glob(pattern))


def check_shards(kernel_dir: str, files: list[str]) -> None:
    """Every shard of one N is there; else a SweepError naming the missing ones and the command."""
    found = {}
    for path in files:
        name = os.path.basename(os.path.dirname(os.path.dirname(path)))
        m = SHARD_DIR.match(name)
        if m:
            found.setdefault(int(m[2]), set()).add(int(m[1]))
    kernel = os.path.basename(os.path.normpath(kernel_dir))
    if not found:
        raise SweepError(
            f"{os.path.join(kernel_dir, SWEEP_DIR)}: no shard logs (shard-<i>-of-<N>/logs/sweep_*.full.txt): "
            f"run make KERNEL={kernel} SHARD=i/N sweep on each host first (docs/sweep.md)"
        )
    if len(found) > 1:
        raise SweepError(
            f"{os.path.join(kernel_dir, SWEEP_DIR)} holds shards of different runs (N = {', '.join(map(str, sorted(found)))}): "
            "keep the shard-*-of-N folders of one run and remove the others"
        )
    ((count, have),) = found.items()
    missing = sorted(set(range(1, count + 1)) - have)
    if missing:
        raise SweepError(
            f"{os.path.join(kernel_dir, SWEEP_DIR)}: shard {', '.join(f'{i}/{count}' for i in missing)} missing: run "
            + "; ".join(f"make KERNEL={kernel} SHARD={i}/{count} sweep" for i in missing)
            + " (or copy its shard folder here)"
        )


def load(kernel: str, files: list[str]) -> Loaded:
    from tilekit.reports.records import parse_log, read_text

    records, sources, problems = [], {}, []
    for path in files:
        parsed = parse_log(read_text(path), kernel=kernel)
        for r in parsed.records:
            records.append(r)
            sources[id(r)] = path
        problems += [f"{path}:{r.line}: {r.test}: {r.reason}" for r in parsed.rejected]
        problems += [f"{path}:{o.line}: {o.status} {o.case}: {o.reason}" for o in parsed.outcomes]
    return Loaded(records, sources, problems)


def identity(record) -> dict:
    """What every record of one sweep must share: the GPU model, the kit, its toolchain, the size."""
    env = record.env()
    size = record.fields.get("sweep", "").split(" ")[0]
    return {
        "GPU model": env.get("gpu", "?"),
        "kit": record.fields.get("kit", "?"),
        "cutile crate": env.get("cutile_crate", "?"),
        "tileiras": env.get("tileiras", "?"),
        "SWEEP": size or "?",
    }


def check_mix(loaded: Loaded) -> None:
    """Refuse records of different GPU models, kit versions or sweep sizes, naming the files."""
    for what in ("GPU model", "kit", "cutile crate", "tileiras", "SWEEP"):
        by_value: dict = {}
        for r in loaded.records:
            by_value.setdefault(identity(r)[what], set()).add(loaded.sources[id(r)])
        if len(by_value) > 1:
            detail = "; ".join(f"{what} {v!r} in {', '.join(sorted(files))}" for v, files in sorted(by_value.items()))
            raise SweepError(
                f"these sweep records differ in {what}: {detail}. A sweep compares one GPU model, one kit "
                "and one size: re-run the odd shards with the same bundle on the same GPU model"
            )


def check_duplicates(loaded: Loaded) -> None:
    seen: dict = {}
    for r in loaded.records:
        key = (r.backend, r.config_key)
        if key in seen:
            first = seen[key]
            raise SweepError(
                f"{r.backend} {r.config_key} is timed twice: {loaded.sources[id(first)]}:{first.line} and "
                f"{loaded.sources[id(r)]}:{r.line}; remove the stale log (shards must not overlap)"
            )
        seen[key] = r


# ---------------------------------------------------------------------------------------------
# Rendering (pure)


def comparison(kernel: str, records: list):
    from tilekit.reports.compare import compare
    from tilekit.reports.records import PORT_BACKEND

    port = [r for r in records if r.backend == PORT_BACKEND]
    baselines: dict = {}
    for r in records:
        if r.backend != PORT_BACKEND:
            baselines.setdefault(r.backend, []).append(r)
    return compare(kernel, port, baselines)


def _rate(record) -> tuple[str, str]:
    gbps, tflops = record.number("gbps"), record.number("tflops")
    return ("" if gbps is None else f"{gbps:.2f}", "" if tflops is None else f"{tflops:.2f}")


CSV_HEADER = "kernel config dtype backend median_ms gbps tflops peak_pct best_baseline ratio_to_best host gpu".split()


def csv_text(kernel: str, records: list) -> str:
    """One row per config and backend: its time, rate, % of peak and ratio to the config's best
    baseline (for the port: port time / best baseline time), configs in natural order."""
    from tilekit.reports.compare import config_sort_key, gpu_model
    from tilekit.reports.markdown import peak_share
    from tilekit.reports.records import PORT_BACKEND

    by_config: dict = {}
    for r in records:
        by_config.setdefault(r.config_key, []).append(r)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for key in sorted(by_config, key=lambda k: config_sort_key(by_config[k][0].config)):
        group = sorted(by_config[key], key=lambda r: (r.backend != PORT_BACKEND, r.backend))
        base = {r.backend: r.median_ms for r in group if r.backend != PORT_BACKEND}
        best = min(sorted(base), key=base.__getitem__) if base else None
        for r in group:
            share = peak_share(r)
            pct = "" if share is None or share[1] is None else f"{share[1]:.1f}"
            ratio = "" if best is None else f"{r.median_ms / base[best]:.4f}"
            writer.writerow(
                [
                    kernel,
                    key,
                    r.config.get("dtype", ""),
                    r.backend,
                    f"{r.median_ms:.6f}",
                    *_rate(r),
                    pct,
                    best or "",
                    ratio,
                    r.fields.get("host", ""),
                    gpu_model(r) or "",
                ]
            )
    return out.getvalue()


def worst_first(c) -> list:
    """The compared rows, the port's worst ratio to the best baseline first (ties: config order)."""
    rows = [r for r in c.rows if r.ratio_to_best is not None]
    return sorted(rows, key=lambda r: -r.ratio_to_best)


def markdown_text(kernel: str, loaded: Loaded, chart: str | None, note: str = "") -> str:
    from tilekit.reports.compare import BANDS, geomean
    from tilekit.reports.markdown import cell, markdown_table, ms_text, ratio_text, throughput
    from tilekit.reports.records import PORT_BACKEND
    from tilekit.reports.report import config_label

    c = comparison(kernel, loaded.records)
    ids = {identity(r)["GPU model"] for r in loaded.records}
    hosts = sorted({r.fields.get("host", "?") for r in loaded.records})
    kits = sorted({identity(r)["kit"] for r in loaded.records})
    sizes = sorted({r.fields.get("sweep", "?") for r in loaded.records})
    rows = worst_first(c)
    edge = BANDS[0][0]
    losing = [r for r in rows if r.ratio_to_best > edge]
    lines = [f"# {kernel}: sweep of {PORT_BACKEND} against the best baseline of each config", ""]
    if note:
        lines += [note, ""]
    lines += [
        f"- records: {len(loaded.records)} ({', '.join(sorted({r.backend for r in loaded.records}))}); "
        f"sweep {', '.join(sizes)}; GPU {', '.join(sorted(ids)) or '-'}; kit {', '.join(kits) or '-'}",
        f"- hosts: {', '.join(hosts) or '-'}",
    ]
    if rows:
        g = geomean([r.ratio_to_best for r in rows])
        worst = rows[0]
        lines += [
            f"- configs compared: {len(rows)}; {PORT_BACKEND} loses (ratio to the best baseline > {edge:.2f}) on "
            f"{len(losing)}; worst {worst.ratio_to_best:.4f} at {config_label(worst.config, drop=())} "
            f"(vs {worst.best_backend})",
            f"- geomean ratio to the best baseline: {g:.4f}",
        ]
    else:
        lines.append(f"- no config has both a {PORT_BACKEND} and a baseline median: {c.blocked_reason or 'see below'}")
    if chart:
        lines += ["", f"![ratio to the best baseline and % of peak over the grid]({chart})"]
    if rows:
        table = []
        for r in rows:
            gbps, pct = throughput(r.port)
            table.append(
                [
                    cell(config_label(r.config, drop=())),
                    ms_text(r.port.median_ms),
                    r.best_backend,
                    ms_text(r.baseline_ms[r.best_backend]),
                    ratio_text(r.ratio_to_best),
                    gbps,
                    pct,
                ]
            )
        unit = "GB/s" if rows[0].port.number("gbps") is not None else "TFLOP/s"
        lines += [
            "",
            "## Worst configs first",
            "",
            f"Ratio = {PORT_BACKEND} time / best baseline time; > {edge:.2f} is a loss.",
            "",
        ]
        lines.append(
            markdown_table(
                table, ["config", f"{PORT_BACKEND} ms", "best baseline", "its ms", "ratio", unit, "% of peak"]
            )
        )
    missing = [r for r in c.rows if r.ratio_to_best is None] + [("port only", r) for r in c.unmatched]
    if missing or loaded.problems:
        lines += ["", "## Missing and failed", ""]
        for r in missing:
            if isinstance(r, tuple):
                lines.append(f"- {config_label(r[1].config, drop=())}: no baseline median")
            else:
                lines.append(f"- {config_label(r.config, drop=())}: {r.status}")
        lines += [f"- {cell(p)}" for p in grouped_problems(loaded.problems)]
    return "\n".join(lines) + "\n"


def grouped_problems(problems: list) -> list:
    """The problems, one line per distinct message: a whole skipped sweep (no GPU) is one line
    with its count and first place, not one line per case.

    >>> grouped_problems(["a.txt:3: SKIPPED x.py:1: no GPU", "a.txt:4: SKIPPED x.py:1: no GPU", "b.txt:9: FAILED t: boom"])
    ['2 x SKIPPED x.py:1: no GPU (a.txt:3, a.txt:4)', 'b.txt:9: FAILED t: boom']
    """
    places: dict[str, list] = {}
    for p in problems:
        where, sep, what = p.partition(": ")
        places.setdefault(what if sep else p, []).append(where if sep else "")
    out = []
    for what, where in places.items():
        if len(where) == 1:
            out.append(f"{where[0]}: {what}" if where[0] else what)
        else:
            shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
            out.append(f"{len(where)} x {what} ({shown})")
    return out


def chart_data(kernel: str, records: list):
    """charts.SweepChart: per compared config, the problem's size (bytes or FLOPs from the port's
    record), its ratio to the best baseline and the port's % of peak."""
    from tilekit.reports import charts
    from tilekit.reports.markdown import peak_share

    c = comparison(kernel, records)
    points = []
    for r in c.rows:
        if r.ratio_to_best is None:
            continue
        share = peak_share(r.port)
        work = (share[0] * (1e9 if share[2] == "GB/s" else 1e12) * r.port.median_ms / 1e3) if share else None
        points.append(
            charts.SweepPoint(
                str(r.config.get("dtype", "")), work, r.ratio_to_best, None if share is None else share[1]
            )
        )
    unit = "bytes moved" if records and records[0].number("gbps") is not None else "FLOPs"
    return charts.SweepChart(kernel, tuple(points), unit)


# ---------------------------------------------------------------------------------------------
# The CLI


def render(kernel: str, kernel_dir: str, loaded: Loaded, note: str = "") -> list[str]:
    """Write records.txt, sweep.csv, sweep.svg (when matplotlib imports) and sweep.md; their paths."""
    from tilekit.reports import charts
    from tilekit.reports.records import clean_text, write_atomic

    out = os.path.join(kernel_dir, SWEEP_DIR)
    paths = {name: os.path.join(out, name) for name in ("records.txt", "sweep.csv", "sweep.svg", "sweep.md")}
    write_atomic(paths["records.txt"], clean_text(loaded.records))
    write_atomic(paths["sweep.csv"], csv_text(kernel, loaded.records))
    chart = None
    why = charts.missing_matplotlib()
    data = chart_data(kernel, loaded.records) if not why else None
    if data is not None and data.points:
        charts.write_sweep(data, paths["sweep.svg"])
        chart = "sweep.svg"
    elif why:
        note = (note + "\n" if note else "") + f"(no chart: {why})"
    write_atomic(paths["sweep.md"], markdown_text(kernel, loaded, chart, note))
    return [p for name, p in paths.items() if name != "sweep.svg" or chart]


def plan_lines(kernels: list[str], size: str, shard_text: str, backends: list[str]) -> list[str]:
    from tilekit.runtime import kernel

    total = 0
    lines = []
    for name in kernels:
        spec = kernel.load(name)
        mine = cases(spec, size, shard_text)
        note = "" if spec.sweep.get(size) else " (no sweep declared: its perf configs)"
        lines.append(
            f"sweep {size} shard {shard_text or '1/1'}: {name}: {len(mine)} of {len(configs(spec, size))} configs "
            f"x {len(backends)} backends, ~{sum(cost(spec, c) for c in mine) * len(backends) / 60:.0f} GPU-min by the cost model{note}"
        )
        total += len(mine) * len(backends)
    lines.append(f"sweep: {total} timed cases")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilekit sweep", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="check SWEEP/SHARD and print the cases each kernel times")
    p.add_argument("--size", required=True)
    p.add_argument("--shard", default="")
    p.add_argument("--backends", default="cutile_rs", help="backend ids, comma-separated")
    p.add_argument("kernels", nargs="+")
    for name, what in (
        ("report", "a whole run's logs (sweep/logs/)"),
        ("merge", "every shard's logs (sweep/shard-*-of-N/logs/)"),
    ):
        p = sub.add_parser(name, help=f"render sweep.csv, sweep.md and sweep.svg from {what}")
        p.add_argument("--kernel", required=True)
        p.add_argument("--dir", required=True, help="the kernel's output folder, e.g. out/rms_norm")
    args = parser.parse_args(argv)
    try:
        if args.command == "plan":
            print("\n".join(plan_lines(args.kernels, args.size, args.shard, args.backends.split(","))))
            return 0
        merge = args.command == "merge"
        files = log_files(args.dir, merge)
        if merge:
            check_shards(args.dir, files)
        elif not files:
            raise SweepError(
                f"{os.path.join(args.dir, SWEEP_DIR, 'logs')}: no sweep logs: run make KERNEL={args.kernel} sweep first"
            )
        loaded = load(args.kernel, files)
        check_mix(loaded)
        check_duplicates(loaded)
    except SweepError as exc:
        print(f"tilekit sweep {args.command}: {exc}", file=sys.stderr)
        return 2
    note = f"Merged from {len(files)} logs of {len({os.path.dirname(f) for f in files})} shards." if merge else ""
    for path in render(args.kernel, args.dir, loaded, note):
        print(f"sweep {args.command}: wrote {path}")
    return 0
