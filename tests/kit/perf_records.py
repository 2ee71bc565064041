"""Perf records for the kit's tests, built with the real printer (records.format_block): one record,
its block, or parsed records of one backend. Shared by test_compare, test_gpu_workers,
test_line_endings, test_records, test_report and test_validate; each names its own kernel, test ids
and configs on top.
"""

from tilekit.reports.records import format_block, parse_log

# The first lines of a pytest run, before any case.
HEADER = "platform linux -- Python 3.12.3, pytest-9.2.0\nrootdir: /work/main\nplugins: timeout-2.4.0\n"


def perf_record(
    backend: str,
    config: dict,
    median: float,
    *,
    test: str = "",
    kernel: str = "k",
    std: float = 0.0,
    nrep: int = 10,
    **extra,
) -> dict:
    """A record as the kit's pytest hook prints it: mean, min and max equal the median. ``test``
    defaults to ``t.py::test_perf[<backend>-<config n>]``; ``extra`` adds fields or overrides any."""
    rec = dict(
        test=test or f"t.py::test_perf[{backend}-{config['n']}]",
        kernel=kernel,
        backend=backend,
        config=config,
        timer="cupti",
        median_ms=median,
        mean_ms=median,
        std_ms=std,
        min_ms=median,
        max_ms=median,
        nrep=nrep,
    )
    return {**rec, **extra}


def perf_block(backend: str, config: dict, median: float, **kw) -> str:
    """perf_record(...) as its block (no trailing newline)."""
    return format_block(perf_record(backend, config, median, **kw))


def parsed_records(backend: str, medians: dict, gpus: dict | None = None) -> list:
    """Records of kernel "k" from {n: median_ms} at config {"dtype": "float16", "n": n}, through the
    parser; gpus {n: model} puts an env on them (None: an old log without env)."""
    blocks = [
        perf_block(backend, {"dtype": "float16", "n": n}, med, **({} if gpus is None else {"env": {"gpu": gpus[n]}}))
        for n, med in medians.items()
    ]
    return parse_log("\n".join(blocks)).records
