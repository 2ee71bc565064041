"""First light of a kernel port on a GPU: is the chain alive, and roughly how fast?

    python scripts/gpu_smoke.py [--kernel rms_norm]

For each dtype and a few shapes (irregular ones included): fresh random inputs, the output
poisoned with NaN, the port called through the C ABI, compared with a float64 reference
(relative L2 error, max abs error, unwritten elements). Prints the first call's wall time (the
JIT: Rust -> Tile IR -> tileiras -> cubin) and a rough per-call time (median of CUDA-event timed
calls, L2 not flushed). This is a smoke test: the benchmark of record is `make perf` (CUPTI).
Set CUTILE_JIT_TIMING=1 to see cutile's per-stage compile times on stderr.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch


def rms_norm_case(dtype, m, n, row_stride=None):
    from kernels.rms_norm.op import rms_norm

    stride = row_stride or n
    x = torch.randn(m, stride, device="cuda", dtype=dtype)[:, :n]
    w = (1 + 0.1 * torch.randn(n, device="cuda")).to(dtype)
    eps = 1e-6
    ref = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + eps) * w.double()
    out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    return (lambda: rms_norm(x, w, eps, out=out)), out, ref, 2 * m * n * x.element_size()


CASES = {
    "rms_norm": [
        (1, 1, None), (3, 1000, None), (257, 4097, None), (4096, 4096, 5000),
        (262144, 1024, None), (65536, 8192, None), (65536, 16384, None),
    ],
}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", default="rms_norm", choices=sorted(CASES))
    p.add_argument("--reps", type=int, default=50)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_smoke: BLOCKED: torch sees no CUDA GPU")
        return 2
    print(f"gpu_smoke: {torch.cuda.get_device_name()} torch {torch.__version__}")
    print(f"{'dtype':<9} {'shape':<20} {'rel_l2':>9} {'max_abs':>9} {'nan':>4} {'first_ms':>9} {'call_ms':>9} {'GB/s':>7}")
    worst = 0.0
    failures = 0
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for m, n, stride in CASES[args.kernel]:
            call, out, ref, nbytes = rms_norm_case(dtype, m, n, stride)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            try:
                call()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - report and go on to the next case
                print(f"{str(dtype)[6:]:<9} {f'{m}x{n}':<20} FAILED: {e}")
                failures += 1
                continue
            first_ms = (time.perf_counter() - t0) * 1e3
            nan = int(torch.isnan(out).sum())
            diff = out.double() - ref
            rel = float(diff.norm() / ref.norm().clamp_min(1e-30))
            max_abs = float(diff.abs().max())
            worst = max(worst, rel)
            times = []
            for _ in range(args.reps):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                call()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
            times.sort()
            ms = times[len(times) // 2]
            shape = f"{m}x{n}" + (f"/ld{stride}" if stride else "")
            print(f"{str(dtype)[6:]:<9} {shape:<20} {rel:9.2e} {max_abs:9.2e} {nan:4d} {first_ms:9.1f} {ms:9.4f} {nbytes / ms / 1e6:7.0f}")
            failures += nan > 0 or rel > 1e-2
    print(f"gpu_smoke: worst rel_l2 {worst:.2e}; {failures} failing case(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
