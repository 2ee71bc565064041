"""cutile_silu_and_mul seen from Python, on the CPU: its CDEF, the `nm -D` symbol check, and every
rejection ffi.rs makes before the GPU is touched, turned into KernelError with its code.

These load build/libcutile_kernels.so (make check builds it first). Nothing here launches a
kernel: every call is rejected by validation, or fails to find a device after validation passed.
"""
import subprocess
from pathlib import Path

import pytest
import torch

from tilekit import ffi

ROOT = Path(__file__).resolve().parents[2]
FUNC = "cutile_silu_and_mul"


@pytest.fixture(scope="module")
def lib():
    if not ffi.library_path().is_file():
        pytest.fail(f"{ffi.library_path()} is missing: run `make build` (make check does)")
    return ffi.Library()


def call(lib, x, out, block=-1, rows=-1, occupancy=-1, warps=-1, device_id=0, stream=0, x_desc=None, out_desc=None):
    d_out = out_desc if out_desc is not None else lib.pack(out)
    d_x = x_desc if x_desc is not None else lib.pack(x)
    lib.call("silu_and_mul", FUNC, d_out, d_x, block, rows, occupancy, warps, device_id, stream)


def test_cdef_declares_one_export_ending_in_device_and_stream():
    cdef = ffi.kernel_cdefs()["silu_and_mul"]
    assert ffi.declared_functions(cdef) == [FUNC]
    assert cdef.replace("\n", " ").split("int32_t device_id, uint64_t stream")[1].strip() == ");"


def test_symbol_check_passes_for_built_library():
    r = subprocess.run(["scripts/check_symbols.sh", str(ffi.library_path()), "silu_and_mul"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"symbols: T {FUNC}" in r.stdout


def test_null_descriptor_is_minus5(lib):
    x = torch.randn(4, 16)
    with pytest.raises(ffi.KernelError) as e:
        call(lib, x, torch.empty(4, 8), x_desc=lib.ffi.NULL)
    assert e.value.code == -5 and e.value.kernel == "silu_and_mul"
    assert "descriptor `x` is null" in str(e.value)


def test_integer_dtype_is_minus2(lib):
    x = torch.ones(4, 16, dtype=torch.int32)
    with pytest.raises(ffi.KernelError) as e:
        call(lib, x, torch.empty(4, 8, dtype=torch.int32))
    assert e.value.code == -2 and "silu_and_mul supports f32, f16, bf16" in str(e.value)


def test_unknown_dtype_code_is_minus2(lib):
    x = torch.randn(4, 16)
    with pytest.raises(ffi.KernelError) as e:
        call(lib, x, torch.empty(4, 8), x_desc=lib.desc(x.data_ptr(), (4, 16), (16, 1), 99))
    assert e.value.code == -2 and "unknown dtype code 99" in str(e.value)


INVALID = {
    "odd_last_dim": (lambda: (torch.randn(4, 15), torch.empty(4, 7)), {}, "must be even"),
    "out_shape": (lambda: (torch.randn(4, 16), torch.empty(4, 16)), {}, "must be [m, H] = [4, 8]"),
    "dtype_mix": (lambda: (torch.randn(4, 16), torch.empty(4, 8, dtype=torch.float16)), {}, "share one dtype"),
    "x_last_dim_stride": (lambda: (torch.randn(16, 4).t(), torch.empty(4, 8)), {}, "`x` must be contiguous in its last dim"),
    "out_is_gate_half_of_x": (lambda: (lambda x: (x, x[:, :8]))(torch.randn(4, 16)), {}, "`out` overlaps `x`"),
    "block_not_pow2": (lambda: (torch.randn(4, 16), torch.empty(4, 8)), {"block": 24}, "power of two"),
    "tile_too_big": (lambda: (torch.randn(4, 16), torch.empty(4, 8)), {"block": 16384, "rows": 2}, "block*rows <= 16384"),
    "occupancy": (lambda: (torch.randn(4, 16), torch.empty(4, 8)), {"occupancy": 33}, "occupancy=33"),
    "warps": (lambda: (torch.randn(4, 16), torch.empty(4, 8)), {"warps": 16}, "warps=16: use 4 or 8"),
    "x_1d": (lambda: (torch.randn(16), torch.empty(4, 8)), {}, "`x` must have 2 dims"),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_arguments_are_minus6_with_a_message(lib, case):
    make, knobs, needle = INVALID[case]
    x, out = make()
    with pytest.raises(ffi.KernelError) as e:
        call(lib, x, out, **knobs)
    assert e.value.code == -6 and needle in str(e.value), str(e.value)


def test_padded_rows_pass_validation_and_fail_only_at_device_setup(lib):
    # x (4, 16) inside rows of 20, out (4, 8) inside rows of 12: valid, so the call gets as far as
    # the device, which no machine has at ordinal 4096.
    x = torch.randn(4, 20)[:, :16]
    out = torch.empty(4, 12)[:, :8]
    with pytest.raises(ffi.KernelError) as e:
        call(lib, x, out, device_id=4096)
    assert e.value.code == -4 and "DEVICE_OR_STREAM" in str(e.value) and "4096" in str(e.value)
