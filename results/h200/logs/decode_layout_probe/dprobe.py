"""Decode-size timing probe: is the port-vs-peer order at 2-7 us a property of the kernels or of
how the samples were taken?  Modes: blocks of 100 samples (the perf harness's time_cupti) repeated
in rotating order; interleaved single samples (each round: every backend once, L2 flushed before
each); time_cupti without the flush."""
import json
import statistics
import subprocess
import sys
import time

import torch

sys.path[:0] = [".", "tools"]
from tilekit import bench, kernel  # noqa: E402

JOBS = {
    "silu": ("silu_and_mul", {"dtype": "bfloat16", "m": 256, "h": 14336},
             {"block": 1024, "occupancy": 8, "rows": 1}, ["tilegym", "liger", "triton"]),
    "rms": ("rms_norm", {"dtype": "bfloat16", "m": 256, "n": 4096},
            {"block": 4096, "occupancy": 2, "pointer": 1, "programs_per_sm": 0, "rows": 1},
            ["liger", "tilegym", "triton"]),
    "ln": ("layer_norm", {"dtype": "bfloat16", "m": 256, "n": 4096},
           {"block": 4096, "occupancy": 2, "pointer": 1, "programs_per_sm": 0, "rows": 1},
           ["liger", "liger_cutile", "tilegym"]),
}


def clocks():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout
        return out.strip()
    except Exception as e:  # noqa: BLE001
        return f"? {e}"


def calls_for(job, only=None):
    k, cfg, v, bls = JOBS[job]
    spec = kernel.load(k)
    inp = spec.make_inputs(cfg)
    calls = {"port": lambda: spec.run_port(inp, variant=v)}
    for b in bls:
        calls[b] = lambda b=b: spec.run_baseline(b, inp)
    if only:
        calls = {only: calls[only]}
    for c in calls.values():
        for _ in range(5):
            c()
    torch.cuda.synchronize()
    return calls


def us(x):
    return f"{x * 1000:.3f}"


def interleaved(calls, rounds):
    from torch.profiler import ProfilerActivity, profile
    buf = bench._flush_buffer(torch.cuda.current_device())
    got = {n: [] for n in calls}
    names = list(calls)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            buf.zero_()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                calls[n]()
                torch.cuda.synchronize()
            got[n].append(sum(ms for _, ms in bench.device_activities(prof)))
    return got


def main():
    mode = sys.argv[1]
    if mode == "one":  # a fresh process: one backend, one block of 100, as test_perf does
        job, only = sys.argv[2], sys.argv[3]
        calls = calls_for(job, only)
        t = bench.time_cupti(calls[only], nrep=100).stats()
        print(f"FRESH {job} {only} median {us(t['median_ms'])} min {us(t['min_ms'])} us  clocks {clocks()}", flush=True)
        return
    for job in JOBS:
        calls = calls_for(job)
        names = list(calls)
        print(f"== {job}: {JOBS[job][1]}  clocks {clocks()}", flush=True)
        for rep in range(3):
            order = names[rep % len(names):] + names[:rep % len(names)]
            line = []
            for n in order:
                t = bench.time_cupti(calls[n], nrep=100).stats()
                line.append(f"{n} {us(t['median_ms'])} (min {us(t['min_ms'])})")
            print(f"  block rep {rep}: " + "; ".join(line) + f"  clocks {clocks()}", flush=True)
        got = interleaved(calls, 300)
        print("  interleaved x300: " + "; ".join(
            f"{n} {us(statistics.median(s))} [q25 {us(statistics.quantiles(s, n=4)[0])}, q75 {us(statistics.quantiles(s, n=4)[2])}]"
            for n, s in got.items()), flush=True)
        line = []
        for n in names:
            t = bench.time_cupti(calls[n], nrep=100, flush=False).stats()
            line.append(f"{n} {us(t['median_ms'])}")
        print("  no flush: " + "; ".join(line), flush=True)
        del calls
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
