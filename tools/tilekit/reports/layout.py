"""The output tree under a kernel's folder (DESIGN.md, Make interface): one table of paths.

Every path is relative to the kernel's output folder (``$(OUT_ROOT)/K``), so a report that names
them still points at its logs once copied to ``results/<gpu>/<kernel>/``. report, validate and
summary read their paths here and nowhere else.
"""

from __future__ import annotations

import glob
import os

PORT_RAW = "reports/logs/perf_cutile_rs.full.txt"
PORT_CLEAN = "perf_cutile_rs.txt"
# `make settle`: the small configs, port and baselines timed in one process (records of every backend)
SETTLE_RAW = "reports/logs/settle_perf.full.txt"
SETTLE_CLEAN = "settle_perf.txt"
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
    names = [os.path.basename(p)[len("baseline_perf_") : -len(".full.txt")] for p in glob.glob(pattern)]
    return sorted(names)


class MissingInput(Exception):
    """An input file is absent; the message names the file and the make target that writes it."""
