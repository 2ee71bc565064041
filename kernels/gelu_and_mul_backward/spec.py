"""gelu_and_mul_backward: what to test and time, and how to judge it (tilekit.runtime.kernel's
declaration). Touches no GPU at import.

The gradient of out = gelu(gate) * up (the tanh GELU), x = [gate | up] (m, 2H), for an output gradient
dy (m, H): dx = (dgate | dup) (m, 2H), x's layout. Configs name H `h`, as gelu_and_mul's. The
declaration is the gated family's fused gradient's (tilekit.runtime.gated.fused_backward_spec).
"""

from __future__ import annotations

from kernels.gelu_and_mul_backward import op
from tilekit.runtime import gated
from tilekit.runtime.kernel import grid, shapes

SPEC = gated.fused_backward_spec(
    op,
    "gelu_tanh",
    # training steps of Gemma-2-9B (MLP 14336), Gemma-7B (24576) and Gemma-2-27B (36864): 4K-16K tokens
    perf_configs=grid({"dtype": ("bfloat16",), "h": (14336,), "m": (4096, 16384)})
    + shapes("dtype m h", ("bfloat16", 4096, 24576), ("bfloat16", 4096, 36864), ("float16", 16384, 14336)),
)
