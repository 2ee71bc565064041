"""`cutile_softmax` seen from Python, on the CPU: every bad descriptor or variant comes back as
the documented return code with a message that names the problem, before the GPU is touched, and
a valid call gets as far as device set-up (-4 without a GPU), never a crash.

These load build/libcutile_kernels.so (make check builds it first). Nothing here launches a kernel.
"""
import subprocess
from pathlib import Path

import pytest
import torch

from tilekit import ffi

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lib():
    if not ffi.library_path().is_file():
        pytest.fail(f"{ffi.library_path()} is missing: run `make build` (make check does)")
    return ffi.Library()


def call_softmax(lib, x, out, block=-1, rows=-1, occupancy=-1, warps=-1, device_id=0, stream=0):
    lib.call("softmax", "cutile_softmax", lib.pack(out), lib.pack(x), block, rows, occupancy, warps, device_id, stream)


def test_null_descriptor_is_minus5(lib):
    x = torch.randn(4, 8)
    with pytest.raises(ffi.KernelError) as e:
        lib.call("softmax", "cutile_softmax", lib.pack(x), lib.ffi.NULL, -1, -1, -1, -1, 0, 0)
    assert e.value.code == -5 and e.value.kernel == "softmax"
    assert "NULL_DESCRIPTOR" in str(e.value) and "descriptor `x` is null" in str(e.value)


def test_integer_dtype_is_minus2(lib):
    x = torch.ones(4, 8, dtype=torch.int32)
    with pytest.raises(ffi.KernelError) as e:
        call_softmax(lib, x, torch.empty_like(x))
    assert e.value.code == -2 and "softmax: x is i32; softmax supports f32, f16, bf16" in str(e.value)


def test_unknown_dtype_code_is_minus2(lib):
    x = torch.randn(4, 8)
    with pytest.raises(ffi.KernelError) as e:
        lib.call("softmax", "cutile_softmax", lib.pack(x), lib.desc(x.data_ptr(), (4, 8), (8, 1), 99), -1, -1, -1, -1, 0, 0)
    assert e.value.code == -2 and "unknown dtype code 99" in str(e.value)


@pytest.mark.parametrize("case,needle", [
    ("out_shape", "`x` shape [4, 8] != `out` shape [4, 9]"),
    ("dtype_mix", "`x` is f32 but `out` is f16: all tensors must share one dtype"),
    ("last_dim_stride", "`x` must be contiguous in its last dim"),
    ("overlapping_rows", "`x` row stride 4 < n=8: rows would overlap"),
    ("three_dims", "`x` must have 2 dims, got ndim=3"),
    ("block_not_pow2", "variant block=24 rows=1"),
    ("block_too_small", "variant block=8 rows=1"),
    ("rows_too_many", "variant block=16 rows=128"),
    ("tile_too_big", "variant block=65536 rows=2"),
    ("occupancy", "variant occupancy=33"),
    ("warps", "variant warps=2: use 4 or 8"),
])
def test_invalid_arguments_are_minus6_with_a_message(lib, case, needle):
    x = torch.randn(4, 8)
    out = torch.empty_like(x)
    variant = {"block": -1, "rows": -1, "occupancy": -1}
    if case == "out_shape":
        out = torch.empty(4, 9)
    elif case == "dtype_mix":
        out = torch.empty(4, 8, dtype=torch.float16)
    elif case == "last_dim_stride":
        x = torch.randn(8, 4).t()
    elif case == "overlapping_rows":
        x = torch.randn(40).as_strided((4, 8), (4, 1))
    elif case == "three_dims":
        x, out = torch.randn(2, 2, 8), torch.empty(2, 2, 8)
    elif case == "block_not_pow2":
        variant.update(block=24, rows=1)
    elif case == "block_too_small":
        variant.update(block=8, rows=1)
    elif case == "rows_too_many":
        variant.update(block=16, rows=128)
    elif case == "tile_too_big":
        variant.update(block=65536, rows=2)
    elif case == "occupancy":
        variant.update(occupancy=33)
    elif case == "warps":
        variant.update(warps=2)
    with pytest.raises(ffi.KernelError) as e:
        call_softmax(lib, x, out, **variant)
    assert e.value.code == -6 and "INVALID_ARGUMENT" in str(e.value)
    assert needle in str(e.value)


@pytest.mark.parametrize("shape,ld,variant", [
    ((3, 1000), 1040, {}),                                       # padded rows, default variant
    ((1, 1), 1, {}),                                             # n = 1
    ((64, 32768), 32768, {}),                                    # looped by default
    ((19, 20000), 20000, {"block": 4096, "rows": 2, "occupancy": 4}),  # an autotune candidate
])
def test_valid_call_passes_validation_and_fails_only_at_device_setup(lib, shape, ld, variant):
    # No GPU here (or an ordinal no machine has): device set-up fails after validation passed.
    x = torch.randn(shape[0], ld)[:, : shape[1]]
    with pytest.raises(ffi.KernelError) as e:
        call_softmax(lib, x, torch.empty(shape), device_id=4096, **variant)
    assert e.value.code == -4 and "DEVICE_OR_STREAM" in str(e.value) and "4096" in str(e.value)


def test_every_autotune_candidate_passes_validation(lib):
    from kernels.softmax import spec

    for m, n in [(65536, 1024), (65536, 4096), (65536, 8192), (257, 4097), (100, 20000), (64, 32768), (1, 1)]:
        d = lib.desc(0x1000, (m, n), (n, 1), ffi.DTYPE_CODES["float16"])  # a descriptor only: never read
        for v in spec.variants(m, n):
            with pytest.raises(ffi.KernelError) as e:
                lib.call("softmax", "cutile_softmax", d, d, v["block"], v["rows"], v["occupancy"], v.get("warps", -1), 4096, 0)
            assert e.value.code == -4, f"{m}x{n} {v}: {e.value}"


def test_symbol_check_finds_the_export():
    r = subprocess.run(["scripts/check_symbols.sh", str(ffi.library_path()), "softmax"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "symbols: T cutile_softmax" in r.stdout
