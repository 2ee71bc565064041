"""What every kernel's baselines.py needs the same way: why a baseline backend cannot run here.

Each `kernels/<name>/baselines.py` imports triton and cuda.tile under guards (so it imports
without them) and keeps the import errors; `unavailable_reason` turns those into the message the
suites skip with, and asks cuda.tile whether it would find its Tile IR compiler.
"""
from __future__ import annotations

import functools


def tileiras_missing() -> str | None:
    """Why cuda.tile would fail to find tileiras at the first launch, by asking cuda.tile's own
    search (a private helper: if it moves, say nothing rather than guess)."""
    try:
        from cuda.tile._compile import _find_compiler_bin
    except Exception:
        return None
    try:
        _find_compiler_bin()
    except FileNotFoundError:
        return ("cuda.tile found no tileiras (Tile IR compiler, >= 13.3 for sm_90): export CUDA_HOME "
                "to a tree with bin/tileiras, bin/ptxas and nvvm/ (make bundle carries one), "
                "or put tileiras on PATH")
    except Exception:
        return None
    return None


def unavailable_reason(kernel: str, backend: str, backends: dict, triton_error, cutile_error) -> str | None:
    """Why `backend` of `kernel` cannot run here, or None when its package imports (and, for
    cutile, its compiler is found). Says nothing about the GPU itself."""
    if backend not in backends:
        raise ValueError(f"unknown {kernel} baseline {backend!r}; known: {sorted(backends)}")
    if backend == "torch":
        return None
    if backend == "triton":
        if triton_error is None:
            return None
        if isinstance(triton_error, ModuleNotFoundError):
            return "triton is not installed: pip install triton (it comes with CUDA builds of torch)"
        return f"triton failed to import: {type(triton_error).__name__}: {triton_error}"
    if cutile_error is None:
        return tileiras_missing()
    if isinstance(cutile_error, ModuleNotFoundError):
        return "cuda.tile is not installed: pip install cuda-tile==1.7.0 (the bundle carries it)"
    return f"cuda.tile failed to import: {type(cutile_error).__name__}: {cutile_error}"


# -- small launch helpers the baselines' config functions share ---------------------------------

def next_pow2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


@functools.lru_cache(maxsize=None)
def _sm_count(device_index: int) -> int:
    import torch

    return torch.cuda.get_device_properties(device_index).multi_processor_count


def num_sms(t) -> int:
    """SMs of the GPU holding tensor `t`. A CPU tensor only reaches a kernel under
    TRITON_INTERPRET=1; one "SM" there makes persistent loops take several steps on small shapes."""
    if not t.is_cuda:
        return 1
    import torch

    return _sm_count(t.device.index if t.device.index is not None else torch.cuda.current_device())
