"""``python -m tilekit fingerprint FILE``: what timings depend on beyond the sources.

The Makefile's timed raw logs depend on ``$(OUT_ROOT)/.timing-env.txt``; this writes it, and only
when its text changes, so make re-times the port and the baselines after a change of GPU, driver,
Python, the packages that compile or time kernels, or the Tile IR compiler, and re-times nothing
otherwise. It runs on every timed make call, so it stays cheap: package versions come from their
installed metadata (nothing is imported), the GPU from one ``nvidia-smi`` query.

Left out on purpose: which GPUs of a host a run uses (``GPUS``, ``CUDA_VISIBLE_DEVICES``) and the
time of day. Two GPUs of one model time alike; a different model shows up in the GPU line.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from importlib import metadata

# The distributions whose version changes what a timed case runs or how it is timed.
PACKAGES = ("torch", "triton", "cuda-tile", "numpy", "cffi", "pytest", "tilegym", "liger-kernel")
HEADER = (
    "# The environment the timings in this folder depend on (tilekit.testing.fingerprint; make re-times\n"
    "# every timed stage when it changes). Written by make, not by hand.\n"
)


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def gpus(run: Callable = subprocess.run) -> str:
    """``2 x NVIDIA H200 (driver 580.95.05)``, one such part per GPU model, or ``none`` (no driver)."""
    try:
        done = run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "none (nvidia-smi not found or not answering)"
    rows = [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []
    if not rows:
        return "none (nvidia-smi lists no GPU)"
    parts = []
    for row, count in sorted(Counter(rows).items()):
        name, _, driver = row.rpartition(",")
        parts.append(f"{count} x {name.strip()} (driver {driver.strip()})")
    return "; ".join(parts)


def tileiras(run: Callable = subprocess.run) -> str:
    """The release line of the tileiras on PATH (the one the port's JIT runs), or ``not found``."""
    try:
        done = run(["tileiras", "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "not found"
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        return "not found"
    return next((line for line in lines if "release" in line), lines[-1])  # "... release 13.4, V13.4.92"


def fingerprint_text(run: Callable = subprocess.run) -> str:
    lines = [
        f"gpu: {gpus(run)}",
        f"python: {platform.python_version()}",
        *(f"{name}: {package_version(name)}" for name in PACKAGES),
        f"tileiras: {tileiras(run)}",
        f"CUDA_HOME: {os.environ.get('CUDA_HOME', '(unset)')}",
    ]
    return HEADER + "\n".join(lines) + "\n"


def write_if_changed(path: str, text: str) -> bool:
    """Write ``text`` to ``path`` unless it already holds exactly that; True when it wrote."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print(
            "usage: python -m tilekit fingerprint FILE  (writes FILE only when the environment changed)",
            file=sys.stderr,
        )
        return 2
    if write_if_changed(argv[0], fingerprint_text()):
        print(
            f"tilekit fingerprint: {argv[0]}: the timing environment is new or changed; timed stages re-run",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
