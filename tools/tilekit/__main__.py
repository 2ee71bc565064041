"""``python -m tilekit <command> ...``: the thin CLI that Make calls.

Each command lives in the module of the same role and exposes ``main(argv) -> int``; this file
only dispatches, so ``python -m tilekit <command> --help`` shows that module's own options.
"""

import importlib
import sys

COMMANDS = {
    "sanitize": ("tilekit.reports.records", "split a raw pytest log into a clean record log and an investigation log"),
    "report": (
        "tilekit.reports.report",
        "re-sanitize raw logs and render reports/performance.md and reports/correctness.md",
    ),
    "validate": ("tilekit.reports.validate", "check every output file of a kernel; print a <VALIDATOR_OUTPUT> block"),
    "abi": ("tilekit.runtime.ffi", "list the exports kernels declare; compare the built library's ABI with Python's"),
    "summary": (
        "tilekit.reports.summary",
        "one row per kernel (verdicts, geomean, reference, best % of peak) in OUT_ROOT/summary.md",
    ),
    "doctor": ("tilekit.testing.doctor", "diagnose the build and GPU environment and print the fix for each problem"),
    "sweep": (
        "tilekit.testing.sweep",
        "shape sweeps: plan the cases, render or merge sweep/sweep.{csv,md,svg} (docs/sweep.md)",
    ),
    "new": (
        "tilekit.testing.scaffold",
        "write kernels/<name>/ from its closest relative (make new KERNEL=<name> FROM=<kernel>)",
    ),
    "model": (
        "tilekit.testing.model",
        "the model check: run a decoder stack on ports against PyTorch (GPU), or report from its log",
    ),
    "tilegym-tests": (
        "tilekit.testing.tilegym_tests",
        "TileGym's own op tests with the port as its cuTile backend (make KERNEL=<k> tilegym-tests TILEGYM_PATH=...)",
    ),
    "fingerprint": (
        "tilekit.testing.fingerprint",
        "write the timing environment (GPU, driver, versions) to FILE when it changed",
    ),
}


def usage() -> str:
    lines = ["usage: python -m tilekit <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"tilekit: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
