"""`make KERNEL=<k> tilegym-tests TILEGYM_PATH=<checkout>`: TileGym's own op tests with the port in
place of TileGym's cuTile backend (issue 43).

    python -m tilekit tilegym-tests --kernel rms_norm --tilegym ~/TileGym --out out/rms_norm

Runs `tests/ops/test_<op>.py` of the user's TileGym checkout (never copied: pytest runs in it, with
the installed `tilegym` package) in a child process with a deadline, with this module as a pytest
plugin (`-p tilekit.testing.tilegym_tests`) which, before collection:
  * replaces TileGym's cuTile implementation of the op in its dispatch table
    (`tilegym.backend.dispatcher._REGISTRY[<op>]["cutile"]`, looked up at every call) with an
    adapter from TileGym's signature to the port's entry (`SUBSTITUTES`): every call of the cuTile
    backend, forward and `.backward()` (the entry goes through its torch op, whose gradient is the
    port's backward kernel), runs the port; an argument the port cannot honour (a bias, an offset, a
    weight shift) raises NotImplementedError naming it, never a silent other result;
  * keeps the cuTile backend's correctness tests only (`test_op*` cases whose backend parameter is
    "cutile"; the others are deselected, as TileGym's `-k "test_op and cutile"` selects them).
Then writes `<out>/reports/tilegym_tests.md` (first line the verdict: ALL_PASS, FAIL or BLOCKED; one
row per test case, passes, fails and skips with the reason) from the JUnit XML of this run, and keeps
the raw log and the XML under `<out>/reports/logs/`; BLOCKED with the reason when pytest did not run
to a result (its deadline, an internal or usage error, nothing collected, no XML). Exit status 0 on
ALL_PASS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

KERNEL_ENV = "TILEKIT_TILEGYM_KERNEL"  # which kernel the plugin substitutes (set by main for the child)
ROOT = Path(__file__).resolve().parents[3]
DEADLINE_S = 3600
LOG = "reports/logs/tilegym_tests.txt"
JUNIT = "reports/logs/tilegym_tests.junit.xml"
REPORT = "reports/tilegym_tests.md"


# -- the adapters: TileGym 1.5.1's cuTile signatures -> the ports' entries ---------------------------


def _refuse(op: str, **given) -> None:
    """NotImplementedError for arguments the port does not implement (an honest failure, not a skip)."""
    bad = {k: v for k, v in given.items() if v}
    if bad:
        raise NotImplementedError(f"tilekit's {op} port does not take {bad} (TileGym's cuTile {op} does)")


def _entry(kernel: str):
    import importlib

    return getattr(importlib.import_module(f"kernels.{kernel}.op"), kernel)


def rms_norm(input, normalized_shape, weight, eps, bias=None, mode=None, offset=0.0, **kwargs):
    """TileGym's rms_norm(input, normalized_shape, weight, eps, bias, mode, offset): the port over the
    last dim (`mode` picks among TileGym's own kernels: irrelevant to the port)."""
    _refuse("rms_norm", bias=bias is not None, offset=offset != 0.0)
    if tuple(normalized_shape) != tuple(input.shape[-1:]):
        raise NotImplementedError(
            f"tilekit's rms_norm normalizes the last dim only; normalized_shape={normalized_shape}"
        )
    return _entry("rms_norm")(input, weight, eps)


def silu_and_mul(input, out=None):
    """TileGym's silu_and_mul(input, out): x = [gate | up] -> silu(gate) * up."""
    return _entry("silu_and_mul")(input, out=out)


def get_swiglu():
    """TileGym's get_swiglu() -> swiglu(a, b) = silu(a) * b."""
    return _entry("swiglu")


def softmax(x, use_tma=False, **kwargs):
    """TileGym's softmax(x, use_tma, use_chunked, use_multi_wave) over the last dim (the flags pick
    among TileGym's own kernels)."""
    return _entry("softmax")(x)


def layer_norm(x, start_dim, end_dim, weight, bias, eps, weight_shift=0.0, **kwargs):
    """TileGym's layer_norm(x, start_dim, end_dim, weight, bias, eps, weight_shift): normalization over
    dims [start_dim, end_dim) (end exclusive, as TileGym's), which the port serves when they are the
    trailing dims (taken as one: weight and bias of those dims, flattened)."""
    _refuse("layer_norm", weight_shift=weight_shift != 0.0)
    start = start_dim + x.dim() if start_dim < 0 else start_dim
    end = end_dim + x.dim() if end_dim < 0 else end_dim
    if end != x.dim() or not 0 <= start < end:
        raise NotImplementedError(
            f"tilekit's layer_norm normalizes trailing dims; dims [{start_dim}, {end_dim}) of {tuple(x.shape)} are not"
        )
    flat = lambda t: None if t is None else t.reshape(-1)  # noqa: E731
    y = _entry("layer_norm")(x.flatten(start, x.dim() - 1), flat(weight), flat(bias), eps)
    return y.view(x.shape)


def matmul(a, b, trans_a=False, trans_b=False, **kwargs):
    """TileGym's matmul(a, b, trans_a, trans_b, ...): the port on the transposed views (no copies)."""
    return _entry("matmul")(a.t() if trans_a else a, b.t() if trans_b else b)


def bmm(a, b, transpose_a=False, transpose_b=False, **kwargs):
    """TileGym's bmm(a, b, transpose_a, transpose_b, ...): the port on the transposed views."""
    return _entry("bmm")(a.transpose(1, 2) if transpose_a else a, b.transpose(1, 2) if transpose_b else b)


def fmha(q, k, v, scaling=None, is_causal=True, **kwargs):
    """TileGym's fmha(q, k, v, scaling, is_causal, has_backward, kernel_configs): the port on
    (B, H, S, D) q, k, v. A causal mask with s_q != s_kv is refused: the port aligns it to the keys'
    end (decode, chunked prefill), PyTorch's is_causal to their start."""
    if is_causal and q.shape[-2] != k.shape[-2]:
        raise NotImplementedError(
            f"tilekit's causal attention aligns the mask to the keys' end; s_q={q.shape[-2]} != s_kv={k.shape[-2]}"
        )
    return _entry("attention")(q, k, v, causal=bool(is_causal), scale=scaling)


# kernel -> (TileGym's test file under tests/ops/, {its dispatch key: the adapter})
SUBSTITUTES = {
    "rms_norm": ("test_rms_norm.py", {"rms_norm": rms_norm}),
    "silu_and_mul": ("test_silu_and_mul.py", {"silu_and_mul": silu_and_mul}),
    "swiglu": ("test_swiglu.py", {"get_swiglu": get_swiglu}),
    "softmax": ("test_softmax.py", {"softmax": softmax}),
    "layer_norm": ("test_layer_norm.py", {"layer_norm": layer_norm}),
    "matmul": ("test_matmul.py", {"matmul": matmul}),
    "bmm": ("test_bmm.py", {"bmm": bmm}),
    "attention": ("test_attention.py", {"fmha": fmha}),
}


# -- the pytest plugin (in the child, inside the TileGym checkout) -----------------------------------


def install(kernel: str) -> dict:
    """Put the adapters of `kernel` in TileGym's dispatch table as its cuTile backend; returns
    {dispatch key: TileGym's own implementation} (what was replaced). After `import tilegym`, whose
    import registers TileGym's own implementations (which would overwrite ours)."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # the kit's `kernels` package, after the checkout's own `tests`
    import tilegym  # noqa: F401 (registers TileGym's implementations first)
    from tilegym.backend import dispatcher

    replaced = {}
    for key, adapter in SUBSTITUTES[kernel][1].items():
        table = dispatcher._REGISTRY.setdefault(key, {})
        replaced[key] = table.get("cutile")
        table["cutile"] = adapter
    return replaced


def is_cutile_op_test(item) -> bool:
    """A TileGym correctness test of the cuTile backend: a test_op* function whose backend (or
    framework) parameter is "cutile"."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    backend = params.get("backend", params.get("framework"))
    return getattr(item, "originalname", item.name).startswith("test_op") and backend == "cutile"


def pytest_configure(config):
    kernel = os.environ.get(KERNEL_ENV)
    if kernel:
        replaced = install(kernel)
        config._tilekit_substituted = {k: getattr(v, "__qualname__", repr(v)) for k, v in replaced.items()}


def pytest_report_header(config):
    kernel = os.environ.get(KERNEL_ENV)
    if kernel:
        swapped = ", ".join(f"{k} (was {v})" for k, v in getattr(config, "_tilekit_substituted", {}).items())
        return [f"tilekit: TileGym's cuTile backend of {swapped} runs the port kernels/{kernel}"]
    return []


def pytest_collection_modifyitems(config, items):
    if not os.environ.get(KERNEL_ENV):
        return
    keep = [i for i in items if is_cutile_op_test(i)]
    dropped = [i for i in items if not is_cutile_op_test(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


# -- the command ------------------------------------------------------------------------------------


def test_file(kernel: str, tilegym: Path) -> Path:
    """TileGym's test file of `kernel` in the checkout, or ValueError with the fix."""
    if kernel not in SUBSTITUTES:
        raise ValueError(
            f"tilegym-tests: kernels/{kernel} has no TileGym counterpart here; one of: {', '.join(SUBSTITUTES)}"
        )
    path = tilegym / "tests" / "ops" / SUBSTITUTES[kernel][0]
    if not path.is_file():
        raise ValueError(
            f"tilegym-tests: {path} not found: TILEGYM_PATH must be a TileGym checkout "
            "(git clone https://github.com/NVIDIA/TileGym) whose tests/ops holds the op's test"
        )
    return path


def render(kernel: str, junit_text: str, log_text: str) -> str:
    """reports/tilegym_tests.md: the verdict, the counts and one row per case (the kit's correctness
    classification of pytest's JUnit XML, tilekit.reports.correctness)."""
    from tilekit.reports import correctness

    result = correctness.classify(correctness.parse_junit(junit_text, JUNIT), log_text)
    intro = (
        f"TileGym's `tests/ops/{SUBSTITUTES[kernel][0]}`, its cuTile correctness cases (`test_op*`), each call "
        f"of the cuTile {kernel} running the port (tilekit.testing.tilegym_tests)."
    )
    title = "TileGym's own tests with the port as its cuTile backend"
    return correctness.render_correctness(kernel, result, log_text, title=title, intro=intro, logs=(LOG, JUNIT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilekit tilegym-tests", description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", required=True)
    p.add_argument("--tilegym", required=True, type=Path, help="a TileGym checkout (TILEGYM_PATH)")
    p.add_argument("--out", required=True, type=Path, help="the kernel's output folder (OUT_ROOT/<kernel>)")
    p.add_argument("--timeout", type=int, default=DEADLINE_S, help="the child's deadline, seconds")
    args = p.parse_args(argv)
    tilegym = args.tilegym.expanduser().resolve()
    try:
        test = test_file(args.kernel, tilegym)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    out = args.out.resolve()
    (out / "reports" / "logs").mkdir(parents=True, exist_ok=True)
    junit = out / JUNIT
    junit.unlink(missing_ok=True)  # a run that writes none must not be judged by the last one's
    env = dict(os.environ, **{KERNEL_ENV: args.kernel})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tools"), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "pytest", str(test.relative_to(tilegym)), "-p", __name__, "-v", "-rs"]
    cmd += [f"--junitxml={junit}", "-o", "junit_family=xunit1"]
    blocked = ""
    try:
        run = subprocess.run(cmd, cwd=tilegym, env=env, capture_output=True, text=True, timeout=args.timeout)
        log = f"$ {' '.join(cmd)}\n{run.stdout}{run.stderr}"
        if run.returncode not in (0, 1):  # 2 interrupted, 3 internal error, 4 usage error, 5 nothing collected
            blocked = f"pytest exited {run.returncode} (not a test result): its output is in {LOG}"
    except subprocess.TimeoutExpired as exc:
        told = "".join(
            t.decode(errors="replace") if isinstance(t, bytes) else t or "" for t in (exc.stdout, exc.stderr)
        )
        log = f"$ {' '.join(cmd)}\n{told}\ntilegym-tests: stopped at its {args.timeout} s deadline\n"
        blocked = f"stopped at its {args.timeout} s deadline (--timeout): the cases after it did not run"
    (out / LOG).write_text(log)
    if not blocked and not junit.is_file():
        blocked = f"pytest wrote no {JUNIT}: its output is in {LOG}"
    if blocked:
        report = f"VERDICT: BLOCKED\n\n# {args.kernel}: TileGym's own tests with the port as its cuTile backend\n\n{blocked}\n"
    else:
        report = render(args.kernel, junit.read_text(), log)
    (out / REPORT).write_text(report)
    print(f"tilegym-tests: {report.splitlines()[0]}: {out / REPORT}")
    return 0 if report.startswith("VERDICT: ALL_PASS") else 1
