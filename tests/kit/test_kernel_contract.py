"""Every kernel's contract on the CPU, driven by its declaration (kernels/<name>/spec.py's SPEC,
tilekit.runtime.kernel): a kernel folder gets all of it by existing; nothing here names a kernel.

The declaration is complete and agrees with op.py; the export is in the built library; the export
seen through cffi refuses a null descriptor (-5), every dtype the kernel does not declare (-2) and
the kernel's own invalid calls (SPEC.ffi_cases) with their messages, and a valid call gets as far
as device set-up (-4: no device 4096 here, nor on any machine); every autotune candidate of every
shape up to the declared limits passes ffi.rs's validation, as op.py's launch passes it, or op.py
refuses the size first (hypothesis); the kernel's doctests (the pinned parts of its autotune space
and models) pass; inputs, output and reference agree with the declaration. The entry's bad inputs
are the generated test_op_bad_input_cutile_rs (tests/kernels, runs on the CPU); the baselines'
imports are tests/kit/test_baseline_support.py's.

Descriptors of the property carry fake pointers (tensors laid out on torch's meta device), so
2^20 x 2^18 costs no memory. Loads build/libcutile_kernels.so (`make build`); collecting does not.
"""

import doctest
import importlib
import inspect
import subprocess
from pathlib import Path

import pytest
import torch
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from tilekit.runtime import ffi, kernel, port

ROOT = Path(__file__).resolve().parents[2]
NAMES = kernel.names()
NO_DEVICE = 4096  # an ordinal no machine has: device set-up fails only after validation passed
H200_SMS = 132  # the SM count op.py's launch reads from the GPU, for persistent grids


@pytest.fixture(scope="module")
def lib():
    if not ffi.library_path().is_file():
        pytest.fail(f"{ffi.library_path()} is missing: run `make build` (make check does)")
    return ffi.Library()


def export_call(
    lib, spec, inputs: dict, out, variant: dict, *, null: int | None = None, dtype_code: int | None = None
) -> tuple[int, str]:
    """(return code, message) of the export for these tensors (CPU: their memory; meta: fake,
    non-overlapping addresses) and one variant. The argument `null` (an index: 0 is out) is sent
    as a null pointer, or with `dtype_code` in its descriptor."""

    def desc(i, t):
        if not isinstance(t, torch.Tensor):
            return t
        if i == null and dtype_code is None:
            return lib.ffi.NULL
        if t.device.type == "meta":
            d = lib.desc((i + 1) << 44, tuple(t.shape), tuple(t.stride()), ffi.DTYPE_CODES[str(t.dtype)[6:]])
        else:
            d = lib.pack(t)
        if i == null:
            d.dtype = dtype_code
        return d

    args = [desc(i, t) for i, t in enumerate([out, *inputs.values()])]
    try:
        lib.call(spec.name, f"cutile_{spec.name}", *args, *spec.export_args(variant, H200_SMS), NO_DEVICE, 0)
    except ffi.KernelError as e:
        return e.code, str(e)
    return 0, "returned 0 without a device"


def example_call(spec, tensors: dict | None = None) -> tuple[dict, object]:
    """The ffi_example's CPU inputs and output, with `tensors` ({"out" or input name: tensor}) in place."""
    inputs = spec.make_inputs(spec.ffi_example, device="cpu", seed=0)
    out = spec.make_out(spec.ffi_example, inputs)
    tensors = dict(tensors or {})
    out = tensors.pop("out", out)
    unknown = set(tensors) - set(inputs)
    assert not unknown, f"an FfiCase names {unknown}: not an input of {list(inputs)} or out"
    return {**inputs, **tensors}, out


# -- the declaration ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_declaration_is_complete_and_agrees_with_op(name):
    spec = kernel.load(name)
    assert spec.name == name
    assert spec.problems() == []


@pytest.mark.parametrize("name", NAMES)
def test_gpu_tests_of_tests_py_are_named_so_make_test_runs_them(name):
    """`make test` selects `-k "cutile_rs and test_op"`: a GPU test (it takes the `cuda` fixture)
    named otherwise would never run on the GPU."""
    import ast

    tree = ast.parse((Path(__file__).resolve().parents[2] / "kernels" / name / "tests.py").read_text())
    gpu = [f.name for f in tree.body if isinstance(f, ast.FunctionDef) and "cuda" in [a.arg for a in f.args.args]]
    assert [n for n in gpu if not (n.startswith("test_op") and "cutile_rs" in n)] == []


@pytest.mark.parametrize("name", NAMES)
def test_doctests_of_op_and_spec_pass(name):
    """The kernel's pinned examples (autotune candidates of named shapes, tune keys, byte models),
    also where op.py takes its autotune space from a module it shares (tilekit.runtime.mma)."""
    op = importlib.import_module(f"kernels.{name}.op")
    shared = {getattr(op, f).__module__ for f in ("variants", "tune_key", "export_args")} - {op.__name__}
    for module in [f"kernels.{name}.op", f"kernels.{name}.spec", *sorted(shared)]:
        mod = importlib.import_module(module)
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
        assert result.failed == 0, f"{module}: {result.failed} doctest(s) failed (run python -m doctest -v)"


@pytest.mark.parametrize("name", NAMES)
def test_inputs_output_and_reference_agree_with_the_declaration(name):
    """On the CPU for the small shapes: fresh random inputs of the config's dtype, never mostly zeros
    (a backward's inputs its forward made, KernelSpec.saved_inputs: of their declared dtype, zeros
    allowed; KernelSpec.input_dtypes: inputs of another dtype, rope's position ids), a NaN-poisoned output of out_shape, a float64 reference of that shape."""
    spec = kernel.load(name)
    small = [
        s
        for s in spec.correctness_shapes + spec.variant_shapes + [spec.ffi_example]
        if spec.bytes_moved(dict(s, dtype="float32")) <= 1 << 22 and (spec.flops is None or spec.flops(s) <= 1 << 28)
    ]
    assert small, "no small shape to check on the CPU"
    for shape in small:
        cfg = dict(shape, dtype=shape.get("dtype", spec.dtypes[0]))
        inputs = spec.make_inputs(cfg, device="cpu", seed=0)
        dtypes = {n: t.dtype for n, t in inputs.items() if isinstance(t, torch.Tensor)}
        declared = {**spec.input_dtypes(cfg), **spec.saved_inputs}
        want = {n: kernel.torch_dtype(declared.get(n) or cfg["dtype"]) for n in dtypes}
        assert dtypes == want, cfg
        tensors = [t for n, t in inputs.items() if isinstance(t, torch.Tensor) and n not in spec.saved_inputs]
        assert sum(int((t == 0).sum()) for t in tensors) <= sum(t.numel() for t in tensors) // 100 + 1, cfg
        out = spec.make_out(cfg, inputs)
        assert tuple(out.shape) == tuple(spec.out_shape(cfg)) and bool(out.isnan().all()), cfg
        ref = spec.reference(inputs)
        assert ref.dtype == torch.float64 and tuple(ref.shape) == tuple(out.shape), cfg


# -- the export seen from Python ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_declared_export_is_in_the_built_library(name):
    r = subprocess.run(
        ["scripts/check_symbols.sh", str(ffi.library_path()), name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert f"symbols: T cutile_{name}" in r.stdout


@pytest.mark.parametrize("name", NAMES)
def test_null_descriptor_is_minus5_naming_it(lib, name):
    spec = kernel.load(name)
    inputs, out = example_call(spec)
    code, msg = export_call(lib, spec, inputs, out, spec.op.DEFAULT_VARIANT, null=1)
    assert code == -5 and msg.startswith(f"kernel {name}: cutile_{name} returned -5 (NULL_DESCRIPTOR")
    assert f"descriptor `{next(iter(inputs))}` is null" in msg, msg


@pytest.mark.parametrize("name", NAMES)
def test_every_dtype_the_kernel_does_not_declare_is_minus2(lib, name):
    """...naming what it supports, so op.DTYPES and ffi.rs agree; an unknown dtype code too."""
    spec = kernel.load(name)
    supported = [ffi.RUST_DTYPE_NAMES[d] for d in spec.dtypes]
    for dtype in sorted(set(ffi.DTYPE_CODES) - set(spec.dtypes)):
        inputs, out = example_call(spec)
        cast = {k: v.to(kernel.torch_dtype(dtype)) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        code, msg = export_call(lib, spec, cast, out.to(kernel.torch_dtype(dtype)), spec.op.DEFAULT_VARIANT)
        said = msg.partition(f"{name}: {next(iter(inputs))} is {ffi.RUST_DTYPE_NAMES[dtype]}; {name} supports ")[2]
        assert code == -2 and said and all(s in said for s in supported), f"{dtype}: {msg}"
    inputs, out = example_call(spec)
    code, msg = export_call(lib, spec, inputs, out, spec.op.DEFAULT_VARIANT, null=1, dtype_code=99)
    assert code == -2 and "unknown dtype code 99" in msg, msg


@pytest.mark.parametrize("name", NAMES)
def test_the_kernels_own_export_calls_return_their_codes_and_messages(lib, name):
    """SPEC.shared_ffi_cases() (what every export refuses alike: a dim more or fewer, a strided last
    dim, mixed dtypes, bad hints) and SPEC.ffi_cases: invalid shapes, strides, aliasing and knobs
    (-6), valid edge layouts (-4)."""
    spec = kernel.load(name)
    wrong = []
    for case, c in {**spec.shared_ffi_cases(), **spec.ffi_cases}.items():
        inputs, out = example_call(spec, c.tensors())
        code, msg = export_call(lib, spec, inputs, out, {**spec.op.DEFAULT_VARIANT, **c.variant})
        expected = ffi.RETURN_CODES[c.code][0]
        if code != c.code or c.message not in msg or (code == -4 and str(NO_DEVICE) not in msg):
            wrong.append(f"{case}: expected {c.code} ({expected}) with {c.message!r}, got {code}: {msg}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", NAMES)
def test_valid_calls_pass_validation_and_fail_only_at_device_setup(lib, name):
    """Every correctness and variant shape (padded rows included), every dtype, ffi.rs's default
    variant: -4, and the library stays usable after the failure."""
    spec = kernel.load(name)
    for shape in spec.correctness_shapes + spec.variant_shapes:
        for dtype in spec.dtypes:
            cfg = dict(shape, dtype=dtype)
            inputs = spec.make_inputs(cfg, device="meta")
            code, msg = export_call(lib, spec, inputs, spec.make_out(cfg, inputs), spec.op.DEFAULT_VARIANT)
            assert code == -4 and "DEVICE_OR_STREAM" in msg and str(NO_DEVICE) in msg, f"{cfg}: {msg}"
    assert lib.ffi.string(lib.lib.tilekit_abi_json())


@pytest.mark.parametrize("name", NAMES)
def test_the_entrys_launch_passes_out_args_variant_and_stream_in_the_exports_order(lib, name, monkeypatch):
    """tilekit.runtime.port, as the entry calls it, on the ffi_example's CPU tensors with the device and stream
    faked: the export receives out's descriptor first, then the inputs' in order (out is a column
    slice of a wider buffer: its pointer and row stride differ from every input's, so a swap shows),
    the default variant and every candidate reach device set-up (-4: validation passed), and a bad
    occupancy is ffi.rs's -6."""
    from tilekit.runtime import port

    monkeypatch.setattr(ffi, "stream_args", lambda t: (NO_DEVICE, 0))
    monkeypatch.setattr(port, "sm_count", lambda device_id: H200_SMS)
    received = []
    call = ffi.Library.call

    def recording_call(self, kernel_name, func, *args):
        received.append([(d.data, tuple(d.strides[0 : d.ndim])) for d in args if isinstance(d, lib.ffi.CData)])
        return call(self, kernel_name, func, *args)

    monkeypatch.setattr(ffi.Library, "call", recording_call)
    spec = kernel.load(name)
    inputs, out = example_call(spec)
    out = torch.cat((out, out), -1)[..., : out.shape[-1]]  # its own row stride
    tensors = [out, *(t for t in inputs.values() if isinstance(t, torch.Tensor))]
    expected = [(t.data_ptr(), t.stride()) for t in tensors]
    for variant in [spec.op.DEFAULT_VARIANT, *spec.variants(spec.ffi_example)]:
        received.clear()
        with pytest.raises(ffi.KernelError, match=str(NO_DEVICE)) as e:
            port.launch(spec.op, out, *inputs.values(), **variant)
        assert e.value.code == -4, f"{variant}: {e.value}"
        assert received == [expected], f"{variant}: the export got (data, strides) {received}, not {expected}"
    with pytest.raises(ffi.KernelError, match="variant occupancy=33") as e:
        port.run(
            spec.op.__name__,
            dict(spec.op.DEFAULT_VARIANT, occupancy=33),
            tuple(spec.dims_of(spec.ffi_example).values()),
            out,
            *inputs.values(),
        )
    assert e.value.code == -6


# -- the autotune space ---------------------------------------------------------------------------------


def check_shape(lib, spec, shape: dict, dtype: str) -> None:
    """op.py refuses the size (and ffi.rs agrees), or the default variant and every candidate of
    op.variants (few, distinct, every knob of DEFAULT_VARIANT and only knobs export_args takes) pass
    ffi.rs's validation (-4)."""
    cfg = dict(shape, dtype=dtype)
    inputs = spec.make_inputs(cfg, device="meta")
    out = spec.make_out(cfg, inputs)
    refusal = None
    if spec.size_check is not None:
        try:
            spec.size_check(**shape)
        except ValueError as e:
            refusal = str(e)
    code, msg = export_call(lib, spec, inputs, out, spec.op.DEFAULT_VARIANT)
    if refusal is not None:
        event("refused by op.py")
        assert refusal.startswith(f"{spec.name}: ") and code == -6, (
            f"op.py refuses {shape} but ffi.rs does not ({code}): op.py is stricter than the kernel\n{msg}"
        )
        return
    assert code == -4, (
        f"{spec.name} {cfg}: the default variant fails validation ({code}) and op.py does not refuse the size first: {msg}"
    )
    candidates = spec.variants(cfg)
    knobs = set(inspect.signature(spec.op.export_args).parameters) - {"sms"}
    assert 1 <= len(candidates) <= spec.max_variants, f"{spec.name} {shape}: {len(candidates)} candidates"
    assert len({tuple(sorted(v.items())) for v in candidates}) == len(candidates), f"{shape}: repeated candidates"
    event(f"{len(candidates)} candidates")
    for v in candidates:
        assert set(spec.op.DEFAULT_VARIANT) <= set(v) <= knobs, f"{v}: export_args takes {sorted(knobs)}"
        code, msg = export_call(lib, spec, inputs, out, v)
        assert code == -4, f"{spec.name} {cfg}: candidate {v} fails ffi.rs's validation ({code}): {msg}"


def dim(limit: int):
    """1..limit, log-uniform: a power-of-two octave (2^(b-1), 2^b] first, then a value in it, so
    1, 17 and 151936 are as likely as values near the limit."""
    bits = (limit - 1).bit_length()
    return st.integers(0, bits).flatmap(lambda b: st.integers((1 << b >> 1) + 1, min(1 << b, limit)))


def edges(spec) -> list[dict]:
    """Every corner of the dims' range, the declared edges and the kernel's own shapes."""
    corners = [{}]
    for d, limit in spec.dims.items():
        corners = [dict(c, **{d: v}) for c in corners for v in (1, limit)]
    return (
        corners
        + list(spec.autotune_edges)
        + [spec.dims_of(c) for c in spec.perf_configs + spec.correctness_shapes + spec.variant_shapes]
    )


@pytest.mark.parametrize("name", NAMES)
def test_every_shape_and_dtype_gets_candidates_that_ffi_accepts_or_op_refuses_the_size(lib, name):
    spec = kernel.load(name)

    @settings(derandomize=True, database=None, max_examples=500, deadline=None)
    @given(
        shape=st.fixed_dictionaries({d: dim(limit) for d, limit in spec.dims.items()}),
        dtype=st.sampled_from(spec.dtypes),
    )
    def prop(shape, dtype):
        check_shape(lib, spec, shape, dtype)

    for shape in edges(spec):
        for dtype in spec.dtypes:
            prop = example(shape=shape, dtype=dtype)(prop)
    prop()


def test_a_variant_that_misses_or_invents_a_knob_is_refused_naming_them():
    # port.export_args takes a module's name: import them here, not through an earlier test
    for name in ("attention", "softmax"):
        importlib.import_module(f"kernels.{name}.op")
    # the attention GPU test that passed {"bm", "bn", "occupancy"} got a bare TypeError from Python
    with pytest.raises(
        TypeError, match=r"missing knob\(s\) warps \(the export's knobs: bm, bn, occupancy, warps, splits, depth;"
    ):
        port.export_args("kernels.attention.op", {"bm": 64, "bn": 64, "occupancy": -1}, 0)
    with pytest.raises(TypeError, match=r"unknown knob\(s\) tile"):
        port.export_args("kernels.softmax.op", {"block": 1024, "rows": 1, "occupancy": -1, "tile": 2}, 0)
    assert port.export_args("kernels.softmax.op", {"block": 1024, "rows": 1, "occupancy": -1}, 0) == (
        1024,
        1,
        -1,
        -1,
        -1,
        0,
        0,
        0,
    )
