"""fused_add_rms_norm_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's
declaration). Touches no GPU at import.

fused_add_rms_norm's gradients for the gradient dy of y = rms_norm(s) * w and dresidual of s = x +
residual, stacked as one (m + 1, n) output: rows [0, m) dx (= residual's gradient), row m dw
(kernels/fused_add_rms_norm_backward/op.py).
"""

from __future__ import annotations

import torch

from kernels.fused_add_rms_norm_backward import op
from tilekit.runtime import norm_backward
from tilekit.runtime.kernel import BadInput, FfiCase, call, torch_dtype

EPS = 1e-6


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """Fresh random inputs: dy, dresidual ~ N(0, 1), s ~ N(0, 1) (each in rows of row_stride where the
    shape has one), w ~ 1 + N(0, 0.1) (tilekit.runtime.norm_backward.inputs, and a second gradient)."""
    first = norm_backward.inputs(cfg, device, seed, EPS)
    second = norm_backward.inputs(cfg, device, None if seed is None else seed + 1, EPS)
    return {"dy": first["dy"], "dresidual": second["dy"], "s": first["x"], "weight": first["weight"], "eps": EPS}


def reference(inputs: dict) -> torch.Tensor:
    """float64 dx (m rows: the norm's gradient of s plus dresidual), then dw (one row)."""
    dy, dr, s, w = (inputs[k].double() for k in ("dy", "dresidual", "s", "weight"))
    r = torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + inputs["eps"])
    s_hat, w_dy = s * r, w * dy
    dx = r * (w_dy - s_hat * (w_dy * s_hat).mean(-1, keepdim=True)) + dr
    return torch.cat((dx, (dy * s_hat).sum(0, keepdim=True)))


def bytes_moved(cfg: dict) -> int:
    """Fewest bytes: dy, dresidual and s read once, dx written once, w read and dw written (n each)."""
    m, n = cfg["m"], cfg["n"]
    return (4 * m * n + 2 * n) * torch.finfo(torch_dtype(cfg["dtype"])).bits // 8


def _call(n: int = 8, dr: int = 8, w: int = 8):
    return lambda: call(torch.randn(4, n), torch.randn(4, dr), torch.randn(4, 8), torch.randn(w))


SPEC = norm_backward.spec(
    op,
    1,
    make_inputs=make_inputs,
    reference=reference,
    bytes_moved=bytes_moved,
    bad_inputs={
        "dy_shape": BadInput(_call(n=7), ValueError, "dy must have s's shape"),
        "dresidual_shape": BadInput(_call(dr=7), ValueError, "dresidual must have s's shape"),
        "weight_shape": BadInput(_call(w=7), ValueError, "weight must be (8,)"),
        "too_wide": BadInput(
            lambda: call(
                *(torch.randn(2, norm_backward.MAX_BLOCK + 1) for _ in range(3)),
                torch.randn(norm_backward.MAX_BLOCK + 1),
            ),
            ValueError,
            f"at most {norm_backward.MAX_BLOCK}",
        ),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(4, 8)}, message="it must be (m + 1, n) = [5, 8]"),
        "weight_len": FfiCase(lambda: {"weight": torch.randn(7)}, message="`weight` has 7 elements but x has n=8"),
        "dresidual_shape": FfiCase(
            lambda: {"dresidual": torch.randn(4, 7)}, message="`dy` shape [4, 8] != `dresidual` shape [4, 7]"
        ),
        "bad_block": FfiCase(variant={"block": 24}, message="block must be a power of two"),
    },
)
