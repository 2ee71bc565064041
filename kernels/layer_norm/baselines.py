"""layer_norm baselines: the implementations the cuTile Rust port (op.py) is timed against.

    y[r, :] = (x[r, :] - mean) * rsqrt(var + eps) * w + b      (f32 inside; y in x's dtype)

x is (m, n), f16/bf16/f32, last dim contiguous; w and b are (n,) in x's dtype, or None. Entries
(x, w, b, eps) -> y: ``torch_layer_norm`` (PyTorch's op), ``triton_layer_norm`` and
``cutile_layer_norm`` (ours, with the row reductions' variants of tilekit.runtime.baseline_support; the
statistics as the port computes them: two passes over a row held whole, shifted sums over a looped
row), and the providers' entries. All but torch take w and b: ones and zeros stand in for an absent
one (`_check_inputs`).
"""

import torch

from tilekit.runtime import baseline_support as bs
from tilekit.runtime import norm, norm_baselines
from tilekit.runtime.norm_baselines import DTYPES
from tilekit.runtime import providers

triton, _, _TRITON_ERROR = bs.import_triton()
ct, _CUTILE_ERROR = bs.import_cutile()

KERNEL = "layer_norm"
VARIANTS = bs.ROW_VARIANTS  # ("auto", "row", "multirow", "looped")
# DTYPES and auto are the norm family's, rms_norm's too (tilekit.runtime.norm): the same row reduction
# shape and bytes, until an H200 sweep says otherwise.
triton_config, cutile_config = bs.row_configs(KERNEL, norm.AUTO)


def _check_inputs(x: torch.Tensor, w, b) -> tuple:
    """Validate (x, w, b); return (x, w, b) with ones for an absent w and zeros for an absent b (n
    elements, allocated per call: the correctness shapes only, every perf config has both)."""
    bs.check_matrix(KERNEL, "x", x, DTYPES)
    for name, t in (("w", w), ("b", b)):
        if t is not None and (tuple(t.shape) != (x.shape[1],) or t.dtype != x.dtype or t.device != x.device):
            raise (TypeError if t.dtype != x.dtype else ValueError)(
                f"layer_norm baseline: {name} must be None or have shape ({x.shape[1]},) and share one dtype of "
                f"{DTYPES} and the device with x ({x.dtype} on {x.device}), got {tuple(t.shape)} {t.dtype} on {t.device}"
            )
    like = {"size": x.shape[1:], "dtype": x.dtype, "device": x.device}
    return x, torch.ones(**like) if w is None else w.contiguous(), torch.zeros(**like) if b is None else b.contiguous()


def torch_layer_norm(x: torch.Tensor, w, b, eps: float) -> torch.Tensor:
    """PyTorch's fused LayerNorm (the op a model would call)."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def triton_layer_norm(x: torch.Tensor, w, b, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """LayerNorm with our Triton kernels (tilekit.runtime.norm_baselines); `variant` and the knobs as in `triton_config`."""
    bs.require(triton, unavailable_reason, "triton")
    x, w, b = _check_inputs(x, w, b)
    return norm_baselines.launch("triton", triton_config, x, w, b, eps, layer=True, variant=variant, knobs=knobs)


def cutile_layer_norm(x: torch.Tensor, w, b, eps: float, *, variant: str = "auto", **knobs) -> torch.Tensor:
    """LayerNorm with our cuTile Python kernels (tilekit.runtime.norm_baselines); `variant` and the knobs as in
    `cutile_config`. eps is a compile-time constant of the kernel (one compile per distinct eps)."""
    bs.require(ct, unavailable_reason, "cutile")
    x, w, b = _check_inputs(x, w, b)
    bs.require_cuda(KERNEL, "x", x)
    return norm_baselines.launch("cutile", cutile_config, x, w, b, eps, layer=True, variant=variant, knobs=knobs)


def tilegym_layer_norm(ops, x, w, b, eps):
    """TileGym's public layer_norm, which normalizes dims [start_dim, end_dim): (1, 2) of (m, n)."""
    x, w, b = _check_inputs(x, w, b)
    return ops.layer_norm(x, 1, 2, w, b, eps)


def liger_layer_norm(ops, x, w, b, eps):
    """Liger's LayerNorm (Triton or cuTile: `ops`), forward only (it also writes mean and rstd)."""
    return ops.layer_norm.LigerLayerNormFunction.apply(*_check_inputs(x, w, b), eps)


BACKENDS = {
    "cutile": cutile_layer_norm,
    "triton": triton_layer_norm,
    "torch": torch_layer_norm,
    **providers.backends(
        # TileGym's public layer_norm normalizes dims [start_dim, end_dim): here the last one
        tilegym=tilegym_layer_norm,
        liger=liger_layer_norm,
        liger_cutile=liger_layer_norm,
    ),
}


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot run here, or None when it can (tilekit.runtime.baseline_support)."""
    return bs.unavailable_reason(KERNEL, backend, BACKENDS, _TRITON_ERROR, _CUTILE_ERROR)
