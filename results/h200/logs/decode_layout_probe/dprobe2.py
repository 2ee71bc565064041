"""Why a fresh process times rms_norm 256x4096 ~0.4 us slower than a long-lived one: blocks of 100
(time_cupti) of the port and Liger before and after one treatment, in a fresh process each."""
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path[:0] = [".", "tools"]
from tilekit import bench, kernel  # noqa: E402

spec = kernel.load("rms_norm")
cfg = {"dtype": "bfloat16", "m": 256, "n": 4096}
V = {"block": 4096, "occupancy": 2, "pointer": 1, "programs_per_sm": 0, "rows": 1}
inp = spec.make_inputs(cfg)
calls = {"port": lambda: spec.run_port(inp, variant=V), "liger": lambda: spec.run_baseline("liger", inp)}
for c in calls.values():
    for _ in range(5):
        c()
torch.cuda.synchronize()


def blocks(tag, k=2):
    for i in range(k):
        s = "; ".join(f"{n} {bench.time_cupti(c, nrep=100).stats()['median_ms'] * 1e3:.3f}" for n, c in calls.items())
        print(f"{treat:>10} {tag} block {i}: {s}", flush=True)


treat = sys.argv[1]
blocks("before")
t0 = time.time()
if treat == "control":
    pass
elif treat == "profwarm":  # 1000 profiler sessions around a tiny op
    a = torch.zeros(16, device="cuda")
    for _ in range(1000):
        with profile(activities=[ProfilerActivity.CUDA]):
            a.add_(1)
            torch.cuda.synchronize()
elif treat == "gpuwarm":  # ~2 s of dense GPU work
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    while time.time() - t0 < 2:
        a @ a
    torch.cuda.synchronize()
elif treat == "calls":  # 3000 more calls of each, no profiler
    for _ in range(3000):
        for c in calls.values():
            c()
    torch.cuda.synchronize()
elif treat == "alloc":  # 20 GB allocated and freed through the caching allocator, then empty_cache
    big = [torch.empty(1 << 30, dtype=torch.int8, device="cuda") for _ in range(20)]
    del big
    torch.cuda.empty_cache()
elif treat == "sleep":
    time.sleep(3)
print(f"{treat:>10} treatment took {time.time() - t0:.1f} s", flush=True)
blocks("after", 3)
