"""rope_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's declaration).
Touches no GPU at import.

rope's gradient: dq (b, s, hq, d) and dk (b, s, hk, d) rotated back by their tokens' angles into one
output, q's heads then k's, in dq's layout (kernels/rope_backward/op.py). Shapes, options, tables,
positions, configs and the sweep are rope's (kernels/rope/spec.py): a training step's backward runs
on the forward's shapes.
"""

from __future__ import annotations

import dataclasses

import torch

from kernels.rope import spec as forward
from kernels.rope_backward import op
from tilekit.runtime.kernel import BadInput, FfiCase, call


def make_inputs(cfg: dict, device="cuda", seed: int | None = None) -> dict:
    """rope's inputs with q and k read as the gradients dq and dk (N(0, 1), in the config's layout)."""
    q, k, *rest = forward.make_inputs(cfg, device, seed).values()
    return dict(zip(("dq", "dk", "cos", "sin", "position_ids", "heads_first"), (q, k, *rest)))


def reference(inputs: dict) -> torch.Tensor:
    """float64: rope's reference with the angle negated (sin -> -sin): R(θ)ᵀ = R(-θ)."""
    dq, dk, cos, sin, ids, heads_first = inputs.values()
    return forward.reference(
        {"q": dq, "k": dk, "cos": cos, "sin": -sin.double(), "position_ids": ids, "heads_first": heads_first}
    )


def _grads(hq=4, hk=2, d=8, **dtypes):
    def make():
        dq = torch.randn(2, 3, hq, d, dtype=dtypes.get("dq", torch.float32))
        dk = torch.randn(2, 3, hk, d, dtype=dtypes.get("dk", torch.float32))
        return call(dq, dk, *forward.tables(16, 8, "cpu", torch.float32))

    return make


SPEC = dataclasses.replace(
    forward.SPEC,
    op=op,
    make_inputs=make_inputs,
    reference=reference,
    size_check=lambda **dims: op.rope_op.check_size(**dims, kernel="rope_backward"),
    bad_inputs={
        "dtype_mix": BadInput(_grads(dk=torch.float16), TypeError, "share one dtype"),
        "odd_head_dim": BadInput(_grads(d=7), ValueError, "must be even"),
        "dk_tokens": BadInput(
            lambda: call(
                torch.randn(2, 3, 4, 8), torch.randn(2, 4, 2, 8), *forward.tables(16, 8, "cpu", torch.float32)
            ),
            ValueError,
            "dq and dk must share b, s and d",
        ),
    },
    ffi_cases={
        "out_shape": FfiCase(lambda: {"out": torch.empty(2, 3, 5, 8)}, message="it must be [2, 3, 6, 8] (dq's heads"),
        "dk_shape": FfiCase(lambda: {"dk": torch.randn(2, 4, 2, 8)}, message="`dk` is [2, 4, 2, 8]: it must be"),
        "bad_warps": FfiCase(variant={"warps": 6}, message="warps"),
        "bad_heads": FfiCase(variant={"heads": 3}, message="heads per tile block must be -1"),
    },
)
