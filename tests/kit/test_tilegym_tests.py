"""`make KERNEL=<k> tilegym-tests`: TileGym's own tests with the port as its cuTile backend
(tilekit.testing.tilegym_tests), on a stand-in TileGym (a dispatch table and a test file of its
shape) in a child pytest, as the command runs it; the real run needs a GPU and a checkout."""

import os
import textwrap
from pathlib import Path

import pytest

from tilekit.testing import tilegym_tests as tt

STANDIN_DISPATCHER = """
def theirs(*args, **kwargs):
    return "tilegym's own"

_REGISTRY = {"rms_norm": {"cutile": theirs, "triton": theirs}}
"""

STANDIN_TEST = """
import pytest
from tilegym.backend import dispatcher

@pytest.mark.parametrize("backend", ["cutile", "triton"])
@pytest.mark.parametrize("n", [8, 16])
def test_op(backend, n):
    impl = dispatcher._REGISTRY["rms_norm"][backend]
    assert impl.__module__ == "tilekit.testing.tilegym_tests" and impl.__name__ == "rms_norm"
    {body}

@pytest.mark.parametrize("backend", ["cutile"])
def test_perf(backend):
    raise AssertionError("a perf test is not a correctness case: deselected")
"""


def _standin(tmp_path: Path, body: str = "pass") -> tuple[Path, Path]:
    """(site dir holding a `tilegym` package with a dispatch table, a checkout with tests/ops)."""
    site, checkout = tmp_path / "site", tmp_path / "TileGym"
    (site / "tilegym" / "backend").mkdir(parents=True)
    (site / "tilegym" / "__init__.py").write_text("")
    (site / "tilegym" / "backend" / "__init__.py").write_text("")
    (site / "tilegym" / "backend" / "dispatcher.py").write_text(STANDIN_DISPATCHER)
    (checkout / "tests" / "ops").mkdir(parents=True)
    for init in ("tests/__init__.py", "tests/ops/__init__.py"):
        (checkout / init).write_text("")
    (checkout / "tests" / "ops" / "test_rms_norm.py").write_text(textwrap.dedent(STANDIN_TEST).format(body=body))
    return site, checkout


def _run(monkeypatch, site: Path, checkout: Path, out: Path) -> int:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    return tt.main(["--kernel", "rms_norm", "--tilegym", str(checkout), "--out", str(out), "--timeout", "120"])


def test_the_ports_adapter_replaces_tilegyms_cutile_backend_and_only_its_op_tests_run(tmp_path, monkeypatch):
    site, checkout = _standin(tmp_path)
    assert _run(monkeypatch, site, checkout, tmp_path / "out") == 0
    report = (tmp_path / "out" / tt.REPORT).read_text()
    assert report.startswith("VERDICT: ALL_PASS\n")
    assert "Summary: 2 passed, 0 failed, 0 skipped" in report  # the two cutile test_op cases, nothing else
    log = (tmp_path / "out" / tt.LOG).read_text()
    assert "TileGym's cuTile backend of rms_norm (was theirs) runs the port kernels/rms_norm" in log
    assert "3 deselected" in log  # the triton cases and test_perf


def test_a_failing_case_is_reported_with_its_message(tmp_path, monkeypatch):
    site, checkout = _standin(tmp_path, body='assert n == 8, f"wrong at n={n}"')
    assert _run(monkeypatch, site, checkout, tmp_path / "out") == 1
    report = (tmp_path / "out" / tt.REPORT).read_text()
    assert report.startswith("VERDICT: FAIL\n") and "wrong at n=16" in report


def test_bad_arguments_name_the_fix(tmp_path, capsys):
    assert tt.main(["--kernel", "rms_norm", "--tilegym", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "TILEGYM_PATH must be a TileGym checkout" in capsys.readouterr().err
    assert tt.main(["--kernel", "softmax_backward", "--tilegym", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no TileGym counterpart" in capsys.readouterr().err


def test_adapters_refuse_what_the_port_does_not_implement():
    with pytest.raises(NotImplementedError, match="offset"):
        tt.rms_norm(object(), (4,), None, 1e-6, offset=1.0)
    with pytest.raises(NotImplementedError, match="weight_shift"):
        tt.layer_norm(object(), 0, -1, None, None, 1e-5, weight_shift=1.0)
    import torch

    with pytest.raises(NotImplementedError, match="s_q=3 != s_kv=5"):
        tt.fmha(torch.zeros(1, 2, 3, 64), torch.zeros(1, 2, 5, 64), torch.zeros(1, 2, 5, 64), is_causal=True)
    assert set(tt.SUBSTITUTES) <= {p.name for p in (Path(tt.ROOT) / "kernels").iterdir()}


def test_layer_norm_serves_tilegyms_trailing_dims_end_exclusive(monkeypatch):
    """TileGym's layer_norm normalizes dims [start_dim, end_dim): (m, n) with (1, 2) is the port over
    n; (m, n, k) with (1, 2) normalizes n alone, which the port (trailing dims) refuses by name."""
    import torch

    seen = []
    monkeypatch.setattr(tt, "_entry", lambda kernel: lambda x, w, b, eps: seen.append((x.shape, w.shape)) or x)
    x, w = torch.zeros(3, 8), torch.zeros(8)
    assert tt.layer_norm(x, 1, 2, w, None, 1e-5).shape == (3, 8) and seen == [((3, 8), (8,))]
    x3, w2 = torch.zeros(3, 4, 5), torch.zeros(4, 5)
    tt.layer_norm(x3, 1, 3, w2, None, 1e-5)  # dims 1 and 2 as one row of 20
    assert seen[-1] == ((3, 20), (20,))
    with pytest.raises(NotImplementedError, match=r"dims \[1, 2\)"):
        tt.layer_norm(x3, 1, 2, torch.zeros(4), None, 1e-5)


def test_a_run_without_a_result_is_blocked_not_judged_by_an_old_xml(tmp_path, monkeypatch):
    site, checkout = _standin(tmp_path)
    assert _run(monkeypatch, site, checkout, tmp_path / "out") == 0  # leaves an ALL_PASS XML
    (checkout / "tests" / "ops" / "test_rms_norm.py").write_text("import pytest\n")  # nothing to collect
    assert _run(monkeypatch, site, checkout, tmp_path / "out") == 1
    report = (tmp_path / "out" / tt.REPORT).read_text()
    assert report.startswith("VERDICT: BLOCKED\n") and "pytest exited 5" in report
