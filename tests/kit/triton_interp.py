"""Shared by the baselines' Triton-interpreter tests (tests/kit/test_<kernel>_baselines.py): run a
child Python with TRITON_INTERPRET=1 (set before triton is imported, hence a child) on a list of
cases, and return the JSON list it prints last."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The start of every child script: the interpreter switched on, plus a fix for one of its bugs.
PREAMBLE = r"""import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
import triton.runtime.interpreter as interp

# triton 3.6's interpreter turns a scalar into an int with int(1-element array), which
# numpy >= 2.4 refuses (triton-lang/triton#9171, fixed after 3.6): take the element instead.
_orig_patch = interp._patch_lang_tensor
def _patch(tensor, scope):
    _orig_patch(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
interp._patch_lang_tensor = _patch

"""


def run(child: str, cases: list, *, python_args: tuple = (), timeout: int = 300) -> list:
    """Run `child` (a script that starts with PREAMBLE, reads the cases as JSON on stdin and prints
    one JSON list, one result per case) and return that list."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tools"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, *python_args, "-c", child], input=json.dumps(cases), capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == len(cases)
    return results


def require_triton(baselines, why: str = "needs triton") -> None:
    """Skip the calling test (or module fixture) with the reason when the kernel's baselines
    module could not import triton."""
    if baselines.triton is None:
        pytest.skip(f"{why}: {baselines.unavailable_reason('triton')}")
