"""tilekit.reports.report: the `report` command on folders of raw logs built here (no GPU)."""

import sys

import pytest

from tilekit.reports import charts, report
from tilekit.reports import correctness as correctness_mod

from perf_records import HEADER, perf_block  # tests/kit/perf_records.py

KERNEL = "rms_norm"
ENV = {"gpu": "NVIDIA H200", "driver": "580.65", "cuda": "13.2", "torch": "2.11.0"}


def perf_log(backend: str, medians: dict, **extra) -> str:
    """Raw pytest output with one passed case and block per {(dtype, n): median_ms}."""
    parts = [HEADER]
    for (dtype, n), med in medians.items():
        node = f"tests/kernels/test_rms_norm.py::test_perf[{backend}-{n}-{dtype}]"
        config = {"dtype": dtype, "m": 4096, "n": n}
        block = perf_block(backend, config, med, test=node, kernel=KERNEL, std=0.001, nrep=100, **extra)
        parts += [f"{node} PASSED", block]
    parts.append(f"========== {len(medians)} passed in 1.00s ==========")
    return "\n".join(parts) + "\n"


def junit(*cases: str) -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest">'
        + "".join(cases)
        + "</testsuite></testsuites>"
    )


def case(name: str, inner: str = "") -> str:
    return f'<testcase classname="tests.kernels.test_rms_norm" name="{name}" time="0.1">{inner}</testcase>'


SHAPES = {("float16", 1024): 0.25, ("float16", 4096): 1.0, ("bfloat16", 1024): 0.3}


def make_dir(tmp_path, port=SHAPES, baselines=None, port_text=None, junit_text=None, raw_correctness=True):
    d = tmp_path / "out" / KERNEL
    logs = d / "reports" / "logs"
    logs.mkdir(parents=True)
    (logs / "perf_cutile_rs.full.txt").write_text(
        port_text if port_text is not None else perf_log("cutile-rs", port, gbps=3900.0, peak_gbps=4800.0, env=ENV)
    )
    for b, medians in (baselines if baselines is not None else {"triton": SHAPES, "torch": SHAPES}).items():
        (logs / f"baseline_perf_{b}.full.txt").write_text(perf_log(b, medians, env=ENV))
    (logs / "correctness.junit.xml").write_text(junit_text or junit(case("test_op[cutile_rs-float16-4-8]")))
    if raw_correctness:
        (d / "correctness_cutile_rs.txt").write_text(HEADER + "collected 1 item\n")
    return d


def run(d, *extra) -> int:
    return report.main(["--kernel", KERNEL, "--dir", str(d), *extra])


def test_clean_run_renders_done_with_tables_per_dtype(tmp_path):
    d = make_dir(tmp_path)
    assert run(d) == 0
    text = (d / "reports" / "performance.md").read_text()
    lines = text.split("\n")
    assert lines[0] == "VERDICT: DONE"
    assert [ln_ for ln_ in lines if ln_.startswith("geomean_ratio")] == [
        "geomean_ratio=1.0000",
        "geomean_ratio_ci95=[1.0000,1.0000]",
    ]
    assert "Severity: DONE" in lines
    assert "## bfloat16" in lines and "## float16" in lines
    fp16 = lines.index("## float16")
    row = next(ln_ for ln_ in lines[fp16:] if ln_.startswith("| m=4096, n=1024 "))
    assert [c.strip() for c in row.strip("|").split("|")][:7] == [
        "m=4096, n=1024",
        "0.250000",
        "0.250000",
        "1.0000",
        "3900.0",
        "81.2%",
        "DONE",
    ]
    assert "| gpu    | NVIDIA H200" in text
    assert "- reports/logs/perf_cutile_rs.full.txt" in lines


def test_the_variant_each_port_record_names_is_listed_and_absent_without_one(tmp_path):
    d = make_dir(tmp_path)
    assert run(d) == 0
    assert "Variants" not in (d / "reports" / "performance.md").read_text()
    logs = tmp_path / "with" / "out" / KERNEL / "reports" / "logs"
    d = make_dir(tmp_path / "with")
    port = perf_log("cutile-rs", SHAPES, gbps=3900.0, peak_gbps=4800.0, env=ENV, variant={"block": 1024, "rows": 2})
    (logs / "perf_cutile_rs.full.txt").write_text(port)
    assert run(d) == 0
    lines = (d / "reports" / "performance.md").read_text().split("\n")
    start = lines.index("## Variants cutile-rs ran (per config: autotune's pick, or the variant asked for)")
    assert lines[start + 2] == '- {"dtype": "float16", "m": 4096, "n": 1024}: {"block": 1024, "rows": 2}'
    assert len([ln_ for ln_ in lines[start:] if ln_.startswith("- {")]) == len(SHAPES)


def test_report_re_sanitizes_raw_logs_and_is_byte_identical_on_rerun(tmp_path):
    d = make_dir(tmp_path)
    assert run(d) == 0
    first = {
        p: (d / p).read_bytes()
        for p in (
            "reports/performance.md",
            "reports/correctness.md",
            "perf_cutile_rs.txt",
            "baseline_perf_triton.txt",
            "reports/logs/perf_investigation.log",
        )
    }
    assert first["perf_cutile_rs.txt"].startswith(b"==== Performance Test Results ====\n")
    assert run(d) == 0
    assert {p: (d / p).read_bytes() for p in first} == first


IMAGE = "![rms_norm: cutile-rs time relative to each baseline per config, and % of peak](performance.svg)"


def test_chart_is_drawn_beside_the_report_and_linked_before_the_tables(tmp_path):
    d = make_dir(tmp_path)
    assert run(d) == 0
    lines = (d / "reports" / "performance.md").read_text().split("\n")
    at = lines.index(IMAGE)
    assert lines[at - 2].startswith("Reference: ") and lines[at - 1 : at + 3] == ["", IMAGE, "", "## Baselines"]
    assert [line for line in lines if line.startswith(("![", "Chart:"))] == [IMAGE]
    svg = (d / "reports" / "performance.svg").read_text()
    assert svg.startswith("<?xml") and svg.rstrip().endswith("</svg>")
    assert ">float16 · m=4096, n=4096</text>" in svg and ">vs torch (reference)</text>" in svg


def test_chart_data_is_the_tables_numbers(tmp_path):
    d = make_dir(tmp_path, port={k: v * 1.2 for k, v in SHAPES.items()})
    inputs = report.load_perf(KERNEL, str(d))
    chart = report.chart_data(report.compare_inputs(inputs))
    assert (chart.kernel, chart.reference, chart.baselines) == (KERNEL, "torch", ("torch", "triton"))
    assert [(r.group, r.label) for r in chart.rows] == [
        ("bfloat16", "m=4096, n=1024"),
        ("float16", "m=4096, n=1024"),
        ("float16", "m=4096, n=4096"),
    ]
    first = chart.rows[0]
    assert first.ratios == pytest.approx({"torch": 1.2, "triton": 1.2}, rel=1e-12)
    assert (first.peak_pct, first.peak_text, first.status) == (100 * 3900.0 / 4800.0, "81.2% · 3900.0 GB/s", "")


def test_chart_bytes_are_identical_across_renders(tmp_path):
    d = make_dir(tmp_path)
    assert run(d) == 0
    first = (d / "reports" / "performance.svg").read_bytes()
    assert run(d) == 0
    assert (d / "reports" / "performance.svg").read_bytes() == first


def test_without_matplotlib_the_report_is_written_and_says_why_in_one_line(tmp_path, monkeypatch, capsys):
    d = make_dir(tmp_path)
    assert run(d) == 0
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    assert run(d) == 0
    text = (d / "reports" / "performance.md").read_text()
    line = (
        "Chart: not drawn: matplotlib is not importable (import of matplotlib halted; None in sys.modules); "
        f"`make setup` installs it, then `make KERNEL={KERNEL} report` draws the chart"
    )
    assert text.startswith("VERDICT: DONE\n") and "geomean_ratio=1.0000\n" in text
    assert [ln for ln in text.split("\n") if ln.startswith(("![", "Chart:"))] == [line]
    assert not (d / "reports" / "performance.svg").exists()  # the earlier chart does not outlive its link
    assert f"performance.svg: {line}" in capsys.readouterr().err


def test_a_chart_that_fails_to_draw_costs_one_line_not_the_report(tmp_path, monkeypatch):
    def broken(chart, path):
        raise RuntimeError("no room\nfor bars")

    monkeypatch.setattr(charts, "write_performance", broken)
    d = make_dir(tmp_path)
    assert run(d) == 0
    lines = (d / "reports" / "performance.md").read_text().split("\n")
    assert "Chart: not drawn: drawing failed (RuntimeError: no room for bars)" in lines
    assert not (d / "reports" / "performance.svg").exists()


def test_too_many_configs_for_a_chart_are_left_to_the_tables(tmp_path, monkeypatch):
    monkeypatch.setattr(charts, "MAX_CONFIGS", 2)
    d = make_dir(tmp_path)
    assert run(d) == 0
    lines = (d / "reports" / "performance.md").read_text().split("\n")
    assert "Chart: not drawn: 3 configs, charts are drawn up to 2; the tables hold every config" in lines


def test_blocked_report_has_no_chart_and_no_chart_line(tmp_path):
    d = make_dir(tmp_path)
    assert run(d) == 0
    (d / "reports" / "logs" / "perf_cutile_rs.full.txt").write_text("")
    assert run(d, "--only", "performance") == 0
    text = (d / "reports" / "performance.md").read_text()
    assert text.startswith("VERDICT: BLOCKED\n")
    assert not [ln for ln in text.split("\n") if ln.startswith(("![", "Chart:"))]
    assert not (d / "reports" / "performance.svg").exists()


def test_gap_is_investigate_with_flagged_rows(tmp_path):
    slow = {k: v * 1.2 for k, v in SHAPES.items()}
    d = make_dir(tmp_path, port=slow)
    assert run(d) == 0
    text = (d / "reports" / "performance.md").read_text()
    assert text.startswith("VERDICT: INVESTIGATE\n")
    assert "Severity: MODERATE_GAP" in text and "geomean_ratio=1.2000" in text
    assert '- {"dtype": "float16", "m": 4096, "n": 1024}: ratio 1.2000 (MODERATE_GAP)' in text


def test_missing_port_config_is_investigate_missing_data_and_named(tmp_path):
    port = dict(SHAPES)
    del port[("float16", 4096)]
    d = make_dir(tmp_path, port=port)
    assert run(d) == 0
    text = (d / "reports" / "performance.md").read_text()
    assert text.startswith("VERDICT: INVESTIGATE\n") and "Severity: MISSING_DATA" in text
    assert '- {"dtype": "float16", "m": 4096, "n": 4096}: no valid cutile-rs median' in text


def test_all_skipped_port_run_is_blocked_quoting_the_skip_reason(tmp_path):
    skipped = HEADER + "SKIPPED [3] tests/kernels/test_rms_norm.py:40: no CUDA GPU\n===== 3 skipped in 0.2s =====\n"
    d = make_dir(tmp_path, port_text=skipped, baselines={})
    assert run(d, "--only", "performance") == 0
    lines = (d / "reports" / "performance.md").read_text().split("\n")
    assert lines[0] == "VERDICT: BLOCKED"
    assert "geomean_ratio=nan" in lines and "Severity: MISSING_DATA" in lines
    assert (
        "Blocked: no valid cutile-rs median: pytest skipped 3 cases "
        "([3] tests/kernels/test_rms_norm.py:40: no CUDA GPU)"
    ) in lines
    assert (d / "perf_cutile_rs.txt").read_text() == ""


@pytest.mark.parametrize(
    "port_text, hint",
    [
        ("", "the log holds no test result (empty run, collection error, or killed before the first case)"),
        (
            HEADER + "ERROR tests/kernels/test_rms_norm.py - ImportError: cannot import name 'op'\n"
            "!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!\n",
            "1 cases failed or errored (first: ERROR tests/kernels/test_rms_norm.py - ImportError: cannot import name 'op')",
        ),
    ],
)
def test_empty_or_collection_error_run_is_blocked(tmp_path, port_text, hint):
    d = make_dir(tmp_path, port_text=port_text)
    assert run(d, "--only", "performance") == 0
    text = (d / "reports" / "performance.md").read_text()
    assert text.startswith("VERDICT: BLOCKED\n")
    assert f"Blocked: no valid cutile-rs median: {hint}\n" in text


def test_missing_port_raw_log_names_file_and_target(tmp_path, capsys):
    d = make_dir(tmp_path)
    (d / "reports" / "logs" / "perf_cutile_rs.full.txt").unlink()
    assert run(d, "--only", "performance") == 2
    assert f"perf_cutile_rs.full.txt: missing; `make KERNEL={KERNEL} perf` writes it" in capsys.readouterr().err
    assert not (d / "reports" / "performance.md").exists()


def test_missing_baselines_with_port_data_names_the_baseline_target(tmp_path, capsys):
    d = make_dir(tmp_path, baselines={})
    assert run(d, "--only", "performance") == 2
    err = capsys.readouterr().err
    assert f"`make KERNEL={KERNEL} baseline` writes them (wrote {d / 'perf_cutile_rs.txt'}; no verdict" in err
    # the port's own numbers are kept (make KERNEL=all perf before any baseline), but no verdict is made up
    assert (d / "perf_cutile_rs.txt").read_text().count("==== Performance Test Results ====") == 3
    assert "valid blocks: 3" in (d / "reports" / "logs" / "perf_investigation.log").read_text()
    assert not (d / "reports" / "performance.md").exists()


def test_duplicate_configs_fail_the_report_naming_the_log(tmp_path, capsys):
    d = make_dir(tmp_path)
    raw = d / "reports" / "logs" / "baseline_perf_torch.full.txt"
    raw.write_text(raw.read_text() * 2)
    assert run(d, "--only", "performance") == 2
    assert "reports/logs/baseline_perf_torch.full.txt: duplicate configs" in capsys.readouterr().err


def test_unmatched_port_config_is_listed_not_an_error(tmp_path):
    d = make_dir(tmp_path, port={**SHAPES, ("float32", 64): 0.01})
    assert run(d) == 0
    text = (d / "reports" / "performance.md").read_text()
    assert text.startswith("VERDICT: DONE\n")
    assert '- {"dtype": "float32", "m": 4096, "n": 64}: cutile-rs 0.010000 ms' in text


def test_strict_turns_a_non_done_verdict_into_exit_1(tmp_path):
    d = make_dir(tmp_path, port={k: v * 2 for k, v in SHAPES.items()})
    assert run(d) == 0
    assert run(d, "--strict") == 1


# ---------------------------------------------------------------------------------------------
# correctness.md


def correctness(tmp_path, *cases, raw=True):
    d = make_dir(tmp_path, junit_text=junit(*cases), raw_correctness=raw)
    status = run(d, "--only", "correctness")
    return status, (d / "reports" / "correctness.md").read_text().split("\n")


def test_all_pass_correctness_report(tmp_path):
    status, lines = correctness(
        tmp_path,
        case("test_op[cutile_rs-float16-4-8]"),
        case("test_op[cutile_rs-fp64]", '<skipped message="float64 not supported"/>'),
    )
    assert status == 0
    assert lines[0] == "VERDICT: ALL_PASS"
    assert "Summary: 1 passed, 0 failed, 1 skipped" in lines
    assert "| test_rms_norm::test_op | cutile_rs-float16-4-8 | PASSED  | -                     |" in lines
    assert ["fail_class:", "host_fix:", "kernel_followup:", "pytest_log: correctness_cutile_rs.txt"] == [
        ln_ for ln_ in lines if ln_.split(":")[0] in ("fail_class", "host_fix", "kernel_followup", "pytest_log")
    ]
    assert not any(ln_.startswith("block_class") for ln_ in lines)


@pytest.mark.parametrize(
    "failure,fail_class",
    [
        pytest.param(
            '<failure message="AssertionError: Tensor-likes are not close!&#10;Mismatched">tb</failure>',
            "kernel",
            id="wrong_values_are_a_kernel_failure",
        ),
        pytest.param(  # the old rule matched words ("cuda") anywhere and called this a host failure
            "<failure message=\"AssertionError: cutile_rs {'dtype': 'float16'} on cuda:0: "
            'rel_l2=3.1e-01 (tol 1.0e-02)">tb</failure>',
            "kernel",
            id="value_check_whose_message_mentions_cuda_is_a_kernel_failure",
        ),
        pytest.param(
            '<failure type="AssertionError" message="values differ on cuda:0">tb</failure>',
            "kernel",
            id="declared_failure_type_wins_over_the_message",
        ),
        pytest.param(
            '<failure message="tilekit.runtime.ffi.KernelError: kernel rms_norm: rms_norm_f16 returned -3 '
            '(JIT_OR_LAUNCH: JIT compile or kernel launch failed)">tb</failure>',
            "kernel",
            id="jit_return_code_is_a_kernel_failure",
        ),
        pytest.param(
            '<failure message="tilekit.runtime.ffi.KernelError: kernel rms_norm: rms_norm_f16 returned -2 '
            '(BAD_ARG: CUDA device pointer is null)">tb</failure>',
            "host",
            id="other_return_codes_are_a_host_failure",
        ),
        pytest.param(
            '<failure message="ValueError: tensor is on cpu; cuTile kernels need CUDA tensors">tb</failure>',
            "host",
            id="runtime_error_mentioning_cuda_is_a_host_failure",
        ),
    ],
)
def test_a_failing_case_is_a_kernel_or_a_host_failure(tmp_path, failure, fail_class):
    _, lines = correctness(tmp_path, case("test_op[a]"), case("test_op[b]", failure))
    assert lines[0] == "VERDICT: FAIL" and f"fail_class: {fail_class}" in lines
    # a host failure names the host code to fix first; a kernel failure, the cases that give wrong results
    host_fix = any(ln_.startswith("host_fix: 1 case(s) fail in the host code") for ln_ in lines)
    followup = any(ln_.startswith("kernel_followup: 1 case(s) give wrong results") for ln_ in lines)
    assert (host_fix, followup) == (fail_class == "host", fail_class == "kernel")


def test_host_error_is_a_host_failure_and_comes_first(tmp_path):
    _, lines = correctness(
        tmp_path,
        case("test_op[a]"),
        case("test_op[b]", '<failure message="TypeError: bad stride">tb</failure>'),
        case("test_op[c]", '<failure message="AssertionError: Tensor-likes are not close!">tb</failure>'),
    )
    assert "fail_class: host" in lines
    assert (
        "host_fix: 1 case(s) fail in the host code (op.py, ffi.rs, the test): fix those first; "
        "first: test_rms_norm::test_op[b]: TypeError: bad stride" in lines
    )


def test_everything_skipped_for_want_of_a_gpu_is_blocked_env(tmp_path):
    _, lines = correctness(tmp_path, case("test_op[a]", '<skipped message="no CUDA GPU"/>'))
    assert (lines[0], lines[4]) == ("VERDICT: BLOCKED", "Summary: 0 passed, 0 failed, 1 skipped")
    assert "block_class: env" in lines


def test_gpu_cases_skipped_beside_passing_cpu_cases_are_blocked_not_all_pass(tmp_path):
    _, lines = correctness(
        tmp_path,
        case("test_op_bad_input_cutile_rs[cutile_rs-dtype_mix]"),
        case("test_op[cutile_rs-4x8-float16]", '<skipped message="no CUDA GPU here"/>'),
        case("test_op[cutile_rs-4x9-float16]", '<skipped message="no CUDA GPU here"/>'),
    )
    assert (lines[0], lines[4]) == ("VERDICT: BLOCKED", "Summary: 1 passed, 0 failed, 2 skipped")
    assert "block_class: env" in lines
    assert (
        "Note: 2 case(s) were skipped because this machine cannot run them (first: no CUDA GPU here); "
        "the port is not verified on them."
    ) in lines


def test_skip_by_design_that_mentions_cuda_is_still_all_pass(tmp_path):
    # the old rule read "cuda" in the reason as "this machine has no GPU" and said BLOCKED
    status, lines = correctness(
        tmp_path,
        case("test_op[cutile_rs-float16]"),
        case(
            "test_op[cutile_rs-float64]",
            '<skipped type="pytest.skip" message="float64 is not supported by the cuda:0 port"/>',
        ),
    )
    assert (status, lines[0]) == (0, "VERDICT: ALL_PASS")
    assert not any(ln_.startswith("Note: 1 case(s) were skipped because") for ln_ in lines)


@pytest.mark.parametrize(
    "testcase,block_class",
    [
        pytest.param(
            '<testcase classname="" name="tests.kernels.test_rms_norm" time="0">'
            '<error message="collection failure">ImportError</error></testcase>',
            "host",
            id="collection_error_is_blocked_host",
        ),
        pytest.param(
            case("test_op[a]", '<skipped message="float64 unsupported on this device"/>'),
            "host",
            id="only_by_design_skips_mentioning_a_device_are_blocked_host_not_env",
        ),
        pytest.param(
            case(
                "test_op[a]",
                '<error message="failed on setup with &quot;'
                "ModuleNotFoundError: No module named 'torch'&quot;\">tb</error>",
            ),
            "env",
            id="missing_module_at_set_up_is_blocked_env",
        ),
        pytest.param(
            case(
                "test_op[a]",
                '<error message="failed on setup with &quot;'
                "FileNotFoundError: libcutile_kernels.so (cuda build) not built; "
                'run `make build`&quot;">tb</error>',
            ),
            "host",
            id="set_up_error_mentioning_cuda_is_blocked_host",
        ),
    ],
)
def test_a_case_that_could_not_run_blocks_the_report_on_the_host_or_the_env(tmp_path, testcase, block_class):
    status, lines = correctness(tmp_path, testcase)
    assert (status, lines[0]) == (0, "VERDICT: BLOCKED")
    assert f"block_class: {block_class}" in lines


def test_exception_type_reads_the_class_a_message_starts_with():
    assert correctness_mod.exception_type("AssertionError: Tensor-likes are not close!\nMismatched") == "AssertionError"
    assert correctness_mod.exception_type("torch.OutOfMemoryError: CUDA out of memory") == "torch.OutOfMemoryError"
    assert correctness_mod.exception_type('failed on setup with "ImportError: cannot import name x"') == "ImportError"
    assert correctness_mod.exception_type("no CUDA GPU here") == ""
    assert correctness_mod.exception_type("assert 1 == 2") == ""


def test_malformed_junit_is_an_error_naming_the_file(tmp_path, capsys):
    d = make_dir(tmp_path, junit_text="<testsuites><testsuite>")
    assert run(d, "--only", "correctness") == 2
    err = capsys.readouterr().err
    assert "correctness.junit.xml:1: not valid JUnit XML" in err and "(make test)" in err


def test_missing_junit_names_the_test_target(tmp_path, capsys):
    d = make_dir(tmp_path)
    (d / "reports" / "logs" / "correctness.junit.xml").unlink()
    assert run(d, "--only", "correctness") == 2
    assert f"correctness.junit.xml: missing; `make KERNEL={KERNEL} test` writes it" in capsys.readouterr().err


def test_configs_under_ten_microseconds_are_listed_with_why_their_ratio_is_unsettled(tmp_path):
    port = {("float16", 1024): 0.0025, ("float16", 4096): 1.0, ("bfloat16", 1024): 0.3}
    triton = {("float16", 1024): 0.0024, ("float16", 4096): 1.0, ("bfloat16", 1024): 0.3}
    torch = {("float16", 1024): 0.0030, ("float16", 4096): 1.1, ("bfloat16", 1024): 0.3}
    d = make_dir(tmp_path, port=port, baselines={"triton": triton, "torch": torch})
    assert run(d) == 0
    lines = (d / "reports" / "performance.md").read_text().split("\n")
    head = lines.index("## Configs under 10 µs (a ratio near 1 is not settled by this table)")
    assert "separate processes" in lines[head + 2] and "scripts/sweep_variants.py" in lines[head + 2]
    listed = [ln for ln in lines[head + 3 :] if ln.startswith("- ")]
    assert listed[0] == (
        '- {"dtype": "float16", "m": 4096, "n": 1024}: cutile-rs 2.500 µs, ratio 1.0417, '
        "best baseline triton 2.400 µs, vs best 1.0417"
    )
    assert len([ln for ln in listed if "µs, ratio" in ln]) == 1  # 0.3 and 1.0 ms rows are not listed


def test_no_few_microsecond_section_when_every_config_is_longer(tmp_path):
    d = make_dir(tmp_path)
    assert run(d) == 0
    assert "## Configs under" not in (d / "reports" / "performance.md").read_text()
