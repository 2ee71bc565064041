"""Every kernels/<name>/baselines.py on the CPU, the same tests for each (what differs is data: the
BASELINE_CASES of kernels/<name>/tests.py, tilekit.runtime.baseline_cases): the module contract (BACKENDS,
VARIANTS, unavailable_reason, imports without triton or cuda.tile; the providers' entries are
tested in test_providers.py), input checks, the torch entry
and the Triton kernels under the Triton interpreter against SPEC's float64 reference, the pure
config functions' plans (the auto plans of the perf shapes pinned), and the kernels compiled for
sm_90: Triton's always (Triton ships ptxas), cuTile's traced to Tile IR bytecode where cuda.tile is
installed and compiled where tileiras is also found (elsewhere those skip with the reason).

The interpreter must be switched on (TRITON_INTERPRET=1) before the kernels are decorated, i.e.
before baselines.py is imported, so each kernel's interpreted cases run in ONE child process
(triton_interp.py) and the tests here assert on its answers.
"""

import doctest
import functools
import importlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import triton_interp
from tilekit.runtime import baseline_cases
from tilekit.runtime import baseline_support as bs
from tilekit.runtime import providers
from tilekit.runtime.baseline_cases import TOL
from tilekit.runtime.kernel import stacked

ROOT = Path(__file__).resolve().parents[2]
KERNELS = sorted(p.parent.name for p in (ROOT / "kernels").glob("*/baselines.py"))
CASES = {k: baseline_cases.load(k) for k in KERNELS}

TRITON_MISSING = "triton is not installed: pip install triton (it comes with CUDA builds of torch)"
CUTILE_MISSING = "cuda.tile is not installed: pip install cuda-tile==1.7.0 (the bundle carries it)"
NO_CUTILE = "cuda.tile is not installed here (kept out of the project venv)"


def baselines(kernel: str):
    return importlib.import_module(f"kernels.{kernel}.baselines")


def attr(B, name: str):
    """B's attribute `name`, dotted through a module it imports (gemm._triton_bmm_kernel)."""
    return functools.reduce(getattr, name.split("."), B)


def each(field: str) -> list:
    """pytest params (kernel, index) over one list of every kernel's cases, with readable ids."""
    return [
        pytest.param(k, i, id=f"{k}-{i}") for k in KERNELS if CASES[k] for i in range(len(getattr(CASES[k], field)))
    ]


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernel_with_baselines_has_its_cases_of_its_own_declaration(kernel):
    cases = CASES[kernel]
    assert isinstance(cases, baseline_cases.BaselineCases), (
        f"declare BASELINE_CASES = tilekit.runtime.baseline_cases.BaselineCases(SPEC, ...) in kernels/{kernel}/tests.py"
    )
    assert cases.spec.name == kernel


# -- the module contract --------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", KERNELS)
def test_backends_are_our_three_entries_then_providers_and_torch_always_runs(kernel):
    B = baselines(kernel)
    own = {b: getattr(B, f"{b}_{kernel}") for b in ("cutile", "triton", "torch")}
    assert dict(list(B.BACKENDS.items())[:3]) == own
    # a second torch implementation right after torch: SDPA's FlashAttention-2 backend (attention), or
    # the eager formula under torch.compile (a composition of ops: fused_add_rms_norm)
    second = [b for b in ("torch_flash", "torch_compile") if b in B.BACKENDS]
    assert len(second) <= 1
    for b in second:
        own[b] = getattr(B, f"{b}_{kernel}")
        assert list(B.BACKENDS)[3] == b and B.unavailable_reason(b) is None
    assert [b for b in B.BACKENDS if b not in own] == [p for p in providers.NAMES if p in B.BACKENDS]
    assert all(B.BACKENDS[p] == providers.Entry(p, B.BACKENDS[p].call) for p in B.BACKENDS if p not in own)
    assert B.VARIANTS[0] == "auto" and len(set(B.VARIANTS)) == len(B.VARIANTS)
    assert B.unavailable_reason("torch") is None


@pytest.mark.parametrize("kernel", KERNELS)
def test_doctests_of_baselines_pass(kernel):
    result = doctest.testmod(baselines(kernel), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"kernels/{kernel}/baselines.py: {result.failed} doctest(s) failed"


@pytest.mark.parametrize("kernel", KERNELS)
def test_triton_reason_is_none_exactly_when_it_imports(kernel):
    B = baselines(kernel)
    assert (B.unavailable_reason("triton") is None) == (B.triton is not None)


@pytest.mark.parametrize("kernel", KERNELS)
def test_missing_packages_say_how_to_install_them(kernel, monkeypatch):
    B = baselines(kernel)
    monkeypatch.setattr(B, "_CUTILE_ERROR", ModuleNotFoundError("No module named 'cuda.tile'"))
    monkeypatch.setattr(B, "_TRITON_ERROR", ModuleNotFoundError("No module named 'triton'"))
    assert B.unavailable_reason("cutile") == CUTILE_MISSING
    assert B.unavailable_reason("triton") == TRITON_MISSING


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_broken_import_is_reported_with_its_error(kernel, monkeypatch):
    B = baselines(kernel)
    monkeypatch.setattr(B, "_CUTILE_ERROR", OSError("libcuda.so.1: cannot open shared object file"))
    assert (
        B.unavailable_reason("cutile")
        == "cuda.tile failed to import: OSError: libcuda.so.1: cannot open shared object file"
    )


@pytest.mark.parametrize("kernel", KERNELS)
def test_an_unknown_backend_is_an_error_naming_the_kernel(kernel):
    with pytest.raises(ValueError, match=f"unknown {kernel} baseline 'cupy'"):
        baselines(kernel).unavailable_reason("cupy")


@pytest.fixture(scope="module")
def imported_without_packages():
    """Each module's reasons for triton and cutile, imported in ONE child that blocks both."""
    code = (
        "import sys, importlib, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name in ('triton', 'cuda.tile') or name.startswith('triton.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "for k in sys.argv[1:]:\n"
        "    B = importlib.import_module(f'kernels.{k}.baselines')\n"
        "    print(k, B.unavailable_reason('triton'), sep='\\t'); print(k, B.unavailable_reason('cutile'), sep='\\t')\n"
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tools"), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *KERNELS], capture_output=True, text=True, cwd=ROOT, env=env, timeout=45
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    reasons = {}
    for line in proc.stdout.splitlines():
        kernel, reason = line.split("\t")
        reasons.setdefault(kernel, []).append(reason)
    return reasons


@pytest.mark.parametrize("kernel", KERNELS)
def test_module_imports_without_triton_or_cuda_tile(imported_without_packages, kernel):
    assert imported_without_packages[kernel] == [TRITON_MISSING, CUTILE_MISSING]


@pytest.mark.parametrize(
    "backend,package,error,message",
    [
        ("cutile", "ct", "_CUTILE_ERROR", "cuda.tile is not installed"),
        ("triton", "triton", "_TRITON_ERROR", "triton is not installed"),
    ],
)
@pytest.mark.parametrize("kernel", KERNELS)
def test_missing_backend_raises_its_reason_when_called(kernel, backend, package, error, message, monkeypatch):
    B, cases = baselines(kernel), CASES[kernel]
    monkeypatch.setattr(B, package, None)
    monkeypatch.setattr(B, error, ModuleNotFoundError("gone"))
    with pytest.raises(RuntimeError, match=message):
        B.BACKENDS[backend](*cases.inputs(cases.torch_case[0]).values())


# -- inputs and the torch entry -------------------------------------------------------------------


@pytest.mark.parametrize("kernel,index", each("bad_inputs"))
def test_bad_inputs_are_rejected_before_any_launch(kernel, index):
    args, exc, match = CASES[kernel].bad_inputs[index]
    with pytest.raises(exc, match=match):
        baselines(kernel)._check_inputs(*args)


@pytest.mark.parametrize("kernel", KERNELS)
def test_torch_entry_matches_float64_reference(kernel):
    cases = CASES[kernel]
    cfg, tol = cases.torch_case
    inputs = cases.inputs(cfg)
    ref = cases.spec.reference(inputs)
    y = stacked(cases.spec.run_baseline("torch", inputs), tuple(ref.shape))  # outputs made apart, joined
    assert list(y.shape) == cases.out_shape(cfg) and y.dtype == getattr(torch, cfg["dtype"])
    assert ((y.double() - ref).abs() / (1 + ref.abs())).max().item() <= tol


# -- Triton kernels under the interpreter ---------------------------------------------------------


@pytest.fixture(scope="module")
def interpreted():
    """kernel -> results of its interpreted cases, from one child process per kernel (on first use)."""
    results = {}

    def get(kernel):
        if kernel not in results:
            triton_interp.require_triton(baselines(kernel), "Triton interpreter tests need triton")
            results[kernel] = triton_interp.run(kernel, CASES[kernel].interpreted)
        return results[kernel]

    return get


def _case_id(kernel, case):
    cfg, variant, knobs = case
    dims = [f"{k}{v}" for k, v in cfg.items() if k != "dtype"]
    return "-".join([kernel, cfg["dtype"], *dims, variant] + [f"{k}{v}" for k, v in knobs.items()])


@pytest.mark.parametrize(
    "kernel,index",
    [pytest.param(k, i, id=_case_id(k, c)) for k in KERNELS if CASES[k] for i, c in enumerate(CASES[k].interpreted)],
)
def test_triton_variant_matches_float64_reference_under_interpreter(interpreted, kernel, index):
    cfg, _, _ = CASES[kernel].interpreted[index]
    dt = cfg["dtype"]
    res = interpreted(kernel)[index]
    assert "error" not in res, res["error"]
    out_dtype = CASES[kernel].spec.out_dtype or dt  # cross_entropy's losses are float32 whatever the logits
    assert res["dtype"] == f"torch.{out_dtype}" and res["shape"] == CASES[kernel].out_shape(cfg) and res["contiguous"]
    assert res["err"] <= TOL[dt], f"max rel err {res['err']:.3g} > {TOL[dt]}"
    assert not any(res["zero"].values()), res["zero"]


# -- the pure config functions --------------------------------------------------------------------


@pytest.fixture
def no_gpu(monkeypatch):
    """A plan is pure: any CUDA query fails the test."""

    def fail(*args, **kwargs):
        raise AssertionError("a config function queried the GPU")

    for name in ("get_device_properties", "current_device", "device_count", "current_stream", "is_available"):
        monkeypatch.setattr(torch.cuda, name, fail)


@pytest.mark.parametrize("kernel,index", each("plans"))
def test_config_functions_plan_as_specified(no_gpu, kernel, index):
    fn, args, kwargs, expected = CASES[kernel].plan(index)
    plan = getattr(baselines(kernel), fn)
    assert plan(*args, **kwargs) == expected
    assert plan(*args, **kwargs) == plan(*args, **kwargs)


@pytest.mark.parametrize("kernel,index", each("plan_errors"))
def test_config_functions_reject_what_they_cannot_plan(no_gpu, kernel, index):
    fn, args, kwargs, match = CASES[kernel].plan_errors[index]
    with pytest.raises(ValueError, match=match):
        getattr(baselines(kernel), fn)(*args, **kwargs)


@pytest.mark.parametrize("kernel,index", each("pinned"))
def test_pinned_values(kernel, index):
    what, get, expected, needs_triton = CASES[kernel].pinned[index]
    B = baselines(kernel)
    if needs_triton:
        triton_interp.require_triton(B)
    assert get(B) == expected, what


# -- compiled for sm_90 on the CPU ----------------------------------------------------------------


@pytest.mark.parametrize("kernel,index", each("triton_compile"))
def test_triton_kernels_compile_for_sm90(kernel, index):
    """The interpreter runs kernels as Python, so it accepts what the compiler rejects: a plain
    module global read inside @triton.jit failed every looped launch on the H200 (2026-11-29) while
    the interpreter tests passed. So each kernel is also compiled, here, for the GPU it runs on."""
    B, cases = baselines(kernel), CASES[kernel]
    triton_interp.require_triton(B)
    from triton.backends.compiler import GPUTarget

    name, pointer, constexprs, *options = cases.triton_compile[index]
    fn = attr(B, name)
    src = B.triton.compiler.ASTSource(fn=fn, signature=cases.triton_signature(fn, pointer), constexprs=constexprs)
    compiled = B.triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options[0] if options else {})
    assert compiled.asm["cubin"]
    assert cases.triton_ptx_has in compiled.asm["ptx"]


def _cutile_kernel(kernel, index):
    """(cuTile kernel, its KernelSignature, whether to compile it to a cubin too)."""
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature

    B = baselines(kernel)
    name, dt, args, cubin = CASES[kernel].cutile_kernels[index]
    fn = attr(B, name) if isinstance(name, str) else attr(B, name[0])(*name[1])
    dtype = getattr(B.ct, dt)
    sig = [
        ArrayConstraint(
            getattr(B.ct, a.partition(":")[2]) if ":" in a else dtype,  # "A2:float32": an array of its own dtype
            int(a[1]),
            index_dtype=B.ct.int32,
            stride_lower_bound_incl=0,
            alias_groups=(),
            may_alias_internally=False,
        )
        if isinstance(a, str)
        else a
        for a in args
    ]
    return fn, KernelSignature(sig, CallingConvention.cutile_python_v1()), cubin


@pytest.mark.parametrize("kernel,index", each("cutile_kernels"))
def test_cutile_kernels_trace_to_tile_ir_bytecode(kernel, index):
    if baselines(kernel).ct is None:
        pytest.skip(NO_CUTILE)
    from cuda.tile.compilation import export_kernel

    fn, sig, _ = _cutile_kernel(kernel, index)
    buf = io.BytesIO()
    export_kernel(fn, [sig], buf, output_format="tileir_bytecode", gpu_code="sm_90", bytecode_version="13.4")
    assert len(buf.getvalue()) > 0


@pytest.mark.parametrize(
    "kernel,index", [p for p in each("cutile_kernels") if CASES[p.values[0]].cutile_kernels[p.values[1]][3]]
)
def test_cutile_kernels_compile_for_sm90_with_tileiras(kernel, index):
    if baselines(kernel).ct is None:
        pytest.skip(NO_CUTILE)
    if bs.tileiras_missing() is not None:
        pytest.skip(bs.tileiras_missing())
    from cuda.tile.compilation import export_kernel

    fn, sig, _ = _cutile_kernel(kernel, index)
    buf = io.BytesIO()
    export_kernel(fn, [sig], buf, output_format="cubin", gpu_code="sm_90")
    assert buf.getvalue()[:4] == b"\x7fELF"
