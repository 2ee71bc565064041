"""rms_norm_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's declaration).
Touches no GPU at import.

The gradients of y = x * rsqrt(mean(x^2, -1) + eps) * w for an output gradient dy, stacked as one
(m + 1, n) output: rows [0, m) dx, row m dw (kernels/rms_norm_backward/op.py).
"""

from __future__ import annotations

import torch

from kernels.rms_norm_backward import op
from tilekit.runtime import norm_backward

EPS = 1e-6


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs: dy, x ~ N(0, 1), w ~ 1 + N(0, 0.1) (tilekit.runtime.norm_backward.inputs)."""
    return norm_backward.inputs(cfg, device, seed, EPS, x_mean=0.0)


def reference(inputs: dict) -> torch.Tensor:
    """float64 dx (m rows) then dw (one row)."""
    dy, x, w = (inputs[k].double() for k in ("dy", "x", "weight"))
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + inputs["eps"])
    x_hat, w_dy = x * r, w * dy
    dx = r * (w_dy - x_hat * (w_dy * x_hat).mean(-1, keepdim=True))
    return torch.cat((dx, (dy * x_hat).sum(0, keepdim=True)))


SPEC = norm_backward.spec(op, 1, make_inputs=make_inputs, reference=reference)
