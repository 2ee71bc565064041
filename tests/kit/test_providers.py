"""The baselines from other libraries (tilekit.runtime.providers: tilegym, liger, liger_cutile) on the CPU,
with or without their packages: why each cannot run (installed or not, cuda.tile or not, an import
that breaks), what each kernel's entries pass to the library (a recording stand-in for its ops:
under no_grad, the caller's tensors and no copies), their records' env, their test ids in the
generated suites and the harness's skips. Timing them needs a GPU (docs/kernels.md)."""

import importlib
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
import torch

from tilekit.runtime import baseline_cases, kernel, providers
from tilekit.testing import harness, suite
from tilekit.runtime import packages

ROOT = Path(__file__).resolve().parents[2]
KERNELS = sorted(p.parent.name for p in (ROOT / "kernels").glob("*/baselines.py"))
CUTILE_MISSING = "cuda.tile is not installed: pip install cuda-tile==1.7.0 (the bundle carries it)"


def entries(timed_only=True) -> list:
    """pytest params (kernel, provider) of every provider entry of every kernel's BACKENDS."""
    out = []
    for k in KERNELS:
        backends = importlib.import_module(f"kernels.{k}.baselines").BACKENDS
        for p in providers.NAMES:
            if p in backends and not (timed_only and isinstance(backends[p].call, str)):
                out.append(pytest.param(k, p, id=f"{k}-{p}"))
    return out


def baselines(k: str):
    return importlib.import_module(f"kernels.{k}.baselines")


@pytest.fixture
def fresh(monkeypatch):
    """Each provider imported afresh (providers caches its import per process)."""
    load = providers._load  # a test may replace it
    load.cache_clear()
    yield monkeypatch
    load.cache_clear()


def installed(monkeypatch, present: bool) -> None:
    monkeypatch.setattr(providers, "version", lambda name: providers.PROVIDERS[name].pin if present else None)


def cutile_found(monkeypatch) -> None:
    monkeypatch.setattr(packages, "import_cutile", lambda: (object(), None))
    monkeypatch.setattr(packages, "tileiras_missing", lambda: None)


def fake_modules(monkeypatch, modules: dict) -> None:
    """Stand-ins in sys.modules, {dotted name: its attributes}: what importlib then returns."""
    for name, attrs in modules.items():
        module = ModuleType(name)
        vars(module).update(attrs)
        monkeypatch.setitem(sys.modules, name, module)


# -- why a provider cannot run -------------------------------------------------------------------


def test_the_first_kernels_declare_the_providers_that_have_their_op():
    """Pinned for these four; a kernel added later is not listed here (its folder is all it edits)."""
    expected = {
        "matmul": ["tilegym"],  # Liger-Kernel has no matmul
        "rms_norm": ["tilegym", "liger", "liger_cutile"],
        "silu_and_mul": ["tilegym", "liger", "liger_cutile"],
        "softmax": ["tilegym", "liger", "liger_cutile"],
    }
    assert {k: [p for p in providers.NAMES if p in baselines(k).BACKENDS] for k in expected} == expected


@pytest.mark.parametrize("k,p", entries())
def test_a_missing_package_says_how_to_install_it(fresh, k, p):
    installed(fresh, False)
    dist, pin = providers.PROVIDERS[p].dist, providers.PROVIDERS[p].pin
    assert baselines(k).unavailable_reason(p) == (
        f"{dist} is not installed: pip install --no-deps {dist}=={pin} (the bundle carries it)"
    )


@pytest.mark.parametrize("p", [p for p in providers.NAMES if providers.PROVIDERS[p].cutile])
def test_a_cutile_provider_without_cuda_tile_says_so(fresh, p):
    installed(fresh, True)
    fresh.setattr(packages, "import_cutile", lambda: (None, ModuleNotFoundError("No module named 'cuda.tile'")))
    assert providers.unavailable_reason(p) == f"{p} runs on cuda.tile: {CUTILE_MISSING}"


def test_a_package_that_breaks_while_importing_is_reported_with_its_error(fresh):
    installed(fresh, True)
    fresh.setitem(sys.modules, "liger_kernel.ops", None)  # what `import liger_kernel.ops` then raises
    assert providers.unavailable_reason("liger").startswith(
        "liger-kernel 0.8.5 failed to import liger_kernel.ops: ModuleNotFoundError: "
    )


@pytest.mark.parametrize("p", providers.NAMES)
def test_the_reason_on_this_machine_is_none_or_one_of_the_above(fresh, p):
    """Exactly what this machine warrants. Without the package (the venv, the CPU machine): how to
    install it. With it (a GPU host's bundle): None, or for a cuTile provider what cuda.tile lacks
    here. An installed package that fails to import fails this test (make check passes on both)."""
    prov = providers.PROVIDERS[p]
    try:
        metadata.distribution(prov.dist)
    except metadata.PackageNotFoundError:
        expected = (
            f"{prov.dist} is not installed: pip install --no-deps {prov.dist}=={prov.pin} (the bundle carries it)"
        )
    else:
        cutile_error = packages.import_cutile()[1] if prov.cutile else None
        if cutile_error is not None:
            expected = f"{p} runs on cuda.tile: {packages.cutile_reason(cutile_error)}"
        else:
            expected = packages.tileiras_missing() if prov.cutile else None
    assert providers.unavailable_reason(p) == expected


def test_an_op_a_provider_has_but_we_do_not_time_says_why(fresh):
    installed(fresh, True)
    reason = baselines("silu_and_mul").unavailable_reason("liger_cutile")
    assert reason.startswith("Liger's cuTile swiglu has only LigerSiLUMulFunction(a, b), which would copy")
    with pytest.raises(RuntimeError, match="^liger_cutile: Liger's cuTile swiglu"):
        baselines("silu_and_mul").BACKENDS["liger_cutile"](torch.zeros(2, 4))


@pytest.mark.parametrize("k,p", entries())
def test_a_missing_provider_raises_its_reason_when_called(fresh, k, p):
    installed(fresh, False)
    cases = baseline_cases.load(k)
    with pytest.raises(RuntimeError, match=f"^{p}: {providers.PROVIDERS[p].dist} is not installed"):
        baselines(k).BACKENDS[p](*cases.inputs(cases.torch_case[0]).values())


def test_an_unknown_provider_is_refused():
    with pytest.raises(ValueError, match="unknown provider ligr; known: tilegym, liger, liger_cutile"):
        providers.backends(ligr=lambda ops: None)


# -- what an entry passes to the library ----------------------------------------------------------


class Ops:
    """A stand-in for a provider's ops: records each call as (dotted path, args, kwargs, grad on)."""

    def __init__(self, calls: list, path: str = "") -> None:
        self._calls, self._path = calls, path

    def __getattr__(self, name: str):
        return Ops(self._calls, f"{self._path}.{name}".lstrip("."))

    def __call__(self, *args, **kwargs):
        self._calls.append((self._path, args, kwargs, torch.is_grad_enabled()))
        return "y"


@pytest.mark.parametrize("k,p", entries())
def test_an_entry_calls_one_op_under_no_grad_with_the_callers_tensors(fresh, k, p):
    if p in getattr(baselines(k), "RECORDED", ()):
        pytest.skip(f"{k} {p}: timed as the autograd backward of a forward recorded once (baselines.RECORDED)")
    if p in getattr(baselines(k), "TRAINING_STEP", ()):
        pytest.skip(f"{k} {p}: timed as a training step, its fused forward and backward (baselines.TRAINING_STEP)")
    calls = []
    fresh.setattr(providers, "_load", lambda name: (Ops(calls), None))
    cases = baseline_cases.load(k)
    inputs = cases.inputs(cases.torch_case[0])
    assert baselines(k).BACKENDS[p](*inputs.values()) == "y"
    [(path, args, kwargs, grad)] = calls
    assert not grad, f"{k} {p}: {path} ran with autograd on"
    # the caller's tensors, and what a backward's forward saved for it (rms_norm_backward's rstd)
    saved = [t for t in getattr(baselines(k), "SAVED", {}).values() if isinstance(t, torch.Tensor)]
    storages = {t.untyped_storage().data_ptr() for t in (*inputs.values(), *saved) if isinstance(t, torch.Tensor)}
    passed = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)]
    assert passed and all(t.untyped_storage().data_ptr() in storages for t in passed), f"{k} {p}: a copy"


def test_liger_ops_are_read_from_its_submodules_not_from_the_swapped_package(fresh):
    """Each Liger provider's `ops.softmax` is its own implementation's submodule, even where the
    package re-exports another object under that name (what LIGER_KERNEL_IMPL swaps)."""
    installed(fresh, True)
    cutile_found(fresh)
    swapped = object()
    fake_modules(
        fresh,
        {
            "liger_kernel": {},
            "liger_kernel.ops": {"softmax": swapped},
            "liger_kernel.ops.softmax": {},
            "liger_kernel.ops.cutile": {"softmax": swapped},
            "liger_kernel.ops.cutile.ops": {"softmax": swapped},
            "liger_kernel.ops.cutile.ops.softmax": {},
        },
    )
    for p, module in [("liger", "liger_kernel.ops.softmax"), ("liger_cutile", "liger_kernel.ops.cutile.ops.softmax")]:
        ops, reason = providers._load(p)
        assert reason is None and ops.softmax is sys.modules[module], p


def test_tilegym_runs_its_ops_with_its_cutile_backend_selected(fresh):
    installed(fresh, True)
    cutile_found(fresh)
    selected = []
    fake_modules(fresh, {"tilegym": {"set_backend": selected.append}, "tilegym.ops": {"cutile": ModuleType("c")}})
    assert providers._load("tilegym") == (sys.modules["tilegym.ops"], None)
    assert selected == ["cutile"]


def test_tilegym_whose_cutile_ops_did_not_import_says_so_instead_of_running_torch(fresh):
    installed(fresh, True)
    cutile_found(fresh)
    fake_modules(fresh, {"tilegym": {"set_backend": lambda name: None}, "tilegym.ops": {"cutile": None}})
    assert providers.unavailable_reason("tilegym") == (
        "tilegym 1.5.1 failed to import tilegym.ops: ImportError: tilegym.ops.cutile did not import (tilegym warned why)"
    )


def test_a_providers_records_carry_its_version(monkeypatch):
    monkeypatch.setattr(providers, "version", lambda name: {"tilegym": None, "liger": "0.8.5"}.get(name))
    assert providers.record_env("tilegym") == {"tilegym": "not installed"}
    assert providers.record_env("liger") == {"liger_kernel": "0.8.5"}
    assert providers.record_env("triton") == {} and providers.record_env("cutile") == {}


@pytest.mark.parametrize("backend_id,extra", [("liger_cutile", {"liger_kernel": "0.8.5"}), ("triton", {})])
def test_a_timed_case_of_a_provider_records_its_version_in_env(monkeypatch, backend_id, extra):
    from types import SimpleNamespace

    from tilekit.runtime import bench

    monkeypatch.setattr(bench, "time_cupti", lambda call, nrep: bench.Timing([0.5, 0.6], ["k"]))
    monkeypatch.setattr(bench, "environment", lambda: {"gpu": "none", "torch": "2"})
    monkeypatch.setattr(providers, "version", lambda name: "0.8.5")
    request = SimpleNamespace(node=SimpleNamespace(nodeid="t", user_properties=[]))
    record = harness.run_perf(request, kernel="softmax", backend_id=backend_id, cfg={"dtype": "float16"}, call=None)
    assert record["backend"] == harness.RECORD_NAME[backend_id]
    assert record["env"] == {"gpu": "none", "torch": "2", **extra}


# -- ids, record names and the harness -----------------------------------------------------------


def test_a_providers_id_is_its_record_name():
    assert [harness.RECORD_NAME[p] for p in providers.NAMES] == list(providers.NAMES)
    assert harness.BACKEND_IDS[-3:] == providers.NAMES


@pytest.mark.parametrize("name", KERNELS)
def test_the_generated_suite_has_every_providers_cases(name):
    cases = suite.cases(kernel.load(name))
    for test in ("test_op", "test_perf"):
        firsts = {p.id.split("-", 1)[0] for p in cases[test]}
        assert set(providers.NAMES) <= firsts, test


@pytest.mark.parametrize(
    "name,backend_id,reason",
    [
        ("matmul", "liger", "liger: kernels/matmul/baselines.py has no liger baseline"),
        ("silu_and_mul", "liger_cutile", "liger_cutile: Liger's cuTile swiglu has only LigerSiLUMulFunction"),
        ("softmax", "tilegym", "tilegym: tilegym is not installed: pip install --no-deps tilegym==1.5.1"),
    ],
)
def test_the_harness_skips_a_provider_that_cannot_run_with_its_reason(fresh, name, backend_id, reason):
    installed(fresh, backend_id != "tilegym")
    with pytest.raises(pytest.skip.Exception) as info:
        harness.implementation(kernel.load(name), backend_id)
    assert str(info.value).startswith(reason)


def test_an_input_a_library_does_not_serve_is_a_skip_with_the_reason_and_no_call(fresh):
    # Liger's Triton softmax refuses rows past one 64K block: a vocabulary row is not served.
    installed(fresh, True)
    calls = []
    fresh.setattr(providers, "_load", lambda name: (Ops(calls), None))
    run = harness.implementation(kernel.load("softmax"), "liger")
    assert run({"x": torch.zeros(2, 65536)}) == "y"
    with pytest.raises(pytest.skip.Exception, match="^liger: Liger's Triton softmax serves rows of at most 65536"):
        run({"x": torch.zeros(2, 65537)})
    assert [c[0] for c in calls] == ["softmax.LigerSoftmaxFunction.apply"]
