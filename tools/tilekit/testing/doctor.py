"""``make doctor``: what the environment has for building and running cuTile kernels, and the fix
for everything missing or wrong. Standard library only, so it runs before ``make setup`` too.

Build side: cargo, CUDA >= 13.2 headers (cuda.h, curand.h, crt/host_config.h), libclang.
Run side: torch and its CUDA, cffi, the baselines TileGym and Liger-Kernel, a GPU and its
driver, CUPTI, NVML (make settle's clock filter), and the Tile IR toolchain:
tileiras (>= 13.3 for sm_90), the ptxas of the same release beside it, and libnvvm of that release
reachable through CUDA_HOME — the trap being CUDA_HOME at an older toolkit, where tileiras fails
with "failed to compile Tile IR program".
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

OK, WARN, BAD, NONE = "ok", "warn", "FAIL", "--"


@dataclass
class Check:
    name: str
    status: str
    found: str
    fixes: list[str] = field(default_factory=list)


def run(cmd: list[str], timeout: float = 20) -> str:
    """stdout+stderr of a command, or "" when it cannot run."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def release_of(text: str) -> tuple[int, int] | None:
    """(major, minor) from `--version` output ("release 13.4, V13.4.92") or a CUDA_VERSION (13040)."""
    m = re.search(r"release (\d+)\.(\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", text)
    if m:
        v = int(m.group(1))
        return v // 1000, (v % 1000) // 10
    return None


def fmt(rel: tuple[int, int] | None) -> str:
    return f"{rel[0]}.{rel[1]}" if rel else "unknown"


def cuda_h_release(root: Path) -> tuple[int, int] | None:
    h = root / "include" / "cuda.h"
    return release_of(h.read_text(errors="replace")) if h.is_file() else None


# -- build side ---------------------------------------------------------------------------------


def check_cargo() -> Check:
    v = run(["cargo", "--version"])
    if not v:
        return Check(
            "cargo", BAD, "not found", ["install Rust >= 1.89 (rustup), or run on a GPU host from `make bundle`"]
        )
    return Check("cargo", OK, v)


def check_headers() -> Check:
    root = os.environ.get("CUDA_TOOLKIT_PATH", "")
    if not root:
        return Check(
            "CUDA headers", BAD, "CUDA_TOOLKIT_PATH unset", ["make setup (installs the 13.4 headers from PyPI wheels)"]
        )
    inc = Path(root) / "include"
    missing = [h for h in ("cuda.h", "curand.h", "crt/host_config.h") if not (inc / h).is_file()]
    rel = cuda_h_release(Path(root))
    if missing:
        return Check("CUDA headers", BAD, f"{inc}: missing {', '.join(missing)}", ["make setup"])
    if rel is None or rel < (13, 2):
        return Check(
            "CUDA headers", BAD, f"{inc}/cuda.h is CUDA {fmt(rel)}", ["cutile needs cuda.h >= 13.2: make setup"]
        )
    return Check("CUDA headers", OK, f"{inc} (CUDA {fmt(rel)}, curand.h present)")


def check_libclang() -> Check:
    d = os.environ.get("LIBCLANG_PATH", "")
    libs = [p for p in glob.glob(os.path.join(d, "libclang*.so*")) if "clang-cpp" not in p] if d else []
    if not libs:
        return Check(
            "libclang", BAD, f"none in LIBCLANG_PATH={d!r}", ["apt-get install libclang-dev (root) or make setup"]
        )
    builtin = glob.glob(os.path.join(d, "clang", "*", "include", "stddef.h"))
    if not builtin and d.startswith("/usr/lib/llvm"):
        return Check(
            "libclang",
            WARN,
            f"{libs[0]}, but no clang builtin headers (stddef.h)",
            ["apt-get install libclang-common-*-dev"],
        )
    return Check("libclang", OK, libs[0])


# -- run side -----------------------------------------------------------------------------------


def check_python() -> list[Check]:
    checks = [Check("python", OK, f"{sys.executable} {sys.version.split()[0]}")]
    try:
        import torch  # noqa: PLC0415 - optional

        checks.append(Check("torch", OK, f"{torch.__version__} (built for CUDA {torch.version.cuda})"))
    except ImportError:
        checks.append(Check("torch", BAD, "not importable", ["make setup (or use a python3 that has torch)"]))
    try:
        import cffi  # noqa: PLC0415

        checks.append(Check("cffi", OK, cffi.__version__))
    except ImportError:
        checks.append(
            Check("cffi", BAD, "not importable", ["make setup; on a GPU host the bundle carries a cp312 wheel"])
        )
    return checks


def check_providers() -> list[Check]:
    """The baselines from other libraries (tilekit.runtime.providers): whether each imports here."""
    from tilekit.runtime import providers

    checks = []
    for name, p in providers.PROVIDERS.items():
        reason = providers.unavailable_reason(name)
        found = f"{p.dist} {providers.version(name)} imports" if reason is None else reason
        checks.append(
            Check(
                f"baseline {name}",
                OK if reason is None else NONE,
                f"{found} (a default baseline where the kernel declares it)",
            )
        )
    return checks


def check_gpu() -> list[Check]:
    smi = run(["nvidia-smi", "--query-gpu=index,name,driver_version,compute_cap", "--format=csv,noheader"])
    if not smi:
        return [Check("GPU", NONE, "no nvidia-smi / no GPU: GPU stages will report BLOCKED")]
    checks = [Check("GPU", OK, line.strip()) for line in smi.splitlines()]
    try:
        import torch  # noqa: PLC0415

        if not torch.cuda.is_available():
            checks.append(Check("torch.cuda", BAD, "torch sees no GPU", ["check the driver and CUDA_VISIBLE_DEVICES"]))
        else:
            kineto = torch.autograd.kineto_available()
            checks.append(
                Check(
                    "CUPTI (torch.profiler)",
                    OK if kineto else BAD,
                    "kineto available" if kineto else "kineto unavailable",
                    [] if kineto else ["this torch build has no kineto; CUPTI timing needs it"],
                )
            )
    except ImportError:
        pass
    checks.append(check_nvml())
    return checks


def check_nvml() -> Check:
    """NVML (nvidia-ml-py's pynvml): `make settle` reads the SM clock through it to drop the
    samples taken while the clock had fallen (without it no sample is dropped, and its records say
    `clock_mhz: null`)."""
    try:
        import pynvml  # noqa: PLC0415

        pynvml.nvmlInit()
        clock = pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM)
    except ImportError:
        return Check(
            "NVML (SM clock)", WARN, "pynvml not installed", ["pip install nvidia-ml-py (make settle's clock filter)"]
        )
    except Exception as e:  # noqa: BLE001 - any NVML failure: the filter is off, and the check says so
        return Check("NVML (SM clock)", WARN, f"NVML failed: {e}", ["make settle keeps every sample unfiltered"])
    return Check("NVML (SM clock)", OK, f"SM clock {clock} MHz now")


def find_tileiras() -> tuple[Path | None, str]:
    """Where cutile 0.5 looks, in its order (cutile-compiler's tileiras_binary)."""
    if os.environ.get("CUTILE_TILEIRAS_PATH"):
        return Path(os.environ["CUTILE_TILEIRAS_PATH"]), "CUTILE_TILEIRAS_PATH"
    for var in ("CUDA_TOOLKIT_PATH", "CUDA_HOME"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "tileiras").is_file():
            return Path(root) / "bin" / "tileiras", f"${var}/bin"
    for d in (
        "/usr/local/cuda-13.5",
        "/usr/local/cuda-13.4",
        "/usr/local/cuda-13.3",
        "/usr/local/cuda-13.2",
        "/usr/local/cuda-13",
        "/usr/local/cuda",
        "/opt/cuda",
    ):
        if (Path(d) / "bin" / "tileiras").is_file():
            return Path(d) / "bin" / "tileiras", f"default install {d}"
    w = shutil.which("tileiras")
    return (Path(w), "PATH") if w else (None, "")


def check_tileir() -> list[Check]:
    tileiras, how = find_tileiras()
    if tileiras is None:
        return [
            Check(
                "tileiras",
                NONE,
                "not found (needed only where kernels run)",
                [
                    "on a GPU host: run from `make bundle`'s runner, or set CUDA_TOOLKIT_PATH to a CUDA >= 13.3 tree with bin/tileiras"
                ],
            )
        ]
    real = tileiras.resolve()
    rel = release_of(run([str(real), "--version"]))
    checks = [
        Check(
            "tileiras",
            OK if rel and rel >= (13, 3) else BAD,
            f"{tileiras} via {how}, release {fmt(rel)}",
            [] if rel and rel >= (13, 3) else ["sm_90 needs tileiras >= 13.3 (nvidia-cuda-tileiras 13.4.92)"],
        )
    ]
    ptxas = real.parent / "ptxas"
    prel = release_of(run([str(ptxas), "--version"])) if ptxas.is_file() else None
    if prel is None:
        checks.append(
            Check(
                "ptxas beside tileiras",
                BAD,
                f"{ptxas} missing",
                [f"put the ptxas of release {fmt(rel)} (nvidia-cuda-nvcc) in {real.parent}"],
            )
        )
    else:
        checks.append(
            Check(
                "ptxas beside tileiras",
                OK if prel == rel else BAD,
                f"{ptxas} release {fmt(prel)}",
                [] if prel == rel else [f"tileiras {fmt(rel)} needs ptxas {fmt(rel)} in the same bin/"],
            )
        )
    # libnvvm: tileiras loads $CUDA_HOME/nvvm/lib64/libnvvm.so (or LD_LIBRARY_PATH when CUDA_HOME is unset).
    tree = real.parent.parent
    cuda_home = os.environ.get("CUDA_HOME")
    if cuda_home:
        home = Path(cuda_home)
        nvvm = home / "nvvm" / "lib64" / "libnvvm.so"
        home_rel = release_of(run([str(home / "bin" / "ptxas"), "--version"])) or cuda_h_release(home)
        fix = [
            f"export CUDA_HOME={tree}  (tileiras {fmt(rel)} then finds its own libnvvm; "
            "an older CUDA_HOME makes it fail with 'failed to compile Tile IR program')"
        ]
        if not nvvm.exists():
            checks.append(Check("libnvvm", BAD, f"CUDA_HOME={home}: no nvvm/lib64/libnvvm.so", fix))
        elif home_rel != rel:
            checks.append(
                Check("libnvvm", BAD, f"CUDA_HOME={home} is release {fmt(home_rel)}, tileiras is {fmt(rel)}", fix)
            )
        else:
            checks.append(Check("libnvvm", OK, f"{nvvm} (release {fmt(home_rel)})"))
    else:
        hits = [
            d
            for d in os.environ.get("LD_LIBRARY_PATH", "").split(":")
            if d and glob.glob(os.path.join(d, "libnvvm.so*"))
        ]
        own = tree / "nvvm" / "lib64" / "libnvvm.so"
        if hits:
            checks.append(
                Check(
                    "libnvvm",
                    WARN,
                    f"CUDA_HOME unset; LD_LIBRARY_PATH has {hits[0]} (release not checked)",
                    [f"prefer export CUDA_HOME={tree}"],
                )
            )
        else:
            checks.append(
                Check(
                    "libnvvm",
                    BAD if not own.exists() else WARN,
                    f"CUDA_HOME unset ({own} {'exists' if own.exists() else 'missing'})",
                    [f"export CUDA_HOME={tree}"],
                )
            )
    return checks


def check_library() -> Check:
    from tilekit.runtime import ffi

    path = ffi.library_path()
    if not path.is_file():
        return Check("kernel library", NONE, f"{path} not built", ["make build"])
    try:
        lib = ffi.Library(path)
    except Exception as e:  # noqa: BLE001 - doctor reports whatever went wrong
        return Check("kernel library", BAD, f"{path}: {e}", ["make build (rebuild for this machine's glibc)"])
    problems = ffi.check_abi(lib.abi(), lib.ffi)
    return Check(
        "kernel library",
        BAD if problems else OK,
        f"{path}" + (f": {'; '.join(problems)}" if problems else ", ABI matches"),
        ["make build"] if problems else [],
    )


def build_checks() -> list[Check]:
    if os.environ.get("TILEKIT_PREBUILT") == "1":
        # a GPU host running from `make bundle`: the library was built elsewhere
        return [Check("build toolchain", NONE, "not needed: TILEKIT_PREBUILT=1 (prebuilt library from the bundle)")]
    return [check_cargo(), check_headers(), check_libclang()]


def all_checks() -> list[Check]:
    checks = build_checks()
    checks += check_python()
    checks += check_providers()
    checks += check_gpu()
    checks += check_tileir()
    try:
        checks.append(check_library())
    except ImportError as e:
        checks.append(Check("kernel library", BAD, f"cannot check: {e}", ["make setup"]))
    return checks


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tilekit doctor", description=__doc__.split("\n\n")[0])
    p.add_argument("--strict", action="store_true", help="exit 1 when any check FAILs")
    args = p.parse_args(argv)
    checks = all_checks()
    for c in checks:
        print(f"[{c.status:>4}] {c.name:<24} {c.found}")
        for fix in c.fixes:
            print(f"       {'':<24} fix: {fix}")
    bad = [c.name for c in checks if c.status == BAD]
    print(f"\ndoctor: {len(bad)} problem(s)" + (f": {', '.join(bad)}" if bad else ""))
    return 1 if (bad and args.strict) else 0
