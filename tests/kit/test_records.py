"""tilekit.reports.records: printing, parsing and sanitizing perf record blocks (CPU only).

Fixture logs are built here from the real printer (format_block) plus pytest-like noise.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilekit.reports.records import (
    BEGIN,
    END,
    canonical_config,
    clean_text,
    format_block,
    investigation_text,
    normalize_text,
    parse_log,
    write_atomic,
)

from perf_records import HEADER, perf_record  # tests/kit/perf_records.py


def record(m=4096, n=1024, median=0.25, backend="cutile-rs", dtype="float16", **extra):
    node = f"tests/kernels/test_rms_norm.py::test_perf[{backend}-{m}-{n}-{dtype}]"
    config = {"dtype": dtype, "m": m, "n": n}
    return perf_record(backend, config, median, test=node, kernel="rms_norm", std=0.001, nrep=200, **extra)


def block(**kw) -> str:
    return format_block(record(**kw))


def raw_block(median="0.250000", **overrides) -> str:
    """A block written by hand, to carry values format_block would never print (nan, 0, -1)."""
    fields = {
        "test": "t::test_perf[x]",
        "kernel": "rms_norm",
        "backend": "cutile-rs",
        "config": '{"dtype": "float16", "m": 1, "n": 2}',
        "timer": "cupti",
        "median_ms": median,
        "mean_ms": median,
        "std_ms": "0.000000",
        "min_ms": median,
        "max_ms": median,
        "nrep": "10",
    }
    fields.update(overrides)
    return "\n".join([BEGIN] + [f"{k}: {v}" for k, v in fields.items() if v is not None] + [END])


# ---------------------------------------------------------------------------------------------
# printing


def test_format_block_matches_design_example_layout():
    text = format_block(
        record(m=262144, n=1024, median=0.27153, mean_ms=0.272004, std_ms=0.00121, min_ms=0.26944, max_ms=0.27648)
    )
    assert text.split("\n") == [
        BEGIN,
        "test: tests/kernels/test_rms_norm.py::test_perf[cutile-rs-262144-1024-float16]",
        "kernel: rms_norm",
        "backend: cutile-rs",
        'config: {"dtype": "float16", "m": 262144, "n": 1024}',
        "timer: cupti",
        "median_ms: 0.271530",
        "mean_ms: 0.272004",
        "std_ms: 0.001210",
        "min_ms: 0.269440",
        "max_ms: 0.276480",
        "nrep: 200",
        END,
    ]


def test_canonical_config_sorts_keys_and_shortens_dtype_names():
    class FakeTorchDtype:  # str() like torch.float16; the report tools never import torch
        def __str__(self):
            return "torch.bfloat16"

    FakeTorchDtype.__name__ = "dtype"
    assert canonical_config({"n": 2, "dtype": FakeTorchDtype(), "m": 1}) == '{"dtype": "bfloat16", "m": 1, "n": 2}'


def test_canonical_config_rejects_values_without_json_form():
    with pytest.raises(TypeError, match="no JSON form"):
        canonical_config({"x": object()})


def test_extras_and_env_print_as_one_line_each():
    text = block(gbps=3900.5, env={"torch": "2.11", "gpu": "H200"}, l2_flush=True)
    assert text.split("\n")[-4:-1] == ["gbps: 3900.5", 'env: {"gpu": "H200", "torch": "2.11"}', "l2_flush: true"]


def test_format_block_refuses_a_record_without_required_keys():
    bad = record()
    del bad["median_ms"]
    with pytest.raises(KeyError, match="median_ms"):
        format_block(bad)


# ---------------------------------------------------------------------------------------------
# parsing real-looking pytest output


def test_clean_run_keeps_every_block_and_reads_its_values():
    text = (
        HEADER
        + "\n".join([block(m=1), "tests/x.py::test_perf[b] PASSED", block(m=2, gbps=12.5)])
        + "\n===== 2 passed in 1.00s =====\n"
    )
    parsed = parse_log(text)
    assert [r.config["m"] for r in parsed.records] == [1, 2]
    assert parsed.records[1].number("gbps") == 12.5 and parsed.records[0].number("gbps") is None
    assert parsed.rejected == [] and parsed.outcomes == [] and parsed.passed == 2


def test_failed_case_with_traceback_is_reported_with_its_reason():
    text = (
        HEADER
        + block(m=1)
        + """
tests/kernels/test_rms_norm.py::test_perf[cutile-rs-2-2-float16] FAILED
=================================== FAILURES ===================================
____________________ test_perf[cutile-rs-2-2-float16] ____________________
    def test_perf():
>       raise RuntimeError("cutile_rms_norm returned -3 (JIT or launch failure)")
E       RuntimeError: cutile_rms_norm returned -3 (JIT or launch failure)
=========================== short test summary info ============================
FAILED tests/kernels/test_rms_norm.py::test_perf[cutile-rs-2-2-float16] - RuntimeError: cutile_rms_norm returned -3 (JIT or launch failure)
========================= 1 failed, 1 passed in 2.00s ==========================
"""
    )
    parsed = parse_log(text)
    assert len(parsed.records) == 1
    [failed] = parsed.outcomes
    assert (failed.status, failed.case) == (
        "FAILED",
        "tests/kernels/test_rms_norm.py::test_perf[cutile-rs-2-2-float16]",
    )
    assert failed.reason == "RuntimeError: cutile_rms_norm returned -3 (JIT or launch failure)"


def test_error_at_setup_is_reported_as_errored():
    text = (
        HEADER
        + """_____ ERROR at setup of test_perf[cutile-rs-1-2-float16] _____
E   OSError: libcutile_kernels.so: cannot open shared object file
=========================== short test summary info ============================
ERROR tests/kernels/test_rms_norm.py::test_perf[cutile-rs-1-2-float16] - OSError: libcutile_kernels.so: cannot open shared object file
=========================== 1 error in 0.50s ===========================
"""
    )
    parsed = parse_log(text)
    assert parsed.records == []
    assert [(o.status, o.reason) for o in parsed.outcomes] == [
        ("ERROR", "OSError: libcutile_kernels.so: cannot open shared object file")
    ]
    assert "errored cases: 1" in investigation_text("raw", parsed)


def test_block_cut_off_by_a_killed_run_is_dropped_and_reported():
    cut = "\n".join(block(m=2).split("\n")[:7])  # the run died after median_ms... was being printed
    parsed = parse_log(HEADER + block(m=1) + "\n" + cut)
    assert [r.config["m"] for r in parsed.records] == [1]
    [rejected] = parsed.rejected
    assert rejected.reason == "truncated: the log ends inside the block (run killed?)"
    assert rejected.test == "tests/kernels/test_rms_norm.py::test_perf[cutile-rs-2-1024-float16]"
    assert rejected.line == HEADER.count("\n") + 14


def test_block_interrupted_by_a_new_block_is_dropped():
    first = "\n".join(block(m=1).split("\n")[:5])
    parsed = parse_log(first + "\n" + block(m=2))
    assert [r.config["m"] for r in parsed.records] == [2]
    assert parsed.rejected[0].reason == "truncated: a new block began before its end marker"


def test_crlf_log_parses_like_lf_and_sanitizes_to_lf():
    lf = HEADER + block(m=1) + "\n" + block(m=2) + "\n"
    crlf = lf.replace("\n", "\r\n")
    assert clean_text(parse_log(crlf).records) == clean_text(parse_log(lf).records)
    assert "\r" not in clean_text(parse_log(crlf).records)


@pytest.mark.parametrize(
    "median, reason",
    [
        ("nan", "median_ms is nan (must be finite and > 0)"),
        ("0.000000", "median_ms is 0.000000 (must be finite and > 0)"),
        ("-0.5", "median_ms is -0.5 (must be finite and > 0)"),
        ("inf", "median_ms is inf (must be finite and > 0)"),
        ("fast", "median_ms is 'fast', not a number"),
    ],
)
def test_invalid_median_rejects_the_block_with_its_reason(median, reason):
    parsed = parse_log(raw_block(median=median))
    assert parsed.records == []
    assert [r.reason for r in parsed.rejected] == [reason]


def test_block_missing_a_required_key_is_rejected_naming_it():
    parsed = parse_log(raw_block(timer=None, nrep=None))
    assert [r.reason for r in parsed.rejected] == ["missing required keys: timer, nrep"]


def test_zero_std_is_valid_but_inconsistent_times_are_not():
    assert len(parse_log(raw_block(std_ms="0.000000")).records) == 1
    parsed = parse_log(raw_block(min_ms="0.300000"))
    assert parsed.rejected[0].reason.startswith("times are inconsistent")


def test_non_key_line_inside_a_block_rejects_it():
    text = raw_block().replace("timer: cupti", "timer: cupti\nsome stray print")
    assert "not a `key: value` line" in parse_log(text).rejected[0].reason


def test_block_of_another_kernel_or_backend_is_rejected_when_filtering():
    text = raw_block()
    assert parse_log(text, kernel="softmax").rejected[0].reason == "kernel is 'rms_norm', this log is for 'softmax'"
    assert parse_log(text, backend="triton").rejected[0].reason == "backend is 'cutile-rs', this log is for 'triton'"
    assert len(parse_log(text, kernel="rms_norm", backend="cutile-rs").records) == 1


def test_config_is_matched_in_canonical_form_whatever_its_spacing():
    text = raw_block(config='{"n":2,"m":1,  "dtype":"float16"}')
    assert parse_log(text).records[0].config_key == '{"dtype": "float16", "m": 1, "n": 2}'


def test_skip_reasons_are_collected_from_the_short_summary():
    text = HEADER + "SKIPPED [4] tests/kernels/test_rms_norm.py:88: no CUDA GPU\n======= 4 skipped in 0.1s =======\n"
    parsed = parse_log(text)
    assert [(o.status, o.count, o.case, o.reason) for o in parsed.outcomes] == [
        ("SKIPPED", 4, "tests/kernels/test_rms_norm.py:88", "no CUDA GPU")
    ]
    assert parsed.passed == 0


def test_passed_cases_without_blocks_point_at_the_missing_option():
    parsed = parse_log(HEADER + "======= 3 passed in 1.0s =======\n")
    assert "was pytest run with --print-record?" in investigation_text("raw", parsed)


def test_investigation_log_lists_every_rejection_and_failure_with_lines():
    text = raw_block(median="nan") + "\nFAILED t.py::test_perf[a] - AssertionError: boom\n"
    lines = investigation_text("perf.full.txt", parse_log(text)).split("\n")
    assert "  line 1: t::test_perf[x]: median_ms is nan (must be finite and > 0)" in lines
    assert "  line 14: t.py::test_perf[a]: AssertionError: boom" in lines


@pytest.mark.parametrize("odd", ["a \r\nb\rc\n", "\ufeffa \nb\nc\n", "a \nb\nc", "\ufeffa \r\nb\r\nc"])
def test_crlf_lone_cr_bom_and_missing_final_newline_normalize_to_lf(odd):
    assert normalize_text(odd) == "a \nb\nc\n"


def test_normalized_text_keeps_empty_text_empty_and_lf_text_unchanged():
    assert normalize_text("") == ""
    assert normalize_text("a\n\nb\n") == "a\n\nb\n"


def test_sanitize_is_idempotent_on_a_messy_log():
    messy = HEADER + block(m=1) + "\nnoise\n" + raw_block(median="nan") + "\n" + block(m=2)[:-5]
    once = clean_text(parse_log(messy).records)
    assert clean_text(parse_log(once).records) == once
    assert once == block(m=1) + "\n"


def test_write_atomic_leaves_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "report.md"
    target.write_text("old\n")

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", crash)
    with pytest.raises(OSError):
        write_atomic(str(target), "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


# ---------------------------------------------------------------------------------------------
# properties

# Noise: any lines except the markers themselves (a marker line *is* structure, not noise).
noise_line = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=40
).filter(lambda s: s.strip() not in (BEGIN, END))
noise = st.lists(noise_line, max_size=8).map("\n".join)
medians = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(before=noise, after=noise, median=medians, crlf=st.booleans())
def test_valid_block_survives_any_surrounding_noise(before, after, median, crlf):
    text = before + "\n" + block(median=median) + "\n" + after
    if crlf:
        text = text.replace("\n", "\r\n")
    records = parse_log(text).records
    assert [r.config_key for r in records] == ['{"dtype": "float16", "m": 4096, "n": 1024}']
    assert math.isclose(records[0].median_ms, median, rel_tol=1e-5, abs_tol=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            noise,
            medians.map(lambda m: block(median=m)),
            st.just(raw_block(median="nan")),
            st.just(BEGIN),
            st.just(END),
        ),
        max_size=8,
    )
)
def test_sanitize_is_idempotent(parts):
    once = clean_text(parse_log("\n".join(parts)).records)
    assert clean_text(parse_log(once).records) == once
