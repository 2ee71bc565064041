"""silu_and_mul: what to test and time, and how to judge it (the declaration tilekit.runtime.kernel
describes; its suites, CPU contract tests and scripts/sweep_variants.py read SPEC). Touches no GPU
at import.

x is (m, 2H) = [gate | up] (last dim contiguous, row stride may exceed 2H); out is (m, H) =
silu(gate) * up with silu(a) = a * sigmoid(a); f32 arithmetic, output in x's dtype. Configs name
the output width `h`. The rest of the declaration (shapes, inputs with saturating gates, bad
inputs, the export's cases) is the gated family's (tilekit.runtime.gated.fused_spec).
"""

from __future__ import annotations

from kernels.silu_and_mul import op
from tilekit.runtime import gated
from tilekit.runtime.kernel import shapes

SPEC = gated.fused_spec(  # its tolerance: a few output ulps (the torch baseline rounds twice: silu, then the product)
    op,
    "silu",
    # the first issue's two; then MLP widths the tile does not divide (Llama-2-7B 11008, Llama-2-13B
    # 13824, Qwen2-7B 18944), a decode batch (256 tokens of Llama-3-8B's 14336) and H = 4097
    # (rows not 16-byte aligned)
    perf_configs=shapes(
        "dtype m h",
        *(("bfloat16", 65536, 4096), ("bfloat16", 16384, 14336)),
        *(("bfloat16", 16384, 11008), ("bfloat16", 16384, 13824), ("bfloat16", 16384, 18944), ("bfloat16", 256, 14336)),
        ("bfloat16", 16384, 4097),
    ),
)
