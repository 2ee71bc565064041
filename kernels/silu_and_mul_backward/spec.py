"""silu_and_mul_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's
declaration). Touches no GPU at import.

The gradient of out = silu(gate) * up, x = [gate | up] (m, 2H), for an output gradient dy (m, H):
dx = (dgate | dup) (m, 2H), x's layout. Configs name H `h`, as silu_and_mul's.
"""

from __future__ import annotations

from kernels.silu_and_mul_backward import op
from tilekit.runtime import gated
from tilekit.runtime.kernel import grid, shapes

SPEC = gated.fused_backward_spec(
    op,
    "silu",
    # training steps of Llama-3-8B (MLP 14336) and -70B (28672): 4K-32K tokens a batch; Llama-2-7B's 11008
    perf_configs=grid({"dtype": ("bfloat16",), "h": (14336,), "m": (4096, 16384)})
    + shapes("dtype m h", ("bfloat16", 4096, 28672), ("bfloat16", 16384, 11008), ("float16", 16384, 14336)),
)
