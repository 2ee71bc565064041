#!/usr/bin/env python3
"""Time the report tools on a 10,000-record port log (plus three baselines of the same configs).

    python scripts/bench_report.py [--records 10000]

Builds the raw logs in a temporary folder, then times parse + sanitize + compare + render of
both reports through `tilekit.reports.report.main` (what `make report` runs), best of --repeat cold runs.
The goal is < 2 s; this prints the times and exits 1 above the goal. Not a timed test: timing
depends on the machine and its load.
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))

from tilekit.reports import report  # noqa: E402
from tilekit.reports import records  # noqa: E402
from tilekit.reports.records import format_block  # noqa: E402

GOAL_S = 2.0


def raw_log(backend: str, count: int, scale: float) -> str:
    parts = ["platform linux -- Python 3.12", "rootdir: /bench", "plugins: timeout-2.4.0"]
    for i in range(count):
        median = (0.05 + (i % 97) / 100) * scale * (1 + (i % 7) / 50)
        node = f"tests/kernels/test_bench.py::test_perf[{backend}-{i}]"
        parts += [
            f"{node} PASSED",
            format_block(
                dict(
                    test=node,
                    kernel="bench",
                    backend=backend,
                    config={"dtype": ("float16", "bfloat16")[i % 2], "m": 1024 + i, "n": 4096},
                    timer="cupti",
                    median_ms=median,
                    mean_ms=median * 1.01,
                    std_ms=0.001,
                    min_ms=median * 0.99,
                    max_ms=median * 1.05,
                    nrep=100,
                    gbps=1000.0 + i % 500,
                    peak_gbps=4800.0,
                    env={"gpu": "bench"},
                )
            ),
        ]
    parts.append(f"===== {count} passed in 1.00s =====")
    return "\n".join(parts) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000, help="records in the port log")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported (as timeit does)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        logs = os.path.join(tmp, "reports", "logs")
        os.makedirs(logs)
        for name, backend, scale in (
            ("perf_cutile_rs", "cutile-rs", 1.0),
            ("baseline_perf_cutile", "cutile", 1.02),
            ("baseline_perf_triton", "triton", 1.05),
            ("baseline_perf_torch", "torch", 1.3),
        ):
            with open(os.path.join(logs, f"{name}.full.txt"), "w") as f:
                f.write(raw_log(backend, args.records, scale))
        with open(os.path.join(logs, "correctness.junit.xml"), "w") as f:
            f.write(
                "<testsuites><testsuite>"
                + "".join(
                    f'<testcase classname="tests.kernels.test_bench" name="test_op[{i}]"/>' for i in range(args.records)
                )
                + "</testsuite></testsuites>"
            )
        times, cpu = [], []
        for _ in range(args.repeat):
            records._config_key.cache_clear()  # every run starts cold
            start, start_cpu = time.perf_counter(), time.process_time()
            status = report.main(["--kernel", "bench", "--dir", tmp])
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        elapsed = min(times)
    total = 4 * args.records
    print(
        f"bench_report: {args.records} port records ({total} records in 4 logs) + {args.records} junit cases: "
        f"report in {elapsed:.2f} s wall, best of {args.repeat} (all: {', '.join(f'{t:.2f}' for t in times)}; "
        f"CPU {min(cpu):.2f} s; goal < {GOAL_S:.0f} s wall)"
    )
    return 0 if status == 0 and elapsed < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
