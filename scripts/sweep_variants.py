"""Time every variant of a kernel's baselines and of its port on the perf configs, to choose the
baselines' forms (keep the faster) and to see the port's autotune space whole.

    python scripts/sweep_variants.py --kernel rms_norm [--nrep 30] [--backends triton cutile cutile_rs]

Same CUPTI timer as the benchmarks (tilekit.bench). Baseline variants come from
`kernels/<k>/baselines.py` (VARIANTS); port variants from `kernels/<k>/spec.py`
(`variants(**cfg)`, called with the config minus its dtype); both are called through the spec's
`run_port` / `run_baseline`. Prints one line per (config, backend, variant)
and, per config, the fastest of each backend. Failing variants are printed, not fatal.
"""
from __future__ import annotations

import argparse
import importlib
import sys


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", default="rms_norm")
    p.add_argument("--nrep", type=int, default=30)
    p.add_argument("--backends", nargs="+", default=["triton", "cutile", "cutile_rs"])
    p.add_argument("--configs", nargs="+", type=int, help="indices into spec.PERF_CONFIGS (default: all)")
    args = p.parse_args(argv)

    from tilekit import bench

    spec = importlib.import_module(f"kernels.{args.kernel}.spec")
    baselines = importlib.import_module(f"kernels.{args.kernel}.baselines")
    best = {}
    configs = [spec.PERF_CONFIGS[i] for i in args.configs] if args.configs else spec.PERF_CONFIGS
    for cfg in configs:
        inputs = spec.make_inputs(cfg)
        nbytes = spec.bytes_moved(cfg)
        for backend in args.backends:
            if backend == "cutile_rs":
                shape = {k: v for k, v in cfg.items() if k != "dtype"}
                calls = {str(v): (lambda v=v: spec.run_port(inputs, variant=v)) for v in spec.variants(**shape)}
            else:
                reason = baselines.unavailable_reason(backend)
                if reason:
                    print(f"{backend}: skipped: {reason}")
                    continue
                calls = {v: (lambda v=v: spec.run_baseline(backend, inputs, variant=v)) for v in baselines.VARIANTS}
            for name, call in calls.items():
                try:
                    ms = bench.time_cupti(call, nrep=args.nrep, warmup=3).stats()["median_ms"]
                except Exception as e:  # noqa: BLE001 - print and go on
                    print(f"{cfg} {backend:<9} {name:<50} FAILED {str(e)[:200]}")
                    continue
                print(f"{cfg['dtype']:<9} {cfg['m']:>7}x{cfg['n']:<6} {backend:<9} {name:<50} {ms:9.4f} ms {nbytes / ms / 1e6:7.0f} GB/s", flush=True)
                key = (str(cfg), backend)
                if key not in best or ms < best[key][1]:
                    best[key] = (name, ms)
    print("\nfastest per config and backend:")
    for (cfg, backend), (name, ms) in best.items():
        print(f"  {cfg} {backend:<9} {ms:9.4f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
