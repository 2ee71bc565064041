"""The gated family's gradients (kernels/silu_and_mul_backward, kernels/gelu_and_mul_backward,
kernels/swiglu_backward; their device entry: cutile_kernels/src/gated_backward.rs): the contract names
a member's op.py takes, under those names (tilekit.runtime.gated holds them as `backward_*`, beside
the fused members' entry, autograd formula and declaration). No GPU at import.
"""

from __future__ import annotations

from tilekit.runtime.gated import BACKWARD_DEFAULT_VARIANT as DEFAULT_VARIANT
from tilekit.runtime.gated import DTYPES, tune_key
from tilekit.runtime.gated import backward_export_args as export_args
from tilekit.runtime.gated import backward_variants as variants

__all__ = ["DEFAULT_VARIANT", "DTYPES", "export_args", "tune_key", "variants"]
