"""The C ABI seen from Python, on the CPU: descriptor packing, the ABI cross-check against the
built library, return codes turned into exceptions, and the `nm -D` symbol check. What every
kernel's export returns for null, unsupported and invalid arguments is test_kernel_contract.py's.

These load build/libcutile_kernels.so (make check builds it first). Nothing here launches a
kernel: every call is rejected before the GPU is touched, or fails to find a device.
"""

import os
import subprocess
from pathlib import Path

import pytest
import torch

from tilekit.runtime import ffi, kernel

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lib():
    if not ffi.library_path().is_file():
        pytest.fail(f"{ffi.library_path()} is missing: run `make build` (make check does)")
    return ffi.Library()


# -- ABI agreement ------------------------------------------------------------------------------


def test_library_abi_matches_python_definitions(lib):
    abi = lib.abi()
    assert ffi.check_abi(abi, lib.ffi) == []
    assert abi["tensor_desc_size"] == 8 + 4 + 4 + 2 * 8 * ffi.MAX_DIMS


def test_library_was_built_from_this_checkouts_kernels(lib):
    if os.environ.get("TILEKIT_PREBUILT") == "1":
        pytest.skip("prebuilt library from a bundle: built from another checkout by design")
    assert lib.abi()["kernels_dir"] == str((ROOT / "kernels").resolve())


def test_abi_check_reports_a_renumbered_dtype(lib):
    abi = lib.abi()
    abi["dtypes"] = dict(abi["dtypes"], bf16=7)
    problems = ffi.check_abi(abi, lib.ffi)
    assert len(problems) == 1 and problems[0].startswith("dtypes:")


# -- descriptor packing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype,code", [(torch.float32, 0), (torch.float16, 1), (torch.bfloat16, 2), (torch.int32, 3), (torch.int64, 4)]
)
def test_pack_writes_pointer_shape_element_strides_and_dtype(lib, dtype, code):
    base = torch.zeros(6, 10, dtype=dtype)
    t = base[1:, 2:9:1]  # a view: offset pointer, row stride 10 (elements), shape (5, 7)
    d = lib.pack(t)
    assert d.data == t.data_ptr() == base.data_ptr() + (1 * 10 + 2) * base.element_size()
    assert (d.ndim, d.dtype) == (2, code)
    assert list(d.shape)[:2] == [5, 7] and list(d.strides)[:2] == [10, 1]


def test_pack_of_transposed_tensor_keeps_its_strides(lib):
    t = torch.empty(3, 4, 5).permute(2, 0, 1)
    d = lib.pack(t)
    assert list(d.shape)[:3] == [5, 3, 4] and list(d.strides)[:3] == [1, 20, 5]


def test_pack_rejects_a_dtype_without_a_code(lib):
    with pytest.raises(TypeError, match="float64 has no tilekit dtype code"):
        lib.pack(torch.zeros(2, dtype=torch.float64))


def test_pack_rejects_more_dims_than_the_descriptor_holds(lib):
    with pytest.raises(ValueError, match="<= 8"):
        lib.pack(torch.zeros([1] * 9))


# -- return codes become exceptions -------------------------------------------------------------


def test_kernel_error_names_kernel_code_and_meaning():
    e = ffi.KernelError("softmax", "cutile_softmax", -3, "tileiras failed")
    assert (
        str(e)
        == "kernel softmax: cutile_softmax returned -3 (JIT_OR_LAUNCH: JIT compile or kernel launch failed): tileiras failed"
    )


# -- declarations and the symbol check ----------------------------------------------------------


def test_declared_functions_are_read_from_cdef_without_import():
    cdef = "int32_t cutile_a(const TensorDesc* x, int32_t n); /* c */\nint32_t cutile_b(void);"
    assert ffi.declared_functions(cdef) == ["cutile_a", "cutile_b"]
    assert set(ffi.kernel_cdefs()) == set(kernel.names())  # every kernel folder declares its export


def test_symbol_check_fails_naming_a_declared_but_missing_export(tmp_path):
    fake = tmp_path / "kernels" / "fake"
    fake.mkdir(parents=True)
    (fake / "op.py").write_text(
        'CDEF = "int32_t cutile_fake(const TensorDesc* x, int32_t device_id, uint64_t stream);"\n'
    )
    env = dict(os.environ, TILEKIT_ROOT=str(tmp_path))
    r = subprocess.run(
        ["scripts/check_symbols.sh", str(ffi.library_path()), "fake"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert r.returncode == 1
    assert "MISSING cutile_fake" in r.stderr and "kernels/fake/ffi.rs" in r.stderr
