"""One launch of the port and of each named baseline per shape, for Nsight Compute to profile.

Every call runs three times first (the JIT, TileGym's own autotune), outside the profiled range;
then each runs once between cudaProfilerStart and cudaProfilerStop, so ncu's
`--profile-from-start off` sees exactly one launch per implementation, in the order printed:

    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section LaunchStats \\
        --section Occupancy --section WarpStateStats --section InstructionStats -o probe \\
        python scripts/ncu_probe.py --kernel silu_and_mul --variant '{"block": 1024, "occupancy": 8, "rows": 1}' \\
        --shapes '[{"dtype": "bfloat16", "m": 256, "h": 14336}]' --baselines tilegym liger triton
    ncu --import probe.ncu-rep --page details

ncu's durations are not the benchmarks' (it flushes every cache and serializes each launch);
compare implementations within one report, and time them with `make perf` or
scripts/sweep_variants.py.
"""

from __future__ import annotations

import argparse
import json

import torch

from tilekit import kernel


def parse(argv: list[str] | None = None):
    """(spec, configs, variant, baselines) from the command line; argparse's error (exit 2) names the
    flag for bad JSON, a config without the kernel's dims, or a baseline the kernel does not have."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", required=True)
    p.add_argument("--shapes", required=True, help="JSON list of configs (the spec's dims and dtype)")
    p.add_argument("--variant", default="auto", help='the port\'s variant: "auto", "default" or a JSON object')
    p.add_argument("--baselines", nargs="*", default=[])
    args = p.parse_args(argv)
    try:
        configs = json.loads(args.shapes)
        variant = args.variant if args.variant in ("auto", "default") else json.loads(args.variant)
    except ValueError as e:
        p.error(f'--shapes and --variant take JSON (e.g. --shapes \'[{{"dtype": "bfloat16", "m": 256}}]\'): {e}')
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        p.error("--shapes must be a JSON list of objects")
    spec = kernel.load(args.kernel)
    for cfg in configs:
        missing = [d for d in (*spec.dims, "dtype") if d not in cfg]
        if missing:
            p.error(f"--shapes: {cfg} lacks {missing} (kernels/{args.kernel}/spec.py dims: {list(spec.dims)})")
    have = spec.baselines().BACKENDS
    unknown = [b for b in args.baselines if b not in have]
    if unknown:
        p.error(f"--baselines: {unknown} are not baselines of {args.kernel} (it has: {' '.join(have)})")
    return spec, configs, variant, args.baselines


def main(argv: list[str] | None = None) -> None:
    spec, configs, variant, baselines = parse(argv)
    calls = []
    for cfg in configs:
        inputs = spec.make_inputs(cfg)
        calls.append((f"{cfg} port", lambda inputs=inputs: spec.run_port(inputs, variant=variant)))
        for b in baselines:
            calls.append((f"{cfg} {b}", lambda inputs=inputs, b=b: spec.run_baseline(b, inputs)))
    for _, call in calls:
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, call in calls:
        print("profiled:", name, flush=True)
        call()
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
