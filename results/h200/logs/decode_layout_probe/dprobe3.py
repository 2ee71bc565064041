"""Does where the inputs lie (relative to the L2 flush buffer) move a decode-size time?  A fresh
process per order: 'inputs' = inputs then flush buffer (a fresh test_perf), 'buffer' = flush
buffer then inputs (a later test_perf), 'rotate' = buffer, then 8 input sets with 1-8 MB spacers
between them, one set per sample in turn."""
import sys

import torch

sys.path[:0] = [".", "tools"]
from tilekit import bench, kernel  # noqa: E402

JOBS = {
    "rms": ("rms_norm", {"dtype": "bfloat16", "m": 256, "n": 4096},
            {"block": 4096, "occupancy": 2, "pointer": 1, "programs_per_sm": 0, "rows": 1}, "liger"),
    "silu": ("silu_and_mul", {"dtype": "bfloat16", "m": 256, "h": 14336},
             {"block": 1024, "occupancy": 8, "rows": 1}, "tilegym"),
}
job, order = sys.argv[1], sys.argv[2]
k, cfg, V, peer = JOBS[job]
spec = kernel.load(k)
dev = torch.cuda.current_device()
if order == "inputs":
    sets = [spec.make_inputs(cfg)]
    bench._flush_buffer(dev)
else:
    bench._flush_buffer(dev)
    sets, spacers = [], []
    for i in range(8 if order == "rotate" else 1):
        spacers.append(torch.empty((i + 1) << 20, dtype=torch.int8, device="cuda"))
        sets.append(spec.make_inputs(cfg))
state = {"i": 0}


def make(fn):
    def call():
        inp = sets[state["i"] % len(sets)]
        state["i"] += 1
        return fn(inp)
    return call


calls = {"port": make(lambda inp: spec.run_port(inp, variant=V)), peer: make(lambda inp: spec.run_baseline(peer, inp))}
for c in calls.values():
    for _ in range(8):
        c()
torch.cuda.synchronize()
for b in range(2):
    s = "; ".join(f"{n} {bench.time_cupti(c, nrep=100).stats()['median_ms'] * 1e3:.3f}" for n, c in calls.items())
    print(f"{job:>5} {order:>7} block {b}: {s}", flush=True)
