"""Runs a kernel's Triton baselines on the CPU for test_baselines.py: a child Python with
TRITON_INTERPRET=1 (set before triton is imported, hence a child) calls the kernel's triton entry on
each of its interpreted cases (kernels/<name>/tests.py's BASELINE_CASES) and prints one JSON list
of results, one per case."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The interpreter switched on, plus fixes for two of its bugs (neither touches a GPU run).
PREAMBLE = r"""import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np
import torch
import triton.language as tl
import triton.runtime.interpreter as interp

# triton 3.6's interpreter turns a scalar into an int with int(1-element array), which
# numpy >= 2.4 refuses (triton-lang/triton#9171, fixed after 3.6): take the element instead.
_orig_patch = interp._patch_lang_tensor
def _patch(tensor, scope):
    _orig_patch(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
interp._patch_lang_tensor = _patch

# triton 3.6's interpreter keeps bf16 as its uint16 bit patterns and its tl.dot multiplies those
# integers (a 16x16 bf16 dot is off by ~2e10; the same dot after .to(tl.float32) is right): widen
# bf16 operands to the float32 values they encode first.
_orig_dot = interp.InterpreterBuilder.create_dot
def _dot(self, a, b, d, *args):
    def widen(x):
        if x.dtype != tl.bfloat16:
            return x
        return interp.TensorHandle((x.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
    return _orig_dot(self, widen(a), widen(b), d, *args)
interp.InterpreterBuilder.create_dot = _dot
"""

CHILD = (
    PREAMBLE
    + r"""
import importlib
from tilekit.runtime import baseline_cases

kernel = sys.argv[1]
cases = baseline_cases.load(kernel)  # kernels/<kernel>/tests.py, which never imports baselines.py
B = importlib.import_module(f"kernels.{kernel}.baselines")
out = []
for cfg, variant, knobs in json.loads(sys.stdin.read()):
    inputs = cases.inputs(cfg)
    ref = cases.spec.reference(inputs)
    try:
        y = B.BACKENDS["triton"](*inputs.values(), variant=variant, **knobs)
        err = ((y.double() - ref).abs() / (1 + ref.abs())).max().item()
        out.append({"err": err, "dtype": str(y.dtype), "shape": list(y.shape), "contiguous": y.is_contiguous(),
                    "zero": {"NaN outputs": int(torch.isnan(y).sum()), **cases.zero_counts(y, inputs)}})
    except Exception as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(out))
"""
)


def run(kernel: str, cases: list, *, timeout: int = 45) -> list:
    """Results of `cases` (BaselineCases.interpreted: (cfg, variant, knobs)) of `kernel`'s triton
    entry under the interpreter, from one child process; its deadline stays well under pytest-timeout's
    60 s, which counts this fixture's time in the first test that uses it."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "tools"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", CHILD, kernel],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=path),
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == len(cases)
    return results


def require_triton(baselines, why: str = "needs triton") -> None:
    """Skip the calling test with the reason when the kernel's baselines module could not import
    triton."""
    if baselines.triton is None:
        pytest.skip(f"{why}: {baselines.unavailable_reason('triton')}")
