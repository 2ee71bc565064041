"""The suites of kernels/<name>/ for this file's name test_<name>.py, generated from the kernel's
declaration (tilekit.testing.suite). Every kernel's stub is this same file; it only gives the tests a path."""

from tilekit.testing.suite import suite

globals().update(suite(__file__))
