"""layer_norm_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's declaration).
Touches no GPU at import.

The gradients of y = (x - mean) * rsqrt(var + eps) * w + b over the last dim for an output gradient
dy, stacked as one (m + 2, n) output: rows [0, m) dx, row m dw, row m + 1 db
(kernels/layer_norm_backward/op.py).
"""

from __future__ import annotations

import torch

from kernels.layer_norm_backward import op
from tilekit.runtime import norm_backward

EPS = 1e-5


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs: dy ~ N(0, 1), x ~ N(1, 1) (a mean to remove), w ~ 1 + N(0, 0.1)
    (tilekit.runtime.norm_backward.inputs)."""
    return norm_backward.inputs(cfg, device, seed, EPS, x_mean=1.0)


def reference(inputs: dict) -> torch.Tensor:
    """float64 dx (m rows), then dw and db (a row each)."""
    dy, x, w = (inputs[k].double() for k in ("dy", "x", "weight"))
    var, mean = torch.var_mean(x, -1, correction=0, keepdim=True)
    x_hat = (x - mean) * torch.rsqrt(var + inputs["eps"])
    g = w * dy
    dx = torch.rsqrt(var + inputs["eps"]) * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    return torch.cat((dx, (dy * x_hat).sum(0, keepdim=True), dy.sum(0, keepdim=True)))


SPEC = norm_backward.spec(op, 2, make_inputs=make_inputs, reference=reference)
