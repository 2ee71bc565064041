"""The optional packages baselines run on, imported only when asked for (neither triton nor
cuda.tile is needed to import a baselines.py), and what a failed import means, in words a user can
act on. tilekit.runtime.baseline_support re-exports them for the kernels' baselines.py;
tilekit.runtime.providers asks them about the providers that run on cuda.tile."""

from __future__ import annotations


def import_triton():
    """(triton, triton.language, None), or (None, None, the error) when triton does not import."""
    try:
        import triton
        import triton.language as tl
    except Exception as exc:  # ImportError, or a broken install that fails while importing
        return None, None, exc
    return triton, tl, None


def import_cutile():
    """(cuda.tile, None), or (None, the error): cuda.tile is kept out of the project venv; the GPU
    bundle carries its wheel."""
    try:
        import cuda.tile as ct
    except Exception as exc:
        return None, exc
    return ct, None


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
        return (
            "cuda.tile found no tileiras (Tile IR compiler, >= 13.3 for sm_90): export CUDA_HOME "
            "to a tree with bin/tileiras, bin/ptxas and nvvm/ (make bundle carries one), "
            "or put tileiras on PATH"
        )
    except Exception:
        return None
    return None


def cutile_reason(error: Exception) -> str:
    """What a failed `import cuda.tile` means for a backend that needs it."""
    if isinstance(error, ModuleNotFoundError):
        return "cuda.tile is not installed: pip install cuda-tile==1.7.0 (the bundle carries it)"
    return f"cuda.tile failed to import: {type(error).__name__}: {error}"
