"""kernels/matmul/baselines.py on the CPU: the Triton kernels under the Triton interpreter against
a float64 reference, the variant rules, input checks and `unavailable_reason`.

The interpreter must be switched on (TRITON_INTERPRET=1) before the kernels are decorated, i.e.
before baselines.py is imported, so every interpreted case runs in ONE child process (it prints
a JSON list of results) and the tests here assert on its answers. The cuTile kernels need
cuda.tile (kept out of the project venv): where it is installed they are traced to Tile IR
bytecode, and compiled for sm_90 where tileiras is also found; elsewhere those tests skip.
"""

import pytest
import torch

import triton_interp
from tilekit import baseline_support as bs
from kernels.matmul import baselines as B


# (dtype, m, n, k, lda, ldb, variant). Tiny (one partial tile), ragged on every dim (K not a
# multiple of BK: the masked K step), K a multiple of BK (the unmasked path), column slices,
# and a persistent grid of one program ("one SM" on the CPU) that walks every tile.
SHAPES = ((3, 5, 7, 7, 5), (129, 257, 65, 65, 257), (130, 300, 128, 128, 300), (65, 40, 70, 80, 48))
CASES = [(dt, m, n, k, lda, ldb, variant)
         for dt in ("float16", "bfloat16") for (m, n, k, lda, ldb) in SHAPES for variant in B.VARIANTS]
# max |c - ref| / (1 + |ref|): the output rounding of each dtype, with margin.
TOL = {"float16": 2e-3, "bfloat16": 1.6e-2}

CHILD = triton_interp.PREAMBLE + r"""
# triton 3.6's interpreter keeps bf16 as its uint16 bit patterns and its tl.dot multiplies those
# integers (a 16x16 bf16 dot is off by ~2e10; the same dot after .to(tl.float32) is right): widen
# bf16 operands to the float32 values they encode first. The kernels on a GPU are unaffected.
import numpy as np
import triton.language as tl
_orig_dot = interp.InterpreterBuilder.create_dot
def _dot(self, a, b, d, *args):
    def widen(x):
        if x.dtype != tl.bfloat16:
            return x
        return interp.TensorHandle((x.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
    return _orig_dot(self, widen(a), widen(b), d, *args)
interp.InterpreterBuilder.create_dot = _dot

from kernels.matmul import baselines as B
out = []
for dt, m, n, k, lda, ldb, variant in json.loads(sys.stdin.read()):
    g = torch.Generator().manual_seed(m * 7919 + n * 31 + k)
    a = torch.randn(m, lda, generator=g).to(getattr(torch, dt))[:, :k]
    b = torch.randn(k, ldb, generator=g).to(a.dtype)[:, :n]
    ref = a.double() @ b.double()
    try:
        c = B.triton_matmul(a, b, variant=variant)
        err = ((c.double() - ref).abs() / (1 + ref.abs())).max().item()
        out.append({"err": err, "dtype": str(c.dtype), "shape": list(c.shape), "contiguous": c.is_contiguous()})
    except Exception as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def interpreted():
    """Results of every CASE, from one interpreted child process."""
    triton_interp.require_triton(B, "Triton interpreter tests need triton")
    return triton_interp.run(CHILD, CASES, timeout=600)


def _case_id(case):
    dt, m, n, k, lda, ldb, variant = case
    return f"{dt}-{m}x{n}x{k}-lda{lda}-ldb{ldb}-{variant}"


@pytest.mark.parametrize("index", range(len(CASES)), ids=[_case_id(c) for c in CASES])
def test_triton_variant_matches_float64_reference_under_interpreter(interpreted, index):
    dt, m, n, k, lda, ldb, variant = CASES[index]
    res = interpreted[index]
    assert "error" not in res, res["error"]
    assert res["dtype"] == f"torch.{dt}" and res["shape"] == [m, n] and res["contiguous"]
    assert res["err"] <= TOL[dt], f"max rel err {res['err']:.3g} > {TOL[dt]}"


# -- variant rules (pure functions) -------------------------------------------------------------

H200_SMS = 132


def test_triton_auto_is_left_to_autotune_on_the_gpu_and_is_the_big_tile_off_it():
    assert B.triton_config(4096, 4096, 4096, H200_SMS) is None
    cfg = B.triton_config(100, 100, 100, 1, on_gpu=False)
    assert (cfg["variant"], cfg["bm"], cfg["bn"], cfg["bk"]) == ("128x256x64", 128, 256, 64)


def test_triton_named_tiles_and_masked_k_only_when_k_is_ragged():
    assert B.triton_config(4096, 4096, 4096, H200_SMS, "256x128x64") == {
        "variant": "256x128x64", "bm": 256, "bn": 128, "bk": 64, "num_warps": 8, "num_stages": 3,
        "even_k": True, "grid": 16 * 32}
    assert B.triton_config(129, 257, 65, H200_SMS, "128x128x64")["even_k"] is False


@pytest.mark.parametrize("config", [
    lambda m, n, v: B.triton_config(m, n, 64, H200_SMS, v),
    lambda m, n, v: B.cutile_config(m, n, H200_SMS, v),
])
def test_persistent_grid_is_one_program_per_sm_or_fewer_tiles(config):
    assert config(8192, 8192, "persistent")["grid"] == H200_SMS
    assert config(1000, 1000, "persistent")["grid"] == 8 * 4  # ceil(1000/128) * ceil(1000/256)


def test_cutile_named_variants_and_auto_is_not_planned():
    assert B.cutile_config(4096, 4096, H200_SMS, "128x128x64") == {
        "variant": "128x128x64", "bm": 128, "bn": 128, "bk": 64, "grid": 32 * 32}
    with pytest.raises(ValueError, match="'auto' is tuned on the GPU"):
        B.cutile_config(4096, 4096, H200_SMS, "auto")


@pytest.mark.parametrize("config", [lambda v: B.triton_config(10, 10, 10, 8, v), lambda v: B.cutile_config(10, 10, 8, v)])
def test_unknown_variant_is_rejected(config):
    with pytest.raises(ValueError, match="variant must be one of"):
        config("fastest")


def test_autotune_lists_are_small():
    assert len(B.TRITON_AUTOTUNE) <= 8 and len(B.CUTILE_AUTOTUNE) <= 8


# -- input checks and the registry --------------------------------------------------------------

@pytest.mark.parametrize("a,b,exc,match", [
    (torch.randn(2, 3, 4).half(), torch.randn(4, 2).half(), ValueError, r"a must be \(m, k\)"),
    (torch.randn(2, 4).half(), torch.randn(5, 2).half(), ValueError, r"b \(k, n\)"),
    (torch.randn(2, 4), torch.randn(4, 2), TypeError, "share one dtype"),
    (torch.randn(2, 4).half(), torch.randn(4, 2).bfloat16(), TypeError, "share one dtype"),
    (torch.randn(4, 2).half().t(), torch.randn(4, 2).half(), ValueError, "a's last dim must be contiguous"),
])
def test_bad_inputs_are_rejected_before_any_launch(a, b, exc, match):
    with pytest.raises(exc, match=match):
        B._check_inputs(a, b)


def test_backends_name_the_three_baselines():
    assert B.BACKENDS == {"cutile": B.cutile_matmul, "triton": B.triton_matmul, "torch": B.torch_matmul}


def test_torch_baseline_matches_float64_reference():
    a, b = torch.randn(33, 70)[:, :65].bfloat16(), torch.randn(65, 17).bfloat16()
    assert B.unavailable_reason("torch") is None
    ref = a.double() @ b.double()
    assert ((B.torch_matmul(a, b).double() - ref).abs() / (1 + ref.abs())).max() <= TOL["bfloat16"]


def test_missing_backend_raises_its_reason_when_called(monkeypatch):
    monkeypatch.setattr(B, "ct", None)
    monkeypatch.setattr(B, "_CUTILE_ERROR", ModuleNotFoundError("No module named 'cuda.tile'"))
    with pytest.raises(RuntimeError, match="cuda.tile is not installed"):
        B.cutile_matmul(torch.randn(2, 4).half(), torch.randn(4, 2).half())


# -- cuTile kernels: trace (and compile) without a GPU where cuda.tile is installed ---------------

def _cutile_signatures():
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature
    ct = B.ct

    def arr(dt):
        return ArrayConstraint(dt, 2, index_dtype=ct.int32, stride_lower_bound_incl=0,
                               alias_groups=(), may_alias_internally=False)

    for dt in (ct.bfloat16, ct.float16):
        for kernel in (B._cutile_tiles_kernel, B._cutile_persistent_kernel):
            for bm, bn, bk in ((128, 256, 64), (64, 64, 32)):
                yield kernel, KernelSignature([arr(dt), arr(dt), arr(dt), bm, bn, bk, B.GROUP_M],
                                              CallingConvention.cutile_python_v1())


@pytest.mark.skipif(B.ct is None, reason="cuda.tile is not installed here (kept out of the project venv)")
def test_cutile_kernels_trace_to_tile_ir_bytecode():
    import io
    from cuda.tile.compilation import export_kernel
    for kernel, sig in _cutile_signatures():
        buf = io.BytesIO()
        export_kernel(kernel, [sig], buf, output_format="tileir_bytecode", gpu_code="sm_90", bytecode_version="13.4")
        assert len(buf.getvalue()) > 0


@pytest.mark.skipif(B.ct is None, reason="cuda.tile is not installed here (kept out of the project venv)")
def test_cutile_kernels_compile_for_sm90_with_tileiras():
    if bs.tileiras_missing() is not None:
        pytest.skip(bs.tileiras_missing())
    import io
    from cuda.tile.compilation import export_kernel
    sigs = list(_cutile_signatures())
    for kernel, sig in (sigs[0], sigs[2]):  # bf16 128x256x64: tiles and persistent
        buf = io.BytesIO()
        export_kernel(kernel, [sig], buf, output_format="cubin", gpu_code="sm_90")
        assert buf.getvalue()[:4] == b"\x7fELF"


# -- compiled for sm_90 on the CPU (Triton ships its own ptxas) ---------------------------------
# The interpreter runs kernels as Python and accepts what the compiler rejects (softmax's looped
# kernel read a module global and failed every launch on the H200 while its interpreter tests
# passed), so the kernels are also compiled, here, for the GPU they will run on.

@pytest.mark.parametrize("kernel", ["_triton_matmul_kernel", "_triton_persistent_kernel"])
@pytest.mark.parametrize("even_k", [True, False])
def test_triton_kernels_compile_for_sm90(kernel, even_k):
    triton_interp.require_triton(B)
    from triton.backends.compiler import GPUTarget

    signature = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
                 "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32",
                 "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "GROUP": "constexpr", "EVEN_K": "constexpr"}
    constexprs = {"BM": 128, "BN": 256, "BK": 64, "GROUP": B.GROUP_M, "EVEN_K": even_k}
    src = B.triton.compiler.ASTSource(fn=getattr(B, kernel), signature=signature, constexprs=constexprs)
    compiled = B.triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
    assert "wgmma" in compiled.asm["ptx"] or "mma" in compiled.asm["ptx"]
