"""Time every variant of a kernel's baselines and of its port on the perf configs, to choose the
baselines' forms (keep the faster) and to see the port's autotune space whole.

    python scripts/sweep_variants.py --kernel rms_norm [--nrep 30] [--configs 0 2]
        [--shapes '[{"dtype": "bfloat16", "m": 256, "n": 11008}]']
        [--backends triton cutile cutile_rs torch tilegym liger liger_cutile] [--extra '[{"block": 1024, "rows": 2, "occupancy": 8}]']
        [--only-extra] [--kernels | --launches]

Same CUPTI timer as the benchmarks (tilekit.runtime.bench). Baseline variants come from
`kernels/<k>/baselines.py` (VARIANTS of ours; torch and the providers are timed once); port variants
from `kernels/<k>/op.py` (`variants(**dims)`) plus any `--extra` ones (a JSON list of variant
dicts, candidates not yet in the autotune space; `--only-extra` times just those); all are called through the kernel's declaration
(`kernels/<k>/spec.py`'s SPEC: run_port / run_baseline). Prints one line per (config, backend,
variant) with GB/s (and TFLOP/s where the declaration has `flops`) and, per config, the fastest of
each backend with the port's fastest time over each baseline's (one process, the same inputs; at a
few µs run it in several backend orders and processes and compare the spread, docs/reports.md
"Configs of a few µs"). `--kernels` adds, under each line, every kernel the call launched with its
median over the same samples and its share of the call (where a multi-kernel op's time goes: the
products, the loss pass, a reduction); `--launches` instead lists each launch of the call in
order (fused_linear_cross_entropy's three products run one kernel function, so `--kernels` sums them
under one name). Failing variants are printed, not fatal. `--shapes` times configs that are in no
spec (a JSON list of configs with the spec's dims and a dtype), e.g. shapes from real models.
"""

from __future__ import annotations

import argparse
import json
import sys


def config_label(cfg: dict) -> str:
    """'bfloat16 m=4096 n=4096 k=4096': the dtype, then every size in the config's order."""
    sizes = " ".join(f"{k}={v}" for k, v in cfg.items() if k != "dtype")
    return f"{cfg.get('dtype', '?'):<9} {sizes}"


def rates(spec, cfg: dict, ms: float) -> str:
    out = f"{spec.bytes_moved(cfg) / ms / 1e6:7.0f} GB/s"
    if spec.flops:
        out += f" {spec.flops(cfg) / ms / 1e9:7.1f} TFLOP/s"
    return out


def calls_for(backend: str, spec, baselines, cfg: dict, inputs: dict, extra: list[dict], only_extra: bool = False):
    """{variant name: zero-argument call}, or a string saying why the backend is skipped."""
    if backend == "cutile_rs":
        from tilekit.runtime import autotune

        # a null knob is the export's default, as in the variants op.py lists (autotune.unique)
        candidates = autotune.unique(([] if only_extra else spec.variants(cfg)) + extra)
        return {json.dumps(v, sort_keys=True): (lambda v=v: spec.run_port(inputs, variant=v)) for v in candidates}
    if backend not in baselines.BACKENDS:
        return f"not a backend of this kernel (have: cutile_rs {' '.join(baselines.BACKENDS)})"
    reason = baselines.unavailable_reason(backend)
    if reason:
        return reason
    names = getattr(baselines, "VARIANTS", ()) if backend in ("cutile", "triton") else ()  # ours have variants
    if not names:
        return {"-": lambda: spec.run_baseline(backend, inputs)}
    return {v: (lambda v=v: spec.run_baseline(backend, inputs, variant=v)) for v in names}


def json_dicts(p, flag: str, text: str, example: str) -> list[dict]:
    """A JSON list of objects from a command-line flag, or argparse's error naming the flag."""
    try:
        value = json.loads(text)
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise ValueError("not a list of objects")
    except ValueError as e:
        p.error(f"{flag} must be a JSON list of objects, e.g. '{example}': {e}")
    return value


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", default="rms_norm")
    p.add_argument("--nrep", type=int, default=30)
    p.add_argument("--backends", nargs="+", default=["triton", "cutile", "cutile_rs"])
    p.add_argument("--configs", nargs="+", type=int, help="indices into SPEC.perf_configs (default: all)")
    p.add_argument("--shapes", help="JSON list of configs to time instead of the spec's perf configs")
    p.add_argument("--extra", default="[]", help="JSON list of extra port variants to time")
    p.add_argument("--only-extra", action="store_true", help="time the port's --extra variants only, not op.variants")
    p.add_argument("--kernels", action="store_true", help="print each call's kernels with their median times")
    p.add_argument("--launches", action="store_true", help="print each launch of a call in order with its median time")
    args = p.parse_args(argv)
    extra = json_dicts(p, "--extra", args.extra, '[{"block": 1024}]')
    if args.kernels and args.launches:
        p.error("--kernels and --launches are two views of the same samples: give one")
    if args.only_extra and not extra:
        p.error("--only-extra times the --extra variants alone: give some, e.g. --extra '[{\"block\": 1024}]'")
    shapes = (
        json_dicts(p, "--shapes", args.shapes, '[{"dtype": "float16", "m": 256, "n": 4097}]') if args.shapes else None
    )

    from tilekit.runtime import bench, kernel
    from tilekit.testing import model

    spec = kernel.load(args.kernel)
    baselines = spec.baselines()
    best = {}
    configs = shapes or ([spec.perf_configs[i] for i in args.configs] if args.configs else spec.perf_configs)
    for cfg in configs:
        if error := spec.config_error(cfg):
            p.error(f"--shapes: {error}")
    for cfg in configs:
        inputs = spec.make_inputs(cfg)
        label = config_label(cfg)
        for backend in args.backends:
            calls = calls_for(backend, spec, baselines, cfg, inputs, extra, args.only_extra)
            if isinstance(calls, str):
                print(f"{label} {backend}: skipped: {calls}", flush=True)
                continue
            for name, call in calls.items():
                try:
                    if args.kernels or args.launches:  # the same policy (L2 flushed), per kernel or launch too
                        timing = model.profile(call, args.nrep, launches=args.launches)
                        ms, per_kernel = timing["median_ms"], timing["kernels"]
                    else:
                        ms, per_kernel = bench.time_cupti(call, nrep=args.nrep, warmup=3).stats()["median_ms"], {}
                    if ms <= 0:  # model.profile does not refuse a call CUPTI saw nothing of (time_cupti does)
                        raise RuntimeError("CUPTI saw no device activity for this call")
                except Exception as e:  # noqa: BLE001 - print and go on
                    print(f"{label} {backend:<9} {name:<50} FAILED {str(e)[:300]}", flush=True)
                    continue
                print(f"{label} {backend:<9} {name:<50} {ms:10.6f} ms {rates(spec, cfg, ms)}", flush=True)
                if per_kernel:
                    print("\n".join(kernel_lines(per_kernel, ms, ordered=args.launches)), flush=True)
                key = (label, backend)
                if key not in best or ms < best[key][1]:
                    best[key] = (name, ms)
        del inputs
    print("\n".join(summary_lines(best)))
    return 0


def kernel_lines(per_kernel: dict, total_ms: float, *, ordered: bool = False) -> list[str]:
    """One line per kernel of a call, slowest first (`ordered`: as given, e.g. launch order): its
    median ms, its share of the call's median and its name (cut at 120 characters). The medians are
    per kernel, so they need not sum to the call's."""
    items = per_kernel.items() if ordered else sorted(per_kernel.items(), key=lambda kv: -kv[1])
    return [f"    {ms:10.6f} ms {ms / total_ms:6.1%}  {name[:120]}" for name, ms in items]


def summary_lines(best: dict) -> list[str]:
    """The fastest variant per (config, backend), and for each baseline the port's fastest time over
    its own: a ratio from one process and the same inputs, where the perf stages time each backend in
    its own process. At a few µs even this ratio moves with the backend order (docs/reports.md,
    "Configs of a few µs")."""
    lines = ["", "fastest per config and backend (port / baseline: this process, the same tensors):"]
    for (label, backend), (name, ms) in best.items():
        port = best.get((label, "cutile_rs"))
        versus = f"  port / {backend} {port[1] / ms:.4f}" if port and backend != "cutile_rs" else ""
        lines.append(f"  {label} {backend:<9} {ms:10.6f} ms  {name}{versus}")
    return lines


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
