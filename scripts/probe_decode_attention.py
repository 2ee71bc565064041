"""Where a decode attention call's time goes: each kernel's median duration, per variant of the port
and for SDPA's backends, on three decode shapes of Llama-3-8B's attention (batch 1 and 64, and MQA at
batch 8; --shapes for others), causal, bf16.

    python scripts/probe_decode_attention.py [--shapes '[{"b": 1, "h": 32, "hkv": 8, "sq": 1, "skv": 8192, ...}]']
        [--pages 16,256]

On a GPU host (the bundle: `export TILEKIT_GPU_HOME=$PWD/.gpu-home; . scripts/gpu_host_env.sh bundle`,
then `python3 scripts/probe_decode_attention.py`; it finds the repository's `kernels` and `tools`
itself). Each call is sampled
`--nrep` times as the model check samples a step (tilekit.testing.model.profile: the L2 flushed,
CUPTI's device activities, as `make perf`); printed per implementation: the median of the sum (the
kit's figure), each kernel's median, the K and V bytes once over that time, and the output's largest
error against float32 SDPA on the same inputs (checked before the timing). The port's variants
are its decode candidates (op.variants), the split counts of `--splits` and the variants of
`--variants`. `--pages` adds op.attention_paged over the same keys and values laid out in pages of
each size, in a shuffled page order (its candidates, op.paged_variants): what a paged cache costs
over a contiguous one. Times nothing the reports use; kernels/attention/NOTES.md cites what it printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_SHAPES = [
    {"b": 1, "h": 32, "hkv": 8, "sq": 1, "skv": 8192},
    {"b": 8, "h": 32, "hkv": 1, "sq": 1, "skv": 8192},
    {"b": 64, "h": 32, "hkv": 8, "sq": 1, "skv": 4096},
    # where the split count's rounding decides the waves: GQA 8 (64 pairs), batch 16 (128 pairs)
    {"b": 8, "h": 64, "hkv": 8, "sq": 1, "skv": 8192},
    {"b": 16, "h": 32, "hkv": 8, "sq": 1, "skv": 8192},
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", help="JSON list of {b, h, hkv, sq, skv} (d 128, bf16, causal)")
    p.add_argument("--splits", default="8,16,32,64,128", help="extra split counts of the port, comma-separated")
    p.add_argument(
        "--variants",
        default="[]",
        help='JSON list of extra port variants, e.g. [{"bn": 32, "occupancy": 2, "splits": -2}]',
    )
    p.add_argument("--nrep", type=int, default=30)
    p.add_argument(
        "--pages", default="", help="page sizes of op.attention_paged runs, comma-separated (none: no paged run)"
    )
    args = p.parse_args(argv)
    sys.path[:0] = [str(ROOT), str(ROOT / "tools")]  # kernels.attention and tilekit, from any folder
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels.attention import op
    from tilekit.testing.model import profile

    shapes = json.loads(args.shapes) if args.shapes else DEFAULT_SHAPES
    for s in shapes:
        b, h, hkv, sq, skv, d = s["b"], s["h"], s["hkv"], s["sq"], s["skv"], s.get("d", 128)
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(b, h, sq, d, device="cuda", generator=g).bfloat16()
        k, v = (torch.randn(b, hkv, skv, d, device="cuda", generator=g).bfloat16() for _ in range(2))
        kv_bytes = 2 * k.numel() * k.element_size()
        # the port's causal mask ends at the last key (query i sees keys <= i + s_kv - s_q); SDPA's
        # is_causal starts at the first, so past one query the mask is explicit (a backend that
        # refuses it prints its reason)
        mask = None if sq == 1 else torch.ones(sq, skv, dtype=torch.bool, device="cuda").tril(skv - sq)
        cands = [c for c in op.variants(b, h, hkv, sq, skv, d) if c.get("splits")]
        cands += [dict(bm=64, bn=64, occupancy=-1, warps=-1, splits=int(n)) for n in args.splits.split(",") if n]
        cands += [dict(dict(bm=64, bn=64, occupancy=-1, warps=-1, splits=-1), **v) for v in json.loads(args.variants)]
        runs = [
            (json.dumps(c, sort_keys=True), lambda c=c: op.attention(q, k, v, causal=True, variant=c)) for c in cands
        ]
        for page in (int(n) for n in args.pages.split(",") if n):
            runs += paged_runs(op, q, k, v, page, g)
        for name, backend in (("sdpa cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa flash", SDPBackend.FLASH_ATTENTION)):

            def call(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

            runs.append((name, call))
        # every output is checked against float32 SDPA (math) on the same inputs before it is timed
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, enable_gqa=True)
        print(f"== {s}: K and V {kv_bytes / 1e6:.1f} MB", flush=True)
        for name, fn in runs:
            try:
                err = (fn().float() - ref).abs().max().item()
                timing = profile(fn, args.nrep)
            except Exception as e:  # noqa: BLE001 - a refused variant or backend is a line, not the end
                print(f"  {name}: {type(e).__name__}: {str(e)[:140]}", flush=True)
                continue
            total = timing["median_ms"]
            kernels = "; ".join(f"{n[:60]} {ms * 1e3:.1f}" for n, ms in timing["kernels"].items())
            print(
                f"  {name}: {total * 1e3:.1f} us ({kv_bytes / total / 1e9:.2f} TB/s; max |err| {err:.1e}) = {kernels}",
                flush=True,
            )
    return 0


def paged_runs(op, q, k, v, page: int, g) -> list:
    """(name, call) of op.attention_paged over k and v (b, h_kv, s_kv, d) copied into pages of `page`
    keys, the pages of all sequences shuffled, one call per paged candidate."""
    import torch

    b, hkv, skv, d = k.shape
    n = -(-skv // page)
    order = torch.randperm(b * n, generator=g, device=q.device)  # where each sequence's page lies

    def cache(t):
        padded = torch.zeros(b, n * page, hkv, d, dtype=t.dtype, device=t.device)
        padded[:, :skv] = t.transpose(1, 2)
        pages = padded.view(b * n, page, hkv, d)
        return torch.empty_like(pages).index_copy_(0, order.view(-1), pages)

    kc, vc, table = cache(k), cache(v), order.view(b, n).to(torch.int32)
    lens = torch.full((b,), skv, dtype=torch.int32, device=q.device)
    cands = op.paged_variants(q.shape[1], hkv, q.shape[2], page)
    return [
        (
            f"paged {page} {json.dumps(c, sort_keys=True)}",
            lambda c=c: op.attention_paged(q, kc, vc, table, lens, variant=c),
        )
        for c in cands
    ]


if __name__ == "__main__":
    raise SystemExit(main())
