"""fused_add_rms_norm: each candidate, functional and in place, against a float64 reference."""
import torch

from kernels.fused_add_rms_norm import op
from tilekit.runtime import port


def ref(x, r, w, eps):
    s = (x.float() + r.float()).to(x.dtype)
    sd = s.double()
    return sd * torch.rsqrt(sd.pow(2).mean(-1, keepdim=True) + eps) * w.double(), s.double()


def err(y, want):
    d = (y.double() - want).abs() / (1 + want.abs())
    i = int(d.argmax())
    return f"{float(d.max()):.2e}@{divmod(i, want.shape[-1])}"


for m, n in [(257, 4097), (64, 4097), (8, 5120), (16384, 5120), (19, 8195), (257, 8192)]:
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    r = torch.randn(m, n, device="cuda", generator=g).bfloat16()
    w = (1 + 0.1 * torch.randn(n, device="cuda", generator=g)).bfloat16()
    y_ref, s_ref = ref(x, r, w, 1e-6)
    for v in op.variants(m, n):
        out = op.fused_add_rms_norm(x, r, w, 1e-6, variant=v)
        xi, ri = x.clone(), r.clone()
        port.run(op.__name__, v, (m, n), xi, xi, ri, w, 1e-6, mutated=(ri,))
        torch.cuda.synchronize()
        print(f"{m}x{n} {v}: functional y {err(out[0], y_ref)} s {err(out[1], s_ref)}; in place y {err(xi, y_ref)} s {err(ri, s_ref)}", flush=True)
