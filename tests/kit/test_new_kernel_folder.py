"""A kernel is one folder: a copy of kernels/softmax as kernels/<new>, its identifiers renamed
inside that folder only (the Rust export too), gets its GPU suites, its CPU contract tests and its
place in `make help` with nothing else edited: no test file, no list, no build (collecting needs
no library). Checked in a copy of the repository's Makefile, tools/ and tests/ in a temp dir."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NEW = "rowsoftmax"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    for f in ("Makefile", "pyproject.toml", "tests/conftest.py", "tests/kit/test_kernel_contract.py"):
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, root / f)
    for d in ("tools", "tests/kernels", "kernels"):
        shutil.copytree(ROOT / d, root / d, ignore=IGNORE)
    new = root / "kernels" / NEW
    shutil.copytree(ROOT / "kernels" / "softmax", new, ignore=IGNORE)
    for f in new.iterdir():  # the kernel's names, not torch.softmax
        f.write_text(re.sub(r"(?<!torch\.)softmax", NEW, f.read_text()))
    return root


def run(repo: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PYTEST_XDIST_WORKER")}
    env.update(
        PYTHONPATH=f"{repo / 'tools'}{os.pathsep}{repo}",
        TILEKIT_ROOT=str(repo),
        TILEKIT_LIB=str(repo / "build" / "no-library.so"),
    )
    return subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=110, env=env)


def test_a_copied_folder_has_its_suites_and_contract_tests_collected_without_a_library(repo):
    done = run(
        repo,
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/kernels",
        "tests/kit/test_kernel_contract.py",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ids = done.stdout.split()
    new = [
        i.replace(f"test_{NEW}.py", "test_softmax.py") for i in ids if i.startswith(f"tests/kernels/test_{NEW}.py::")
    ]
    # the same cases, but the gradient's: a copy takes no backward with it (softmax's is
    # kernels/softmax_backward, registered for softmax alone)
    original = [i for i in ids if i.startswith("tests/kernels/test_softmax.py::")]
    assert any("::test_op_backward_cutile_rs[" in i for i in original)
    assert new == [i for i in original if "::test_op_backward_cutile_rs[" not in i]
    suite = f"tests/kernels/test_{NEW}.py::"
    assert {
        suite + "test_op[cutile_rs-1x1-float16]",
        suite + "test_perf[cutile_rs-65536-1024-float16]",
        suite + "test_perf[triton-65536-4096-float16]",
        suite + "test_op_every_variant_cutile_rs[37x1000-float16]",
        suite + "test_op_bad_input_cutile_rs[cutile_rs-x_0d]",
        suite + "test_op_aliasing_cutile_rs[cutile_rs-out_shifted_over_x]",
        suite + "test_op_in_place_cutile_rs[x-37x1000-float16]",
        suite + "test_op_masked_logits_cutile_rs[33x1000-float16-block1024]",
    } <= set(ids)
    contract = {i for i in ids if i.startswith("tests/kit/test_kernel_contract.py::") and i.endswith(f"[{NEW}]")}
    assert (
        len(contract)
        == len({i for i in ids if i.startswith("tests/kit/test_kernel_contract.py::") and i.endswith("[softmax]")})
        > 5
    )


def test_a_copied_folders_cpu_checks_pass_without_a_library(repo):
    """Its declaration, doctests, inputs and bad inputs: everything that needs no Rust build."""
    done = run(
        repo,
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/kernels",
        "tests/kit/test_kernel_contract.py",
        "-k",
        f"{NEW} and (bad_input or declaration or doctests or inputs_output)",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\b12 passed\b", done.stdout), done.stdout[-1000:]  # 9 bad inputs, 3 contract tests


def test_make_help_lists_the_copied_kernel(repo):
    done = run(repo, "make", "--no-print-directory", "help")
    assert done.returncode == 0, done.stderr
    kernels_line = next(line for line in done.stdout.splitlines() if line.startswith("kernels:"))
    assert f" {NEW} " in kernels_line and " softmax " in kernels_line
