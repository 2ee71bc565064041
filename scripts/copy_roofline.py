"""The bandwidth a plain device-to-device copy reaches on this GPU: torch's copy_ (one DRAM read and
one write per element) of the row kernels' perf shapes, timed like every benchmark (tilekit.runtime.bench:
CUPTI, L2 flushed, median). The ceiling a memory-bound kernel's GB/s is judged against (NOTES.md).

    python scripts/copy_roofline.py [--nrep 50] [--shapes 32768x8192 16384x18944]   # bf16
"""

from __future__ import annotations

import argparse

import torch

from tilekit.runtime.bench import time_cupti


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nrep", type=int, default=50)
    p.add_argument("--shapes", nargs="+", default=["32768x8192", "16384x16384", "65536x8192", "16384x18944"])
    args = p.parse_args()
    for shape in args.shapes:
        m, n = (int(v) for v in shape.split("x"))
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        ms = time_cupti(lambda: y.copy_(x), nrep=args.nrep).stats()["median_ms"]
        print(f"copy bf16 {m}x{n}: {ms:.4f} ms, {2 * x.numel() * x.element_size() / ms / 1e6:.0f} GB/s")


if __name__ == "__main__":
    main()
