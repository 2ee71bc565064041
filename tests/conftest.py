"""Shared pytest set-up. The record printer (--print-record) is the tilekit.testing.pytest_plugin loaded
by pyproject.toml's addopts; GPU fixtures live in tests/kernels/conftest.py."""

from pathlib import Path

import pytest

KERNEL_SUITES = Path(__file__).resolve().parent / "kernels"


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path, parent):
    """tests/kernels/ also collects the generated suite of a kernel folder that has no stub file."""
    if path == KERNEL_SUITES:
        from tilekit.testing.suite import KernelSuites

        return KernelSuites.from_parent(parent, path=path)
    return None
