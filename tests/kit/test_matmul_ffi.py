"""kernels/matmul on the CPU: the export's validation seen from Python (return codes and messages
through cffi), every autotune candidate accepted by ffi.rs, the symbol check, and the pure parts
of spec.py and op.py.

These load build/libcutile_kernels.so (make check builds it first). Nothing here launches a
kernel: every call is rejected before the GPU is touched, or fails to find a device (ordinal
4096), which happens only after the descriptors and the variant passed validation.
"""
import subprocess
from pathlib import Path

import pytest
import torch

from kernels.matmul import op, spec
from tilekit import ffi

ROOT = Path(__file__).resolve().parents[2]
NO_DEVICE = 4096


@pytest.fixture(scope="module")
def lib():
    if not ffi.library_path().is_file():
        pytest.fail(f"{ffi.library_path()} is missing: run `make build` (make check does)")
    return ffi.Library()


def mats(m=4, n=16, k=8, dtype=torch.float16):
    return torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype), torch.empty(m, n, dtype=dtype)


def call(lib, a, b, c, bm=-1, bn=-1, bk=-1, group=-1, programs=-1, occupancy=-1, cga=-1, device_id=0, pack=None):
    pack = pack or lib.pack
    lib.call("matmul", "cutile_matmul", pack(c), pack(a), pack(b), bm, bn, bk, group, programs, occupancy, cga, device_id, 0)


def test_null_descriptor_is_minus5(lib):
    a, b, c = mats()
    with pytest.raises(ffi.KernelError) as e:
        lib.call("matmul", "cutile_matmul", lib.pack(c), lib.ffi.NULL, lib.pack(b), -1, -1, -1, -1, -1, -1, -1, 0, 0)
    assert e.value.code == -5 and e.value.kernel == "matmul" and "descriptor `a` is null" in str(e.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_f32_and_integers_are_minus2(lib, dtype):
    a, b, c = (t.to(dtype) for t in mats())
    with pytest.raises(ffi.KernelError) as e:
        call(lib, a, b, c)
    assert e.value.code == -2 and "matmul supports f16 and bf16" in str(e.value)


@pytest.mark.parametrize("case,needle", [
    ("inner_dim", "inner dims differ"),
    ("out_shape", "(m, n) = (4, 16)"),
    ("dtype_mix", "share one dtype"),
    ("last_dim_stride", "`a` must be contiguous in its last dim"),
    ("aliased_out", "must not alias"),
    ("tile_not_pow2", "bm=96"),
    ("cga_not_pow2", "num_cta_in_cga=3"),
])
def test_invalid_arguments_are_minus6_with_a_message(lib, case, needle):
    a, b, c = mats()
    kw = {}
    if case == "inner_dim":
        b = torch.randn(9, 16).half()
    elif case == "out_shape":
        c = torch.empty(4, 17).half()
    elif case == "dtype_mix":
        c = torch.empty(4, 16, dtype=torch.bfloat16)
    elif case == "last_dim_stride":
        a = torch.randn(8, 4).half().t()
    elif case == "aliased_out":
        a, b, c = torch.randn(16, 16).half(), torch.randn(16, 16).half(), None
        c = a
    elif case == "tile_not_pow2":
        kw = {"bm": 96}
    elif case == "cga_not_pow2":
        kw = {"cga": 3}
    with pytest.raises(ffi.KernelError) as e:
        call(lib, a, b, c, **kw)
    assert e.value.code == -6 and needle in str(e.value)


def test_column_slices_pass_validation_and_reach_device_setup(lib):
    # Row strides larger than the row, on all three: accepted; the missing device is -4.
    a = torch.randn(129, 72).half()[:, :65]
    b = torch.randn(65, 264).half()[:, :257]
    c = torch.empty(129, 272).half()[:, :257]
    with pytest.raises(ffi.KernelError) as e:
        call(lib, a, b, c, device_id=NO_DEVICE)
    assert e.value.code == -4 and str(NO_DEVICE) in str(e.value)


@pytest.mark.parametrize("m,n,k", [(129, 257, 65), (4096, 4096, 4096), (16384, 1024, 4096)])
def test_every_autotune_candidate_passes_ffi_validation(lib, m, n, k):
    """A candidate ffi.rs rejected would be skipped by autotune on the GPU; catch it here. Packed
    from descriptors with the right shapes (no allocation of the real sizes)."""
    a, b, c = (torch.empty(s, dtype=torch.bfloat16, device="meta") for s in ((m, k), (k, n), (m, n)))
    addr = {id(a): 0x10000, id(b): 0x20000, id(c): 0x30000}

    def pack_as(t):
        return lib.desc(addr[id(t)], tuple(t.shape), tuple(t.stride()), ffi.DTYPE_CODES["bfloat16"])

    for v in spec.variants(m, n, k):
        programs = op.persistent_programs(132, v["occupancy"], v["cga"]) if v["persistent"] else 0
        with pytest.raises(ffi.KernelError) as e:
            call(lib, a, b, c, v["bm"], v["bn"], v["bk"], v["group"], programs, v["occupancy"], v["cga"],
                 device_id=NO_DEVICE, pack=pack_as)
        assert e.value.code == -4, f"{v}: {e.value}"


def test_symbol_check_passes_for_matmul():
    r = subprocess.run(["scripts/check_symbols.sh", str(ffi.library_path()), "matmul"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "symbols: T cutile_matmul" in r.stdout


def test_cdef_ends_with_device_id_and_stream():
    decl = " ".join(op.CDEF.split())
    assert ffi.declared_functions(op.CDEF) == ["cutile_matmul"]
    assert decl.endswith("int32_t device_id, uint64_t stream);")


# -- pure parts of spec.py and op.py ------------------------------------------------------------

@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (16384, 1024, 4096),
                                   (129, 257, 65), (1, 72, 40), (1000, 1000, 1000)])
def test_variant_lists_are_small_distinct_and_complete(m, n, k):
    vs = spec.variants(m, n, k)
    assert 1 <= len(vs) <= 6
    assert len({tuple(sorted(v.items())) for v in vs}) == len(vs)
    assert all(set(v) == {"bm", "bn", "bk", "group", "persistent", "occupancy", "cga"} for v in vs)
    assert vs[0] == {"bm": 128, "bn": 128, "bk": 64, "group": 8, "persistent": False, "occupancy": 2, "cga": 1}


def test_small_problems_get_smaller_tiles_and_large_ones_persistent_and_cluster_variants():
    small = spec.variants(1000, 1000, 1000)  # 64 tiles of 128x128 for 132 SMs
    large = spec.variants(4096, 4096, 4096)  # 1024
    assert {(v["bm"], v["bn"]) for v in small} == {(128, 128), (64, 128), (128, 64), (64, 64)}
    assert not any(v["persistent"] or v["cga"] > 1 for v in small)
    assert sum(v["persistent"] for v in large) == 1 and sum(v["cga"] == 2 for v in large) == 2
    assert not any(v["bm"] * v["bn"] > 128 * 128 and v["cga"] == 1 for v in large)  # those spill


def test_tune_key_rounds_every_dim_up_to_a_power_of_two():
    assert spec.tune_key("bfloat16", 1000, 1025, 4096) == {"dtype": "bfloat16", "m_class": 1024, "n_class": 2048, "k_class": 4096}


def test_flops_and_bytes_model():
    cfg = {"dtype": "bfloat16", "m": 16384, "n": 1024, "k": 4096}
    assert spec.flops(cfg) == 2 * 16384 * 1024 * 4096
    assert spec.bytes_moved(cfg) == (16384 * 4096 + 4096 * 1024 + 16384 * 1024) * 2


def test_persistent_programs_fill_each_sm_or_cluster():
    assert op.persistent_programs(132, 1, 1) == 132
    assert op.persistent_programs(132, 2, 1) == 264
    assert op.persistent_programs(132, 1, 2) == 66
    assert op.persistent_programs(132, -1, -1) == 132


def test_make_inputs_and_out_honour_row_strides():
    cfg = {"dtype": "float16", "m": 5, "n": 6, "k": 7, "lda": 9, "ldb": 8, "ldc": 10}
    inputs = spec.make_inputs(cfg, device="cpu", seed=1)
    out = spec.make_out(cfg, inputs)
    assert inputs["a"].shape == (5, 7) and inputs["a"].stride() == (9, 1)
    assert inputs["b"].shape == (7, 6) and inputs["b"].stride() == (8, 1)
    assert out.shape == (5, 6) and out.stride() == (10, 1) and bool(out.isnan().all())
    assert spec.reference(inputs).dtype == torch.float64
