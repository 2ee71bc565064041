"""rms_norm baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w      (f32 inside; y in x's dtype)

x is (m, n), f16/bf16/f32, last dim contiguous; w is (n,) in x's dtype. Entries (x, w, eps) -> y:
``torch_rms_norm`` (PyTorch's fused op), ``triton_rms_norm`` and ``cutile_rms_norm`` (ours, with the
row reductions' variants of tilekit.runtime.baseline_support), whose `auto` rules are tilekit.runtime.norm.AUTO.
Opt-in entries from other libraries (tilekit.runtime.providers): tilegym, liger and liger_cutile.
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import norm, norm_baselines
from tilekit.runtime.norm_baselines import DTYPES
from tilekit.runtime import providers

triton, _, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "rms_norm"
VARIANTS = bs.ROW_VARIANTS  # ("auto", "row", "multirow", "looped")
triton_config, cutile_config = bs.row_configs(KERNEL, norm.AUTO)  # auto: tilekit.runtime.norm (layer_norm's too)


def _check_inputs(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Validate (x, w); return w as a contiguous vector (it is n elements: copying is free)."""
    bs.check_matrix(KERNEL, "x", x, DTYPES)
    if tuple(w.shape) != (x.shape[1],) or w.dtype != x.dtype or w.device != x.device:
        raise (TypeError if w.dtype != x.dtype else ValueError)(
            f"rms_norm baseline: w must have shape ({x.shape[1]},) and share one dtype of {DTYPES} and the device "
            f"with x ({x.dtype} on {x.device}), got {tuple(w.shape)} {w.dtype} on {w.device}"
        )
    return w.contiguous()


def torch_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """PyTorch's fused RMSNorm (the op a model would call)."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps)


def triton_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """RMSNorm with our Triton kernels (tilekit.runtime.norm_baselines); `variant` and the knobs as in `triton_config`."""
    bs.require(triton, unavailable_reason, "triton")
    w = _check_inputs(x, w)
    return norm_baselines.launch("triton", triton_config, x, w, w, eps, layer=False, variant=variant, knobs=knobs)


def cutile_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """RMSNorm with our cuTile Python kernels (tilekit.runtime.norm_baselines); `variant` and the knobs as in
    `cutile_config`. eps is a compile-time constant of the kernel (one compile per distinct eps)."""
    bs.require(ct, unavailable_reason, "cutile")
    w = _check_inputs(x, w)
    bs.require_cuda(KERNEL, "x", x)
    return norm_baselines.launch("cutile", cutile_config, x, w, w, eps, layer=False, variant=variant, knobs=knobs)


def liger_rms_norm(ops, x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Liger's RMSNorm (Triton or cuTile: `ops`) as Llama's: offset 0, casting_mode "llama" (only
    the inverse RMS in f32), not in place."""
    return ops.rms_norm.LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False)


BACKENDS = {
    "cutile": cutile_rms_norm,
    "triton": triton_rms_norm,
    "torch": torch_rms_norm,
    **providers.backends(
        tilegym=lambda ops, x, w, eps: ops.rms_norm(x, (x.shape[-1],), w, eps),
        liger=liger_rms_norm,
        liger_cutile=liger_rms_norm,
    ),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
