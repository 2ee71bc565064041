"""`make new KERNEL=<name> FROM=<kernel>` (tilekit.testing.scaffold), in a copy of the repository: the
scaffolded folder is its relative renamed; the narrow commands docs/kernels.md gives pass on it on
the CPU: its Rust tests (`make KERNEL=probe rust-test`: validation, lowering and sm_90 assembly,
which builds the crate with the new kernel in it) and its CPU checks (declaration, doctests, inputs,
bad inputs); bad names are refused with the fix."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilekit.testing import scaffold

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("Makefile", "pyproject.toml", "rustfmt.toml", "env", "scripts", "tools", "tests", "kernels", "cutile_kernels")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "target")
PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")


@pytest.fixture(scope="module")
def repo() -> Path:
    """The copy lives at one path in the kit's cache, made anew each run: cargo keys a crate's
    artifacts by its path, so a fixed one rebuilds only what changed instead of piling up copies."""
    cache = Path(os.environ.get("TILEKIT_CACHE") or Path.home() / ".cache" / "tilekit")
    root = cache / "scaffold-test" / "repo"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for name in COPIED:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(
            ROOT / name, root / name, **({"ignore": IGNORE} if (ROOT / name).is_dir() else {})
        )
    done = run(
        root, sys.executable, "-m", "tilekit", "new", "--name", "probe", "--from", "softmax", "--root", str(root)
    )
    assert done.returncode == 0, done.stderr
    assert "make KERNEL=probe rust-test" in done.stdout
    return root


def run(repo: Path, *argv: str, timeout: int = 110) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PYTEST_XDIST_WORKER")}
    env.update(PYTHONPATH=f"{repo / 'tools'}{os.pathsep}{repo}", TILEKIT_ROOT=str(repo))
    return subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=timeout, env=env)


def test_the_new_folder_is_its_relative_renamed(repo):
    new = repo / "kernels" / "probe"
    assert sorted(p.name for p in new.iterdir()) == sorted(
        p.name for p in (ROOT / "kernels" / "softmax").iterdir() if p.is_file()
    )
    code = "".join(
        (new / f).read_text() for f in ("kernel.rs", "ffi.rs", "op.py", "spec.py", "baselines.py", "tests.py")
    )
    assert not re.search(r"(?<![A-Za-z0-9.])softmax(?![A-Za-z0-9])", code)  # only torch.softmax and the like remain
    assert "pub mod probe_device" in code and "cutile_probe" in code and "def probe(" in code
    assert "torch.softmax" in code or "F.softmax" in code
    assert (new / "NOTES.md").read_text().startswith("# probe\n") and (repo / "tests/kernels/test_probe.py").is_file()


def test_the_scaffolds_rust_tests_build_and_pass(repo):
    """make KERNEL=probe rust-test: the crate builds with kernels/probe in it (build.rs finds the
    folder) and probe's tests lower and assemble its entries; about a minute, the dependencies
    coming from cargo's cache."""
    if not shutil.which("cargo"):
        pytest.skip("no cargo on PATH: make setup checks for it")
    done = run(repo, "make", "--no-print-directory", "KERNEL=probe", "rust-test", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    passed = re.search(r"test result: ok\. (\d+) passed; 0 failed", done.stdout)
    assert passed and int(passed[1]) > 10 and "probe::ffi::tests::" in done.stdout, done.stdout[-2000:]


def test_the_scaffolds_cpu_checks_pass(repo):
    selected = ("-k", "probe and (bad_input or declaration or doctests or inputs_output)")
    done = run(repo, *PYTEST, "tests/kernels/test_probe.py", "tests/kit/test_kernel_contract.py", *selected)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    passed = re.search(r"\b(\d+) passed\b", done.stdout)
    assert passed and int(passed[1]) >= 10 and "failed" not in done.stdout, done.stdout[-500:]


@pytest.mark.parametrize(
    "name,source,message",
    [
        ("softmax", "rms_norm", "kernels/softmax exists already"),
        ("Probe", "softmax", "is not a lowercase identifier"),
        ("probe-2", "softmax", "is not a lowercase identifier"),
        ("loop", "softmax", "is a Rust keyword"),
        ("lambda", "softmax", "is a Python keyword"),
        (
            "probe2",
            "nosuch",
            "FROM=nosuch: no kernels/nosuch/kernel.rs; FROM is one of attention, attention_backward, bmm",
        ),
    ],
)
def test_a_bad_name_or_relative_is_refused_with_the_fix(name, source, message, capsys):
    assert scaffold.main(["--name", name, "--from", source]) == 2
    assert message in capsys.readouterr().err and not (ROOT / "kernels" / name).exists() or name == "softmax"


def test_make_new_without_from_names_the_choices():
    done = subprocess.run(
        ["make", "--no-print-directory", "new", "KERNEL=probe"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "FROM=<kernel> (one of: attention attention_backward bmm" in done.stderr


def test_every_kernel_scaffolds_into_a_folder_that_imports_and_declares_itself(repo):
    """Each kernel as a relative (`my_<kernel>`: a name that ends in its relative's, the case a
    second rename would spoil): op.py, spec.py and baselines.py import, the declaration is
    complete, and nothing of another library was renamed (baselines.py's BACKENDS resolve)."""
    from tilekit.runtime import kernel

    names = kernel.names()
    for source in names:
        done = run(
            repo,
            sys.executable,
            "-m",
            "tilekit",
            "new",
            "--name",
            f"my_{source}",
            "--from",
            source,
            "--root",
            str(repo),
        )
        assert done.returncode == 0, done.stderr
    check = (
        "import importlib\n"
        "from tilekit.runtime import kernel\n"
        f"for k in {[f'my_{n}' for n in names]!r}:\n"
        "    importlib.import_module(f'kernels.{k}.baselines')\n"
        "    spec = kernel.load(k)\n"
        "    assert spec.name == k and not spec.problems(), (k, spec.problems())\n"
        "print('ok')\n"
    )
    done = run(repo, sys.executable, "-c", check)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout[-2000:] + done.stderr[-3000:]
