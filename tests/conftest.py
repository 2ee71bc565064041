"""Shared pytest set-up. The record printer (--print-record) is the tilekit.pytest_plugin loaded
by pyproject.toml's addopts; GPU fixtures live in tests/kernels/conftest.py."""
