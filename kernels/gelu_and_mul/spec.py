"""gelu_and_mul: what to test and time, and how to judge it (tilekit.runtime.kernel). x is (m, 2H)
= [gate | up], out (m, H) = gelu_tanh(gate) * up, f32 inside; the rest of the declaration is the
gated family's (tilekit.runtime.gated.fused_spec)."""

from __future__ import annotations

from kernels.gelu_and_mul import op
from tilekit.runtime import gated
from tilekit.runtime.kernel import shapes

SPEC = gated.fused_spec(
    op,
    "gelu_tanh",
    # Gemma MLP widths: Gemma-2B 16384, Gemma-2-9B 14336, Gemma-7B 24576, Gemma-2-2B 9216 (a
    # decode batch of 256 tokens too), and H = 4097 (rows not 16-byte aligned)
    perf_configs=shapes(
        "dtype m h",
        *(("bfloat16", 16384, 16384), ("bfloat16", 16384, 14336), ("bfloat16", 16384, 24576)),
        *(("bfloat16", 16384, 9216), ("bfloat16", 256, 9216), ("bfloat16", 16384, 4097)),
    ),
)
