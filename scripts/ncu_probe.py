"""One call of the port and of each named baseline per shape, for Nsight Compute to profile.

Every call runs three times first (the JIT, TileGym's own autotune), outside the profiled range;
then each runs once between cudaProfilerStart and cudaProfilerStop, inside an NVTX range named
after it ("<config> port", "<config> <baseline>"), so ncu's `--profile-from-start off` sees one
call per implementation (a call may launch more than one kernel: `--nvtx` shows which range each
kernel came from). One `--variant` serves every shape. For example, with the sections of the
report in silu_and_mul's NOTES.md (taken with a scratch form of this script, without `--nvtx`):

    ncu --clock-control none --profile-from-start off --nvtx --section SpeedOfLight \\
        --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \\
        --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters -o probe \\
        python scripts/ncu_probe.py --kernel silu_and_mul --variant '{"block": 1024, "occupancy": 8, "rows": 1}' \\
        --shapes '[{"dtype": "bfloat16", "m": 256, "h": 14336}]' --baselines tilegym liger triton
    ncu --import probe.ncu-rep --page details

ncu's durations are not the benchmarks' (one sample, every cache flushed, launches serialized);
compare implementations within one report, and time them with `make perf` or
scripts/sweep_variants.py. A baseline that cannot run here is skipped with its reason.
"""

from __future__ import annotations

import argparse
import json

import torch

from tilekit.runtime import kernel


def _json(p: argparse.ArgumentParser, flag: str, text: str, kind: type, example: str):
    """`text` parsed as JSON of type `kind`, or argparse's error (exit 2) naming the flag."""
    try:
        value = json.loads(text)
    except ValueError as e:
        p.error(f"{flag} takes JSON, e.g. {flag} '{example}': {e}")
    if not isinstance(value, kind):
        p.error(f"{flag} must be a JSON {kind.__name__}, e.g. {flag} '{example}'; got {text}")
    return value


def parse(argv: list[str] | None = None):
    """(spec, configs, variant, baselines) from the command line; argparse's error (exit 2) names the
    flag for an unknown kernel, bad JSON, no shape, a config without the kernel's dims, or a baseline
    the kernel does not have."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", required=True)
    p.add_argument("--shapes", required=True, help="JSON list of configs (the spec's dims and dtype)")
    p.add_argument("--variant", default="auto", help='the port\'s variant: "auto", "default" or a JSON object')
    p.add_argument("--baselines", nargs="*", default=[])
    args = p.parse_args(argv)
    if args.kernel not in kernel.names():
        p.error(f"--kernel {args.kernel}: no kernels/{args.kernel}/spec.py; one of: {' '.join(kernel.names())}")
    configs = _json(p, "--shapes", args.shapes, list, '[{"dtype": "bfloat16", "m": 256, "n": 4096}]')
    if not configs or not all(isinstance(c, dict) for c in configs):
        p.error(f"--shapes must list at least one JSON object (a config); got {args.shapes}")
    variant = args.variant
    if variant not in ("auto", "default"):
        variant = _json(p, "--variant", variant, dict, '{"block": 1024, "rows": 1}')
    spec = kernel.load(args.kernel)
    for cfg in configs:
        if error := spec.config_error(cfg):
            p.error(f"--shapes: {error}")
    have = spec.baselines().BACKENDS
    unknown = [b for b in args.baselines if b not in have]
    if unknown:
        p.error(f"--baselines: {unknown} are not baselines of {args.kernel} (it has: {' '.join(have)})")
    return spec, configs, variant, args.baselines


def main(argv: list[str] | None = None) -> None:
    spec, configs, variant, baselines = parse(argv)
    runnable = []
    for b in baselines:
        reason = spec.baselines().unavailable_reason(b)
        if reason:
            print(f"skipped {b}: {reason}", flush=True)
        else:
            runnable.append(b)
    calls = []
    for cfg in configs:
        inputs = spec.make_inputs(cfg)
        calls.append((f"{cfg} port", lambda inputs=inputs: spec.run_port(inputs, variant=variant)))
        for b in runnable:
            calls.append((f"{cfg} {b}", lambda inputs=inputs, b=b: spec.run_baseline(b, inputs)))
    for _, call in calls:
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, call in calls:
        print("profiled:", name, flush=True)
        torch.cuda.nvtx.range_push(name)
        call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
