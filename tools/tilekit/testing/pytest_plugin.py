"""pytest plugin (loaded with ``-p tilekit.testing.pytest_plugin``): the perf record printer.

A timed test attaches its record with
``request.node.user_properties.append(("tilekit_perf_record", record_dict))``. With
``--print-record``, this plugin prints one record block (DESIGN.md, format v1) per record of
every passed case. It prints from the report hook, after the test body has finished, through the
terminal reporter, so the block is contiguous even under ``-s``.

Under pytest-xdist (``GPUS=N``, tilekit.testing.gpu_workers) a worker's reports, user_properties
included, are replayed in the controller's ``pytest_runtest_logreport``: only the controller
prints, one block at a time, so blocks stay whole and none is printed twice. A worker only turns
its records into plain JSON types first, since execnet cannot send a torch dtype.

It also registers ``--stage-log`` / ``--stage-backends`` (one raw log per kernel and backend from
one session: tilekit.testing.stage_logs).
"""

from __future__ import annotations

import sys

import pytest

from tilekit.reports.records import PROPERTY, plain_record, record_blocks


def pytest_addoption(parser: pytest.Parser) -> None:
    # A conftest may register the same option; the second registration must not stop pytest.
    try:
        parser.addoption(
            "--print-record",
            action="store_true",
            default=False,
            help="tilekit: print a performance record block for every passed timed case",
        )
    except ValueError:
        pass
    group = parser.getgroup("tilekit")
    group.addoption(
        "--stage-log",
        metavar="TEMPLATE",
        default=None,
        help="tilekit: also write each (kernel, backend) stage's cases to its own log, e.g. "
        "out/{kernel}/reports/logs/baseline_perf_{backend}.full.txt (tilekit.testing.stage_logs)",
    )
    group.addoption(
        "--stage-backends",
        metavar="IDS",
        default="",
        help="tilekit: backend ids (cutile_py,triton,...) whose stage logs a --stage-log session "
        "must write for every kernel file it is given, even if nothing is collected",
    )


class RecordPrinter:
    """Registered only when --print-record is given, so a plain run pays nothing."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)  # after the terminal reporter wrote PASSED for the case
    def pytest_runtest_logreport(self, report) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        for block in record_blocks(report):
            if terminal is not None:
                # -q progress dots leave the cursor mid-line without the reporter knowing it
                if getattr(getattr(terminal, "_tw", None), "width_of_current_line", 0):
                    terminal.write("\n")
                for line in block.split("\n"):
                    terminal.write_line(line)  # write_line also starts on a fresh line after -v output
            else:
                sys.stdout.write("\n" + block + "\n")
                sys.stdout.flush()


class RecordForwarder:
    """Registered in a pytest-xdist worker instead of the printer: the controller prints."""

    @pytest.hookimpl(tryfirst=True)  # before xdist serializes the report for the controller
    def pytest_runtest_logreport(self, report) -> None:
        report.user_properties = [
            (name, plain_record(value) if name == PROPERTY else value) for name, value in report.user_properties
        ]


def pytest_configure(config: pytest.Config) -> None:
    from tilekit.testing import stage_logs

    stage_logs.configure(config)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker
        config.pluginmanager.register(RecordForwarder(), "tilekit-record-forwarder")
    elif config.getoption("--print-record", default=False):
        config.pluginmanager.register(RecordPrinter(config), "tilekit-record-printer")
