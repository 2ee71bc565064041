"""The `auto` variant path never ends in "every variant failed" for a valid input: for every
kernel, every shape in range and every dtype, `spec.variants(...)` offers at least one candidate
and ffi.rs's own validation accepts each one, as op.py's launch passes it (`op.export_args`). A
shape no variant can serve (matmul operands past the kernel's i32 indexing) is refused by op.py's
own check, with a clear error, before autotune.

On the CPU: the real exports validate every descriptor and the variant before touching the
device, so a valid call returns -4 (no device 4096 here, nor on any machine) and an invalid one
-6 with a message. The descriptors carry fake pointers, so 2^20 x 2^18 costs no memory. Loads
build/libcutile_kernels.so (`make build`). The only per-kernel part is KERNELS.
"""
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from tilekit import autotune, ffi

NO_DEVICE = 4096        # an ordinal no machine has: device set-up fails only after validation passed
H200_SMS = 132          # the SM count op.py's launch reads from the GPU, for persistent grids
ROWS, COLS = 1 << 20, 1 << 18
OUT, X, W = 1 << 44, 2 << 44, 3 << 44  # fake device addresses, far enough apart never to overlap


def rows(lib, ptr, m, n, code):
    """A contiguous (m, n) descriptor at a fake address (never dereferenced)."""
    return lib.desc(ptr, (m, n), (n, 1), code)


@dataclass(frozen=True)
class Entry:
    """How to call one kernel's export for a problem (spec.variants' keyword arguments)."""
    dims: dict                        # the largest value of each spec.variants argument
    tensors: Callable                 # (lib, dtype code, **dims) -> the export's descriptors, in order
    scalars: tuple = ()               # the non-variant scalars that follow them (rms_norm: eps)
    sms: bool = False                 # op.export_args needs the GPU's SM count (persistent grids)
    size_check: Callable | None = None  # (op, **dims): op.py's own refusal (ValueError) of sizes no variant serves
    edges: list = field(default_factory=list)  # explicit shapes, on top of the spec's perf/correctness shapes


ROW_EDGES = [(1000, 1), (1, 1), (1, COLS), (ROWS, 1), (ROWS, COLS), (4097, 4097), (1000, 11008), (3, 151936), (5, 16385)]

KERNELS = {
    "rms_norm": Entry(
        dims={"m": ROWS, "n": COLS},
        tensors=lambda lib, dt, m, n: (rows(lib, OUT, m, n, dt), rows(lib, X, m, n, dt), lib.desc(W, (n,), (1,), dt)),
        scalars=(1e-6,), sms=True,
        edges=[{"m": m, "n": n} for m, n in ROW_EDGES]),
    "softmax": Entry(
        dims={"m": ROWS, "n": COLS},
        tensors=lambda lib, dt, m, n: (rows(lib, OUT, m, n, dt), rows(lib, X, m, n, dt)),
        edges=[{"m": m, "n": n} for m, n in ROW_EDGES]),
    "silu_and_mul": Entry(  # h: the output width; x is (m, 2h)
        dims={"m": ROWS, "h": COLS},
        tensors=lambda lib, dt, m, h: (rows(lib, OUT, m, h, dt), rows(lib, X, m, 2 * h, dt)),
        edges=[{"m": m, "h": h} for m, h in ROW_EDGES]),
    "matmul": Entry(  # c = a @ b: c (m, n), a (m, k), b (k, n)
        dims={"m": ROWS, "n": COLS, "k": COLS},
        tensors=lambda lib, dt, m, n, k: (rows(lib, OUT, m, n, dt), rows(lib, X, m, k, dt), rows(lib, W, k, n, dt)),
        sms=True, size_check=lambda op, m, n, k: op.check_index_range(m, n, k),
        edges=[{"m": m, "n": n, "k": k} for m, n, k in [
            (1, 1, 1), (1000, 1, 1), (ROWS, 1, 1), (1, COLS, COLS), (4097, 11008, 4096), (4096, 151936, 4096),
            (16384, 151936, 4096),                  # c: 2.5e9 elements, past i32: refused
            (65535, 32768, 1), (65536, 32768, 1),   # c: 2^31 - 2^15 elements (served), 2^31 (refused)
            (ROWS, COLS, COLS)]]),
}


def modules(name):
    return importlib.import_module(f"kernels.{name}.op"), importlib.import_module(f"kernels.{name}.spec")


def call_code(lib, name, shape, dtype, variant) -> tuple[int, str]:
    """(return code, message) of the export for this problem and one variant dict."""
    entry, (op, _) = KERNELS[name], modules(name)
    args = op.export_args(**variant, sms=H200_SMS) if entry.sms else op.export_args(**variant)
    descs = entry.tensors(lib, ffi.DTYPE_CODES[dtype], **shape)
    try:
        lib.call(name, f"cutile_{name}", *descs, *entry.scalars, *args, NO_DEVICE, 0)
    except ffi.KernelError as e:
        return e.code, str(e)
    return 0, "returned 0 without a device"


def op_refusal(name, shape) -> str | None:
    """op.py's own error for a size no variant can serve, or None."""
    entry, (op, _) = KERNELS[name], modules(name)
    if entry.size_check is None:
        return None
    try:
        entry.size_check(op, **shape)
    except ValueError as e:
        return str(e)
    return None


def check_shape(lib, name, shape, dtype):
    """The property: op.py refuses the size (and ffi.rs agrees), or the default variant and every
    candidate of spec.variants pass ffi.rs's validation (-4: only the device is missing)."""
    op, spec = modules(name)
    refusal = op_refusal(name, shape)
    if refusal is not None:
        event("refused by op.py")
        assert "i32" in refusal and "split" in refusal, refusal
        code, msg = call_code(lib, name, shape, dtype, op.DEFAULT_VARIANT)
        assert code == -6 and "i32" in msg, f"op.py refuses {shape} but ffi.rs does not ({code}): op.py is stricter than the kernel\n{msg}"
        return
    code, msg = call_code(lib, name, shape, dtype, op.DEFAULT_VARIANT)
    assert code == -4, f"{name} {shape} {dtype}: the default variant fails validation ({code}) and op.py does not refuse the size first: {msg}"
    candidates = spec.variants(**shape)
    assert candidates, f"{name} {shape}: spec.variants offers no candidate"
    event(f"{len(candidates)} candidates")
    for v in candidates:
        code, msg = call_code(lib, name, shape, dtype, v)
        assert code == -4, f"{name} {shape} {dtype}: candidate {v} fails ffi.rs's validation ({code}): {msg}"


def dim(limit: int):
    """1..limit, log-uniform: a power-of-two octave (2^(b-1), 2^b] first, then a value in it, so
    1, 17 and 151936 are as likely as values near the limit."""
    bits = (limit - 1).bit_length()
    return st.integers(0, bits).flatmap(lambda b: st.integers((1 << b >> 1) + 1, min(1 << b, limit)))


def spec_shapes(name) -> list[dict]:
    """The kernel's own perf and correctness shapes (the tuned ones), as spec.variants arguments."""
    _, spec = modules(name)
    keys = KERNELS[name].dims
    return [{k: cfg[k] for k in keys} for cfg in spec.PERF_CONFIGS + spec.CORRECTNESS_SHAPES]


@pytest.fixture(scope="module")
def lib():
    if not ffi.library_path().is_file():
        pytest.fail(f"{ffi.library_path()} is missing: run `make build` (make check does)")
    return ffi.Library()


@pytest.mark.parametrize("name", list(KERNELS))
def test_every_shape_and_dtype_gets_candidates_that_ffi_accepts_or_op_refuses_the_size(lib, name):
    entry, (_, spec) = KERNELS[name], modules(name)

    @settings(derandomize=True, database=None, max_examples=500, deadline=None)
    @given(shape=st.fixed_dictionaries({k: dim(limit) for k, limit in entry.dims.items()}), dtype=st.sampled_from(spec.DTYPES))
    def prop(shape, dtype):
        check_shape(lib, name, shape, dtype)

    for shape in entry.edges + spec_shapes(name):
        for dtype in spec.DTYPES:
            prop = example(shape=shape, dtype=dtype)(prop)
    prop()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_rms_norm_1000x1_gets_16_wide_tiles_of_64_rows_that_ffi_accepts(lib, dtype):
    """Issue 11: (1000, 1) offered only rows = 8192/16 = 512 and 1024 (ffi.rs takes 1..=64), so
    autotune raised "every variant failed". Rows are now capped at 64."""
    _, spec = modules("rms_norm")
    vs = spec.variants(1000, 1)
    assert [(v["block"], v["rows"], v["occupancy"], v["programs_per_sm"]) for v in vs] == [
        (16, 64, 4, 0), (16, 64, 2, 0), (16, 64, 4, 4), (16, 64, 2, 2)]
    for v in vs:
        assert call_code(lib, "rms_norm", {"m": 1000, "n": 1}, dtype, v)[0] == -4, v


def test_matmul_past_i32_indexing_is_refused_by_op_before_autotune(monkeypatch):
    """The public entry refuses it from the shapes alone (meta tensors: nothing is allocated),
    before autotune could try (and fail) every candidate."""
    op, _ = modules("matmul")
    monkeypatch.setattr(autotune, "best", lambda *a, **k: pytest.fail("autotune reached"))
    a = torch.empty((16384, 4096), dtype=torch.bfloat16, device="meta")
    b = torch.empty((4096, 151936), dtype=torch.bfloat16, device="meta")
    with pytest.raises(ValueError, match=r"matmul: c \(16384 x 151936, row stride 151936\) spans 2489319424 elements"):
        op.matmul(a, b)


def test_matmul_index_range_counts_row_strides_like_ffi():
    """A column slice of a wider buffer spans (rows - 1) * stride + cols elements; one row, just cols."""
    op, _ = modules("matmul")
    op.check_index_range(1, 1 << 30, 1, ldc=1 << 31)  # one row: its stride does not count
    with pytest.raises(ValueError, match=r"matmul: a \(2 x 8, row stride 2147483640\) spans 2147483648 elements"):
        op.check_index_range(2, 8, 8, lda=(1 << 31) - 8)
