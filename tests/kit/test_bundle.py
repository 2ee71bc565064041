"""make bundle on the CPU: scripts/bundle.sh run with tiny fake pieces (no 220 MB toolchain, no
minutes of xz, no download), then the bundle's run.sh with a fake `make` (and, where a C compiler
exists, the real make) to prove what the GPU host gets.

The overrides used (BUNDLE_OUT, BUNDLE_LIB, BUNDLE_TOOLCHAIN_TARXZ, BUNDLE_NO_DOWNLOAD,
BUNDLE_WHEELS_DIR, BUNDLE_PY) are documented in scripts/bundle.sh's header.
"""

import hashlib
import lzma
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUNDLE_SH = ROOT / "scripts" / "bundle.sh"
HOST_PY = "%d.%d" % sys.version_info[:2]

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("git", "strip", "xz", "tar")) or not (ROOT / ".git").exists(),
    reason="make bundle needs a git checkout and git, strip, xz, tar on PATH",
)


def pins() -> list[tuple[str, str]]:
    """(normalized name, version) of every line of env/bundle-wheels.txt."""
    out = []
    for line in (ROOT / "env" / "bundle-wheels.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, ver = line.partition("==")
            out.append((re.sub(r"[-_.]+", "_", name.strip().lower()), ver.strip()))
    return out


def make_wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal installable pure-Python wheel whose module is tilekit_fake_<name>."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"tilekit_fake_{name}/__init__.py", "")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def make_toolchain(folder: Path) -> Path:
    """tileir-toolchain-fake.tar.xz: one top folder with bin/tileiras, bin/ptxas, nvvm/lib64/."""
    tree = folder / "tileir-toolchain-fake"
    for rel in ("bin/tileiras", "bin/ptxas", "nvvm/lib64/libnvvm.so"):
        f = tree / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("#!/bin/sh\necho fake\n")
        f.chmod(0o755)
    out = folder / "tileir-toolchain-fake.tar.xz"
    with tarfile.open(out, "w:xz") as t:
        t.add(tree, arcname=tree.name)
    return out


def make_library(folder: Path) -> tuple[Path, bool]:
    """A small ELF shared library exporting every declared symbol when a C compiler exists (so the
    real `make build` symbol check passes), else a copy of the `true` binary. -> (path, has_symbols)."""
    lib = folder / "libcutile_kernels.so"
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        declared = subprocess.run(
            [sys.executable, "-m", "tilekit", "abi", "--declared"],
            cwd=ROOT,
            text=True,
            capture_output=True,
            check=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT / "tools")),
        ).stdout.split()
        src = folder / "lib.c"
        src.write_text(
            "".join(f"int {s}(void) {{ return 0; }}\n" for s in declared + ["tilekit_abi_json", "tilekit_last_error"])
        )
        subprocess.run([cc, "-shared", "-fPIC", "-g", "-o", str(lib), str(src)], check=True)
        return lib, True
    shutil.copy(shutil.which("true"), lib)
    return lib, False


def bundle_env(tmp: Path, **over) -> dict:
    env = dict(
        os.environ,
        TILEKIT_CACHE=str(tmp / "cache"),
        TILEKIT_TILEIR=str(tmp / "no-toolchain"),
        BUNDLE_OUT=str(tmp / "dist"),
        BUNDLE_NO_DOWNLOAD="1",
        BUNDLE_WHEELS_DIR=str(tmp / "whl"),
        BUNDLE_PY=HOST_PY,
    )
    env.update(over)
    return {k: v for k, v in env.items() if v is not None}


def run_bundle(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(BUNDLE_SH)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def pieces(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pieces")
    (tmp / "whl").mkdir()
    for name, ver in pins():
        make_wheel(tmp / "whl", name, ver)
    lib, has_symbols = make_library(tmp)
    return {"tmp": tmp, "toolchain": make_toolchain(tmp), "lib": lib, "has_symbols": has_symbols}


@pytest.fixture(scope="module")
def built(pieces, tmp_path_factory):
    """The bundle made from the fake pieces, and its tarball extracted."""
    tmp = pieces["tmp"]
    r = run_bundle(bundle_env(tmp, BUNDLE_LIB=str(pieces["lib"]), BUNDLE_TOOLCHAIN_TARXZ=str(pieces["toolchain"])))
    assert r.returncode == 0, r.stdout + r.stderr
    tars = list((tmp / "dist").glob("*.tar"))
    assert len(tars) == 1, tars
    dest = tmp_path_factory.mktemp("host")
    with tarfile.open(tars[0]) as t:
        t.extractall(dest, filter="tar")
    return {"tar": tars[0], "top": dest / "tilekit-bundle", "stdout": r.stdout, **pieces}


def git(*args) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


# -- the tarball ----------------------------------------------------------------------------------


def test_tarball_is_named_by_git_sha_and_has_one_top_folder(built):
    assert re.fullmatch(rf"tilekit-bundle-{git('rev-parse', '--short', 'HEAD')}(-dirty)?\.tar", built["tar"].name)
    with tarfile.open(built["tar"]) as t:
        names = t.getnames()
    assert {n.split("/")[0] for n in names} == {"tilekit-bundle"}
    assert f"wrote {built['tar']}" in built["stdout"]
    for group in ("toolchain", "library", "wheels", "sources"):
        assert re.search(rf"^bundle:\s+{group}\s+\S+B\s", built["stdout"], re.M), built["stdout"]


def test_bundle_holds_sources_runner_and_bundle_folder(built):
    top = built["top"]
    for rel in (
        "run.sh",
        "MANIFEST.txt",
        "Makefile",
        "pyproject.toml",
        "env/env.sh",
        "env/bundle-wheels.txt",
        "scripts/gpu_host_env.sh",
        "scripts/build.sh",
        "scripts/check_symbols.sh",
        "tools/tilekit/runtime/ffi.py",
        "tests/conftest.py",
        "kernels/rms_norm/op.py",
        "cutile_kernels/Cargo.lock",
        "bundle/libcutile_kernels.so.xz",
        "bundle/tileir-toolchain-fake.tar.xz",
    ):
        assert (top / rel).is_file(), rel
    wheels = sorted(p.name for p in (top / "bundle" / "whl").iterdir())
    assert wheels == sorted(f"{n}-{v}-py3-none-any.whl" for n, v in pins())
    for absent in (".git", "build", "dist", "out", "results", ".ci"):
        assert not (top / absent).exists(), absent
    assert (top / "bundle" / "tileir-toolchain-fake.tar.xz").read_bytes() == built["toolchain"].read_bytes()


def test_library_is_stripped_then_xz_compressed(built, tmp_path):
    stripped = tmp_path / "stripped.so"
    subprocess.run(["strip", "-o", str(stripped), str(built["lib"])], check=True)
    packed = lzma.decompress((built["top"] / "bundle" / "libcutile_kernels.so.xz").read_bytes())
    assert packed == stripped.read_bytes()
    assert len(packed) < built["lib"].stat().st_size


def test_manifest_lists_every_file_with_its_sha256_and_size(built):
    top = built["top"]
    text = (top / "MANIFEST.txt").read_text()
    listed = {}
    for line in text.splitlines():
        m = re.fullmatch(r"([0-9a-f]{64})  (\d+)  (\S+)", line)
        if m:
            listed[m[3]] = (m[1], int(m[2]))
    on_disk = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()} - {"MANIFEST.txt"}
    assert set(listed) == on_disk
    for rel, (sha, size) in listed.items():
        data = (top / rel).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (sha, size), rel
    assert re.search(rf"^git_sha: {git('rev-parse', 'HEAD')}( \(dirty working tree\))?$", text, re.M)
    assert re.search(r"^built: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", text, re.M)
    assert re.search(rf"^python: {re.escape(HOST_PY)} ", text, re.M)
    cutile = re.search(r'name = "cutile"\nversion = "([^"]+)"', (ROOT / "cutile_kernels" / "Cargo.lock").read_text())[1]
    assert re.search(rf"^cutile_crates: .*\bcutile {re.escape(cutile)}\b", text, re.M)
    assert re.search(r"^tileir_toolchain_pins: .*nvidia-cuda-tileiras==", text, re.M)


def test_manifest_checks_with_sha256sum_as_its_header_says(built):
    r = subprocess.run(
        "awk 'length($1) == 64 { print $1 \"  \" $3 }' MANIFEST.txt | sha256sum -c --quiet",
        shell=True,
        cwd=built["top"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_rerun_overwrites_the_tarball_and_leaves_no_staging(built):
    tmp = built["tmp"]
    r = run_bundle(bundle_env(tmp, BUNDLE_LIB=str(built["lib"]), BUNDLE_TOOLCHAIN_TARXZ=str(built["toolchain"])))
    assert r.returncode == 0, r.stderr
    assert [p.name for p in (tmp / "dist").iterdir()] == [built["tar"].name]


# -- the runner -----------------------------------------------------------------------------------

FAKE_MAKE = """#!/bin/sh
{ echo "args=$*"; echo "pwd=$(pwd)"; echo "TILEKIT_PREBUILT=$TILEKIT_PREBUILT"; echo "CUDA_HOME=$CUDA_HOME"
  echo "CUDA_TOOLKIT_PATH=$CUDA_TOOLKIT_PATH"; echo "TILEKIT_LIB=$TILEKIT_LIB"; echo "PYTHONPATH=$PYTHONPATH"
  echo "tileiras=$(command -v tileiras)"; } >> "$FAKE_MAKE_LOG"
"""


def host(tmp: Path, built: dict, fake_make: bool) -> tuple[Path, dict]:
    """A copy of the extracted bundle and the environment of a GPU host without cargo: PATH is a
    folder of fakes (a `cargo` that records being called, maybe a `make`), python, /usr/bin, /bin."""
    top = tmp / "tilekit-bundle"
    shutil.copytree(built["top"], top, symlinks=True)
    fakes = tmp / "fakebin"
    fakes.mkdir()
    (fakes / "cargo").write_text(f"#!/bin/sh\ntouch {tmp}/cargo-was-called\nexit 99\n")
    if fake_make:
        (fakes / "make").write_text(FAKE_MAKE)
    for f in fakes.iterdir():
        f.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TILEKIT_", "CUDA_", "CARGO_", "BUNDLE_", "PYTHON", "VIRTUAL_ENV", "MAKE"))
        and k not in ("MFLAGS", "LIBCLANG_PATH")
    }
    env.update(
        PATH=f"{fakes}:{Path(sys.executable).parent}:/usr/bin:/bin",
        FAKE_MAKE_LOG=str(tmp / "make.log"),
        TILEKIT_CACHE=str(tmp / "cache"),
    )
    return top, env


def fake_make_calls(tmp: Path) -> list[dict]:
    calls = []
    for line in (tmp / "make.log").read_text().splitlines():
        if line.startswith("args="):
            calls.append({})
        k, _, v = line.partition("=")
        calls[-1][k] = v
    return calls


def test_runner_is_an_executable_bash_script(built):
    run = built["top"] / "run.sh"
    assert run.stat().st_mode & stat.S_IXUSR
    assert run.read_text().startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in run.read_text()


def test_runner_forwards_make_args_with_the_prebuilt_library_and_the_toolchain(built, tmp_path):
    top, env = host(tmp_path, built, fake_make=True)
    r = subprocess.run(
        ["./run.sh", "KERNEL=rms_norm", "test", "baseline", "perf"],
        cwd=top,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    [call] = fake_make_calls(tmp_path)
    tree = top / ".gpu-home" / "tileir-toolchain-fake"
    assert call["args"] == "KERNEL=rms_norm test baseline perf"
    assert call["pwd"] == str(top)
    assert call["TILEKIT_PREBUILT"] == "1"
    assert call["CUDA_HOME"] == call["CUDA_TOOLKIT_PATH"] == str(tree)
    assert call["tileiras"] == str(tree / "bin" / "tileiras")
    assert (tree / "nvvm" / "lib64" / "libnvvm.so").is_file()
    stripped = lzma.decompress((top / "bundle" / "libcutile_kernels.so.xz").read_bytes())
    assert Path(call["TILEKIT_LIB"]).read_bytes() == stripped
    assert Path(call["TILEKIT_LIB"]).is_relative_to(top)
    site = top / ".gpu-home" / "site"
    assert call["PYTHONPATH"].split(":")[0] == str(site)
    assert sorted(p.name for p in site.glob("tilekit_fake_*")) == sorted(f"tilekit_fake_{n}" for n, _ in pins())
    assert "WARNING" not in r.stderr
    assert not (tmp_path / "cargo-was-called").exists()


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock (util-linux) is not installed here")
def test_runners_started_together_share_one_unpack_and_install_the_wheels_once(built, tmp_path):
    """Stages of several kernels at once on one host (one run.sh each): each waits for the other's
    unpack and pip install (a lock), and the wheels are installed once (a stamp names the set)."""
    top, env = host(tmp_path, built, fake_make=True)
    runs = [
        subprocess.Popen(
            ["./run.sh", f"KERNEL={k}", "test"], cwd=top, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for k in ("rms_norm", "softmax", "matmul")
    ]
    outputs = [r.communicate(timeout=300)[0].decode() for r in runs]
    assert [r.returncode for r in runs] == [0, 0, 0], "\n".join(outputs)
    assert sorted(c["args"] for c in fake_make_calls(tmp_path)) == [
        f"KERNEL={k} test" for k in ("matmul", "rms_norm", "softmax")
    ]
    site = top / ".gpu-home" / "site"
    [stamp] = site.glob(".tilekit-wheels-*")
    assert sorted(p.name for p in site.glob("tilekit_fake_*")) == sorted(f"tilekit_fake_{n}" for n, _ in pins())
    assert not list((top / ".gpu-home").glob("libcutile_kernels.so.tmp*"))
    installed = {p: p.stat().st_mtime_ns for p in site.rglob("*") if p.is_file()}
    r = subprocess.run(["./run.sh", "KERNEL=softmax", "perf"], cwd=top, env=env, capture_output=True, timeout=120)
    assert r.returncode == 0 and list(site.glob(".tilekit-wheels-*")) == [stamp]
    assert {p: p.stat().st_mtime_ns for p in site.rglob("*") if p.is_file()} == installed, "the wheels were reinstalled"


def test_runner_without_args_runs_doctor_then_prints_usage(built, tmp_path):
    top, env = host(tmp_path, built, fake_make=True)
    r = subprocess.run(["./run.sh"], cwd=top, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [c["args"] for c in fake_make_calls(tmp_path)] == ["doctor"]
    assert "usage: ./run.sh" in r.stdout


@pytest.mark.parametrize("target", ["setup", "bundle"])
def test_runner_refuses_targets_that_need_the_internet_or_cargo(built, tmp_path, target):
    top, env = host(tmp_path, built, fake_make=True)
    r = subprocess.run(["./run.sh", "KERNEL=rms_norm", target], cwd=top, env=env, capture_output=True, text=True)
    assert r.returncode == 2
    assert f"'make {target}'" in r.stderr
    assert not (tmp_path / "make.log").exists()


def test_runner_warns_when_the_wheels_are_for_another_python(built, tmp_path):
    top, env = host(tmp_path, built, fake_make=True)
    run = top / "run.sh"
    run.write_text(run.read_text().replace(f"bundle_py={HOST_PY}\n", "bundle_py=2.7\n"))
    r = subprocess.run(["./run.sh", "help"], cwd=top, env=env, capture_output=True, text=True, timeout=120)
    assert f"wheels are for Python 2.7, python3 here is {HOST_PY}" in r.stderr


def test_real_make_build_uses_the_prebuilt_library_without_cargo(built, tmp_path):
    if not built["has_symbols"]:
        pytest.skip("no C compiler to make a fake library exporting the declared symbols")
    if not shutil.which("make"):
        pytest.skip("no make on PATH")
    top, env = host(tmp_path, built, fake_make=False)
    r = subprocess.run(
        ["./run.sh", "KERNEL=rms_norm", "build"], cwd=top, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TILEKIT_PREBUILT=1: cargo is not run" in r.stdout
    assert "symbols: T cutile_rms_norm" in r.stdout
    assert (top / "out" / "rms_norm" / "reports" / "build.log").is_file()
    assert not (tmp_path / "cargo-was-called").exists()


# -- clear failures -------------------------------------------------------------------------------


def test_missing_library_names_make_build(pieces, tmp_path):
    r = run_bundle(
        bundle_env(
            pieces["tmp"],
            BUNDLE_LIB=str(tmp_path / "nope.so"),
            BUNDLE_TOOLCHAIN_TARXZ=str(pieces["toolchain"]),
            BUNDLE_OUT=str(tmp_path / "dist"),
        )
    )
    assert r.returncode != 0
    assert f"no library at {tmp_path / 'nope.so'}" in r.stderr and "run 'make build' first" in r.stderr
    assert not (tmp_path / "dist").exists()


def test_missing_toolchain_names_make_setup(pieces, tmp_path):
    r = run_bundle(
        bundle_env(
            pieces["tmp"],
            BUNDLE_LIB=str(pieces["lib"]),
            BUNDLE_TOOLCHAIN_TARXZ=None,
            TILEKIT_TILEIR=str(tmp_path / "no-toolchain"),
            BUNDLE_OUT=str(tmp_path / "dist"),
        )
    )
    assert r.returncode != 0
    assert f"no Tile IR toolchain at {tmp_path / 'no-toolchain'}; run 'make setup' first" in r.stderr


def test_wheel_folder_missing_a_pinned_wheel_is_an_error(pieces, tmp_path):
    (tmp_path / "whl").mkdir()
    *present, (name, ver) = pins()
    for n, v in present:
        make_wheel(tmp_path / "whl", n, v)
    r = run_bundle(
        bundle_env(
            pieces["tmp"],
            BUNDLE_LIB=str(pieces["lib"]),
            BUNDLE_TOOLCHAIN_TARXZ=str(pieces["toolchain"]),
            BUNDLE_WHEELS_DIR=str(tmp_path / "whl"),
            BUNDLE_OUT=str(tmp_path / "dist"),
        )
    )
    assert r.returncode != 0
    assert re.search(rf"no wheel for '[^']*{re.escape(ver)}' \(env/bundle-wheels.txt\)", r.stderr), r.stderr
