"""First light of kernel ports on a GPU: is the chain alive, and roughly how fast?

    python scripts/gpu_smoke.py [--kernel softmax matmul] [--reps 50]

For every kernel (default: all of kernels/), each dtype and correctness shape of its declaration
(kernels/<k>/spec.py's SPEC) and each perf config: fresh random inputs, the output poisoned with
NaN, the port called through the C ABI (variant "auto"), compared with the float64 reference
(relative L2 error, max abs error, unwritten elements) against the declared tolerance. Prints the
first call's wall time (the JIT: Rust -> Tile IR -> tileiras -> cubin, and autotune the first
time a shape class is seen; TILEKIT_AUTOTUNE=0 skips tuning) and a rough per-call time (median of
CUDA-event timed calls, L2 not flushed) with GB/s, or TFLOP/s where the kernel declares flops. The
last line has the process's JIT counters (tileiras runs, disk-cache hits: a second run compiles
nothing when the cache under $TILEKIT_CACHE is warm, docs/sweep.md).
This is a smoke test: the results of record are `make test` and `make perf` (CUPTI). Set
CUTILE_JIT_TIMING=1 to see cutile's per-stage compile times on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from tilekit.runtime import ffi, kernel


def smoke(spec, cfg: dict, reps: int) -> bool:
    """One line for one config; True when it passed."""
    label = f"{spec.name:<13} {cfg['dtype']:<9} {spec.shape_id(cfg):<28}"
    inputs = spec.make_inputs(cfg)
    out = spec.make_out(cfg, inputs)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    try:
        spec.run_port(inputs, out=out)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - report and go on to the next case
        print(f"{label} FAILED: {e}", flush=True)
        return False
    first_ms = (time.perf_counter() - t0) * 1e3
    ref = spec.reference(inputs)
    nan = int(torch.isnan(out).sum())
    diff = out.double() - ref
    rel = float(diff.norm() / ref.norm().clamp_min(1e-30))
    worst = float((diff.abs() / (1 + ref.abs())).max())
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        spec.run_port(inputs, out=out)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    ms = sorted(times)[len(times) // 2]
    rate = (
        f"{spec.flops(cfg) / ms / 1e9:7.1f} TFLOP/s" if spec.flops else f"{spec.bytes_moved(cfg) / ms / 1e6:7.0f} GB/s"
    )
    tol = spec.tolerance[cfg["dtype"]]
    ok = nan == 0 and rel <= tol[0] and worst <= tol[1]
    print(
        f"{label} {rel:9.2e} {worst:9.2e} {nan:4d} {first_ms:9.1f} {ms:9.4f} {rate}{'' if ok else '  FAIL'}", flush=True
    )
    return ok


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", nargs="+", default=kernel.names(), choices=kernel.names())
    p.add_argument("--reps", type=int, default=50)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_smoke: BLOCKED: torch sees no CUDA GPU")
        return 2
    print(f"gpu_smoke: {torch.cuda.get_device_name()} torch {torch.__version__}")
    print(
        f"{'kernel':<13} {'dtype':<9} {'shape':<28} {'rel_l2':>9} {'max_err':>9} {'nan':>4} {'first_ms':>9} {'call_ms':>9} rate"
    )
    failures = 0
    for name in args.kernel:
        spec = kernel.load(name)
        configs = [dict(s, dtype=d) for s in spec.correctness_shapes for d in spec.dtypes] + spec.perf_configs
        failures += sum(not smoke(spec, cfg, args.reps) for cfg in configs)
    print(f"gpu_smoke: {failures} failing case(s); JIT in this process: {ffi.library().jit_stats()}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
