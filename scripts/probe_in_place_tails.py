"""Probe the body-and-tail candidates of the row kernels in place (out = x) against a float64 reference,
one call a candidate: where a GPU gives a wrong answer for one candidate and form and not the others.

    python scripts/probe_in_place_tails.py [--shapes 257x4097 64x4097 16x5120]

On a GPU host (the bundle: `export TILEKIT_GPU_HOME=$PWD/.gpu-home; . scripts/gpu_host_env.sh bundle`,
then `python3 scripts/probe_in_place_tails.py`; it finds the repository's `kernels` and `tools` itself). For fused_add_rms_norm every
candidate of op.variants plus its two-row tail (the H100 run of 2026-12-06 found it wrong in place at
n = 4097, kernels/fused_add_rms_norm/NOTES.md; ffi.rs refuses it since, so the probe prints that refusal
until the refusal is lifted to re-check it); for rms_norm, layer_norm and softmax their body-and-tail
candidates at two rows and at one. Prints one line per kernel, shape and candidate:
the largest |y - ref| / (1 + |ref|) and its (row, column), into a new tensor and in place. Times nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worst(y, want) -> str:
    d = (y.double() - want).abs() / (1 + want.abs())
    i = int(d.argmax())
    return f"{float(d.max()):.2e}@{divmod(i, want.shape[-1])}"


def probe(name: str, call, ref, x, candidates) -> None:
    """call(x, variant, out) into a new tensor and into x itself (a copy), each against ref."""
    import torch

    for v in candidates:
        try:
            fresh = call(x, v, None)
            own = x.clone()
            call(own, v, own)
            torch.cuda.synchronize()
            print(f"{name} {tuple(x.shape)} {v}: new out {worst(fresh, ref)}; in place {worst(own, ref)}", flush=True)
        except Exception as e:  # noqa: BLE001 - a refused candidate is a line of the probe, not its end
            print(f"{name} {tuple(x.shape)} {v}: {type(e).__name__}: {str(e)[:160]}", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", default=["257x4097", "64x4097", "16x5120"], help="m x n, bf16")
    args = p.parse_args(argv)
    sys.path[:0] = [str(ROOT), str(ROOT / "tools")]  # the kernels' ops and tilekit, from any folder
    import torch

    from kernels.fused_add_rms_norm import op as fa
    from kernels.layer_norm import op as ln
    from kernels.rms_norm import op as rn
    from kernels.softmax import op as sm
    from tilekit.runtime import port
    from tilekit.runtime.norm import variants as norm_variants

    def two_and_one(vs):
        return [dict(v, rows=r) for v in vs if v.get("tail") for r in (2, 1)]

    for shape in args.shapes:
        m, n = (int(s) for s in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        x, r = (torch.randn(m, n, device="cuda", generator=g).bfloat16() for _ in range(2))
        w = (1 + 0.1 * torch.randn(n, device="cuda", generator=g)).bfloat16()
        b = (0.1 * torch.randn(n, device="cuda", generator=g)).bfloat16()
        xd = x.double()

        def rms(t):
            return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()

        s = (x.float() + r.float()).bfloat16()
        fused = fa.variants(m, n) + [dict(v, rows=2) for v in fa.variants(m, n) if v.get("tail")]

        def fused_call(xx, v, out):
            if out is None:
                return fa.fused_add_rms_norm(xx, r, w, 1e-6, variant=v)[0]
            rr = r.clone()
            port.run(fa.__name__, v, (m, n), xx, xx, rr, w, 1e-6, mutated=(rr,))
            return xx

        probe("fused_add_rms_norm", fused_call, rms(s.double()), x, fused)
        tails = two_and_one(norm_variants(m, n))
        probe("rms_norm", lambda t, v, out: rn.rms_norm(t, w, 1e-6, variant=v, out=out), rms(xd), x, tails)
        ln_ref = torch.nn.functional.layer_norm(xd, (n,), w.double(), b.double(), 1e-5)
        probe("layer_norm", lambda t, v, out: ln.layer_norm(t, w, b, 1e-5, variant=v, out=out), ln_ref, x, tails)
        probe("softmax", lambda t, v, out: sm.softmax(t, variant=v, out=out), torch.softmax(xd, -1), x,
              two_and_one(sm.variants(m, n)))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
