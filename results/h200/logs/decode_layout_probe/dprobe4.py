"""Can a canonical layout (empty_cache, a fresh flush buffer, then the inputs) make a decode-size
time independent of the process's allocation history?  One process walks five histories (junk
kept alive, as earlier tests leave it); 'plain' allocates the inputs as the harness does now
(flush buffer from the first timing), 'canon' re-lays buffer and inputs before each timing."""
import gc
import sys

import torch

sys.path[:0] = [".", "tools"]
from tilekit import bench, kernel  # noqa: E402

JOBS_ALL = {
    "ln": ("layer_norm", {"dtype": "bfloat16", "m": 256, "n": 4096},
           {"block": 4096, "occupancy": 2, "pointer": 1, "programs_per_sm": 0, "rows": 1}, "liger"),
    "swiglu": ("swiglu", {"dtype": "bfloat16", "m": 256, "h": 14336}, {"block": 2048, "occupancy": 8, "rows": 1}, "triton"),
    "rms": ("rms_norm", {"dtype": "bfloat16", "m": 256, "n": 4096},
            {"block": 4096, "occupancy": 2, "pointer": 1, "programs_per_sm": 0, "rows": 1}, "liger"),
    "silu": ("silu_and_mul", {"dtype": "bfloat16", "m": 256, "h": 14336},
             {"block": 1024, "occupancy": 8, "rows": 1}, "tilegym"),
}
mode = sys.argv[1]
JOBS = {j: JOBS_ALL[j] for j in sys.argv[2].split(",")}
dev = torch.cuda.current_device()
junk = []
HIST = [0, 37, 250, 3, 1100]  # MB kept alive before each round
bench._flush_buffer(dev)
for r, mb in enumerate(HIST):
    junk.append(torch.empty(mb << 20, dtype=torch.int8, device="cuda"))
    tmp = torch.empty((r + 1) * 700 << 20, dtype=torch.int8, device="cuda")  # allocated and freed
    del tmp
    line = []
    for job, (k, cfg, V, peer) in JOBS.items():
        spec = kernel.load(k)
        if mode == "canon":
            gc.collect()
            torch.cuda.synchronize()
            bench._flush_buffer.cache_clear()
            torch.cuda.empty_cache()
            bench._flush_buffer(dev)
        inp = spec.make_inputs(cfg)
        calls = {"port": lambda: spec.run_port(inp, variant=V or "auto"), peer: lambda: spec.run_baseline(peer, inp)}
        for c in calls.values():
            for _ in range(5):
                c()
        torch.cuda.synchronize()
        t = {n: bench.time_cupti(c, nrep=100).stats()["median_ms"] * 1e3 for n, c in calls.items()}
        line.append(f"{job}: " + " ".join(f"{n} {v:.3f}" for n, v in t.items()) + f" ratio {t['port'] / t[peer]:.3f}")
        del calls, inp
    print(f"{mode:>5} history {r} ({mb} MB): " + "; ".join(line), flush=True)
