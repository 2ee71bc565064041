"""Issue 40's acceptance run: is a decode config's port/best-baseline ratio the same whatever ran
before? Five allocation histories, each in fresh processes; per history and config, the settled
ratio (`make settle`'s method: one process, 8 placements, interleaved, cold and hot) and today's
(`make perf`'s: each backend in its own process, CUPTI median of 100 after the L2 flush).

    python scripts/settle_histories.py --out results/h200/logs/settle_histories.json [--only rms_norm]
    python scripts/settle_histories.py --table results/h200/logs/settle_histories_rms_norm.json  # no GPU

With --out, the JSON is written after each history, and a later call with the same --out (and
--only) goes on where it stopped: the histories it holds are kept, not timed again (--fresh times
them all), so the run can span several calls of a few minutes each.

Prints a table per config: the five histories' ratios by method and their spread (max - min);
the issue asks <= 0.04 for the settled cold and hot figures. Needs a GPU; every child process has a
deadline. The histories (run before anything is timed, in each process):
  fresh       nothing
  others      the other configs' ports and baselines called 50 times each
  churn       20 GiB allocated and freed in tensors of 1 MiB to 1 GiB, then empty_cache
  fragment    10,000 tensors of 4 KiB to 4 MiB allocated, every other one freed (kept fragmented)
  big-first   a 30 GiB tensor held for the whole run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The decode configs: (kernel, config)
CONFIGS = [
    ("rms_norm", {"dtype": "bfloat16", "m": 256, "n": 4096}),
    ("layer_norm", {"dtype": "bfloat16", "m": 256, "n": 4096}),
    ("silu_and_mul", {"dtype": "bfloat16", "m": 256, "h": 14336}),
    ("swiglu", {"dtype": "bfloat16", "m": 256, "h": 14336}),
    ("matmul", {"dtype": "bfloat16", "m": 16, "n": 4096, "k": 4096, "bt": 1}),
    ("matmul", {"dtype": "bfloat16", "m": 64, "n": 4096, "k": 4096, "bt": 1}),
]
HISTORIES = ("fresh", "others", "churn", "fragment", "big-first")
CHILD_TIMEOUT_S = 900
ENV_KEY = "__env__"  # a settled child's result: the environment it ran in, beside the configs


def history(name: str, configs) -> list:
    """Run history `name` in this process; returns what must stay alive."""
    import torch

    from tilekit.runtime import kernel

    keep = []
    if name == "others":
        for k, cfg in configs:
            spec = kernel.load(k)
            inputs = spec.make_inputs(cfg)
            for _ in range(50):
                spec.run_port(inputs)
                for b in spec.baselines().BACKENDS:
                    if not spec.baselines().unavailable_reason(b):
                        try:
                            spec.run_baseline(b, inputs)
                        except Exception:  # noqa: BLE001 - a history, not a measurement
                            break
    elif name == "churn":
        for size_mib in (1, 7, 64, 256, 1024, 3, 512, 16, 1024, 128) * 4:
            keep.append(torch.empty(size_mib << 20, dtype=torch.uint8, device="cuda"))
            if len(keep) > 8:
                keep = keep[4:]
        keep.clear()
        torch.cuda.empty_cache()
    elif name == "fragment":
        tensors = [torch.empty((4 << 10) * (1 + i % 1024), dtype=torch.uint8, device="cuda") for i in range(10_000)]
        keep = tensors[::2]
    elif name == "big-first":
        keep.append(torch.empty(30 << 30, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    return keep


def child(args) -> None:
    """One process: the history, then one measurement; prints one JSON line."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
    from tilekit.runtime import bench, kernel
    from tilekit.testing import harness

    configs = [(k, c) for k, c in CONFIGS if not args.only or k in args.only]
    keep = history(args.history, configs)  # noqa: F841 - held for the whole measurement
    out = {}
    for k, cfg in configs:
        spec = kernel.load(k)
        key = f"{k} {json.dumps(cfg, sort_keys=True)}"
        if args.method == "settled":
            records = harness.settled_records(spec, cfg, test=key)  # the backends settle_backends names
            out[key] = {r["backend"]: r["settle"] for r in records}
        else:  # today's: one backend in this process, time_cupti's median of 100
            inputs = spec.make_inputs(cfg)
            if args.backend == "cutile-rs":
                call = lambda: spec.run_port(inputs)  # noqa: E731
            elif spec.baselines().unavailable_reason(args.backend):
                continue
            else:
                call = lambda: spec.run_baseline(args.backend, inputs)  # noqa: E731
            out[key] = statistics.median(bench.time_cupti(call, nrep=100).samples_ms)
    if args.method == "settled":  # where it ran: a resumed run must not mix GPUs or versions
        out[ENV_KEY] = bench.environment()
    print("RESULT " + json.dumps(out))


def run_child(*argv: str) -> dict:
    cmd = [sys.executable, __file__, "--child", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=ROOT)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"{' '.join(argv)}: no result (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def rows_of(settled: dict, separate: dict | None = None) -> dict:
    """{config: row} of one history from its raw results: the best baseline (lowest cold figure), the
    settled cold and hot ratios with their labels, and today's ratio from the separate processes."""
    from tilekit.runtime import settle

    rows = {}
    for key, by_backend in settled.items():
        port = by_backend["cutile-rs"]
        figures = {b: settle.figure(s["samples_ms"])["figure_ms"] for b, s in by_backend.items() if b != "cutile-rs"}
        best = min(figures, key=figures.get)
        cold = settle.settle(port["samples_ms"], by_backend[best]["samples_ms"], seed=port["seed"])
        rows[key] = {"best": best, "cold": cold["ratio"], "cold_label": cold["label"]}
        if port["hot_ms"] and by_backend[best]["hot_ms"]:
            hot = settle.settle([port["hot_ms"]], [by_backend[best]["hot_ms"]], seed=port["seed"])
            rows[key].update(hot=hot["ratio"], hot_label=hot["label"])
        port_ms, best_ms = ((separate or {}).get(b, {}).get(key) for b in ("cutile-rs", best))
        if port_ms and best_ms:
            rows[key]["separate"] = port_ms / best_ms
    return rows


def table_of(raw: dict) -> dict:
    """{config: {history: row}} from the raw results, with this commit's statistics (rows_of)."""
    table: dict = {}
    for h, runs in raw.items():
        for key, row in rows_of(runs["settled"], runs["separate"]).items():
            table.setdefault(key, {})[h] = row
    return table


def print_table(table: dict) -> bool:
    """Print each config's histories and spreads; True when a settled spread is over 0.04."""
    failed = False
    for key, rows in table.items():
        print(f"\n{key}")
        print(f"  {'history':<10} {'best':<8} {'cold':>7} {'hot':>7} {'separate':>9}")
        for h, row in rows.items():
            cells = [f"{row.get(m, float('nan')):7.4f}" for m in ("cold", "hot")]
            print(f"  {h:<10} {row['best']:<8} {' '.join(cells)} {row.get('separate', float('nan')):9.4f}")
        for m in ("cold", "hot", "separate"):
            values = [row[m] for row in rows.values() if m in row]
            if len(values) > 1:
                spread = max(values) - min(values)
                ok = spread <= 0.04 or m == "separate"
                failed |= not ok
                print(
                    f"  spread {m}: {spread:.4f}{'' if m == 'separate' else ' (<= 0.04: ' + ('ok' if ok else 'NOT MET') + ')'}"
                )
    return failed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="write every ratio and the raw results here (JSON)")
    p.add_argument("--only", nargs="*", default=[], help="only these kernels")
    p.add_argument("--histories", nargs="*", default=list(HISTORIES), choices=HISTORIES)
    p.add_argument(
        "--table", type=Path, help="no GPU: print the table of a JSON written by --out, with today's statistics"
    )
    p.add_argument("--fresh", action="store_true", help="with --out: time every history, even those the file holds")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--history", help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return 0
    sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
    if args.table:
        return 1 if print_table(table_of(json.loads(args.table.read_text())["raw"])) else 0

    only = [a for k in args.only for a in ("--only", k)]
    raw: dict = {}
    if args.out and args.out.is_file() and not args.fresh:
        saved = json.loads(args.out.read_text())
        if saved.get("only", args.only) != args.only:  # (a file from before 2026-12-05 has no "only")
            raise SystemExit(
                f"settle_histories: {args.out} holds a run with --only {saved.get('only', [])}, not "
                f"{args.only}: give the same --only, another --out, or --fresh"
            )
        raw = saved["raw"]
        print(f"settle_histories: {args.out} holds {sorted(raw)}; timing the others", file=sys.stderr)
    for h in (h for h in args.histories if h not in raw):
        settled = run_child("--history", h, "--method", "settled", *only)
        env = settled.pop(ENV_KEY, None)
        other = next((k for k, run in raw.items() if run.get("env") not in (None, env)), None)
        if other:
            raise SystemExit(
                f"settle_histories: history {other} in {args.out} ran on {raw[other]['env']}, this call on "
                f"{env}: one table, one environment; give another --out, or --fresh"
            )
        bests = {row["best"] for row in rows_of(settled).values()}
        # today's method: each backend in a process of its own, after the same history
        separate = {
            b: run_child("--history", h, "--method", "separate", "--backend", b, *only) for b in {"cutile-rs", *bests}
        }
        raw[h] = {"settled": settled, "separate": separate, "env": env}
        if args.out:  # after each history: a run stopped at its deadline keeps the histories it finished
            args.out.parent.mkdir(parents=True, exist_ok=True)
            saved = {"table": table_of(raw), "raw": raw, "only": args.only}
            tmp = args.out.with_name(args.out.name + ".tmp")
            tmp.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, args.out)  # whole or not at all, even when the deadline falls here
        print(f"history {h}: done", file=sys.stderr, flush=True)
    return 1 if print_table(table_of(raw)) else 0


if __name__ == "__main__":
    sys.exit(main())
