"""What every kernels/<name>/baselines.py does the same way (tilekit.baseline_support): import
without triton or cuda.tile, and say why a backend cannot run, for every kernel that exists."""
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELS = sorted(p.parent.name for p in (ROOT / "kernels").glob("*/baselines.py"))

TRITON_MISSING = "triton is not installed: pip install triton (it comes with CUDA builds of torch)"
CUTILE_MISSING = "cuda.tile is not installed: pip install cuda-tile==1.7.0 (the bundle carries it)"


@pytest.fixture(params=KERNELS)
def baselines(request):
    return importlib.import_module(f"kernels.{request.param}.baselines")


def test_every_kernel_has_the_three_baselines(baselines):
    assert set(baselines.BACKENDS) == {"cutile", "triton", "torch"}
    assert baselines.unavailable_reason("torch") is None


def test_triton_reason_is_none_exactly_when_it_imports(baselines):
    assert (baselines.unavailable_reason("triton") is None) == (baselines.triton is not None)


def test_missing_packages_say_how_to_install_them(baselines, monkeypatch):
    monkeypatch.setattr(baselines, "_CUTILE_ERROR", ModuleNotFoundError("No module named 'cuda.tile'"))
    monkeypatch.setattr(baselines, "_TRITON_ERROR", ModuleNotFoundError("No module named 'triton'"))
    assert baselines.unavailable_reason("cutile") == CUTILE_MISSING
    assert baselines.unavailable_reason("triton") == TRITON_MISSING


def test_a_broken_import_is_reported_with_its_error(baselines, monkeypatch):
    monkeypatch.setattr(baselines, "_CUTILE_ERROR", OSError("libcuda.so.1: cannot open shared object file"))
    assert baselines.unavailable_reason("cutile") == "cuda.tile failed to import: OSError: libcuda.so.1: cannot open shared object file"


def test_an_unknown_backend_is_an_error_naming_the_kernel(baselines):
    kernel = baselines.__name__.split(".")[1]
    with pytest.raises(ValueError, match=f"unknown {kernel} baseline 'cupy'"):
        baselines.unavailable_reason("cupy")


@pytest.mark.parametrize("kernel", KERNELS)
def test_module_imports_without_triton_or_cuda_tile(kernel):
    # Block both imports in a child; the module must still import and name what is missing.
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name in ('triton', 'cuda.tile') or name.startswith('triton.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"from kernels.{kernel} import baselines as B\n"
        "print(B.unavailable_reason('triton')); print(B.unavailable_reason('cutile'))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tools"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.splitlines() == [TRITON_MISSING, CUTILE_MISSING]
