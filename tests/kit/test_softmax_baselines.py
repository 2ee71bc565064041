"""kernels/softmax/baselines.py on the CPU: the Triton kernels under the Triton interpreter
against a float64 reference, the variant heuristics, input checks and `unavailable_reason`.

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
from kernels.softmax import baselines as B


# (dtype, m, n, row_stride, masked, variant, knobs). Irregular n (1000, 4097), padded rows, a row
# tile that runs past m, persistent programs that loop (one "SM" on the CPU), several column
# tiles, a looped tile wider than the row, and masked (-inf) logits with a ragged kept prefix.
CASES = [
    (dt, m, n, ld, masked, variant, knobs)
    for dt in ("float32", "float16", "bfloat16")
    for (m, n, ld, masked) in ((3, 1000, 1000, False), (2, 4097, 4097, False), (5, 1000, 1040, False),
                               (1, 1, 1, False), (4, 3000, 3000, True))
    for (variant, knobs) in (("row", {}), ("multirow", {}), ("multirow", {"rows": 2, "ctas_per_sm": 2}),
                             ("looped", {}), ("looped", {"block": 256}), ("auto", {}))
] + [("float32", 2, 20000, 20000, False, "auto", {})]
# Error bound: max |y - ref| / (1 + |ref|), a few output ulps of each dtype.
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}

CHILD = triton_interp.PREAMBLE + r"""
from kernels.softmax import baselines as B
out = []
for dt, m, n, ld, masked, variant, knobs in json.loads(sys.stdin.read()):
    g = torch.Generator().manual_seed(m * 7919 + n)
    shift = 200 * (2 * torch.rand(m, 1, generator=g) - 1)  # a naive exp overflows in f32
    x = (2 * torch.randn(m, ld, generator=g) + shift).to(getattr(torch, dt))[:, :n]
    keep = torch.ones(m, n, dtype=torch.bool)
    if masked:
        cols = torch.arange(n)
        keep = (cols[None, :] <= (torch.arange(m)[:, None] * 997) % n) & (cols[None, :] % 5 != 1)
        x = x.masked_fill(~keep, float("-inf"))
    ref = torch.softmax(x.double(), dim=-1)
    try:
        y = B.triton_softmax(x, variant=variant, **knobs)
        err = ((y.double() - ref).abs() / (1 + ref.abs())).max().item()
        out.append({"err": err, "dtype": str(y.dtype), "shape": list(y.shape), "contiguous": y.is_contiguous(),
                    "masked_nonzero": int((y[~keep] != 0).sum())})
    except Exception as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def interpreted():
    """Results of every CASE, from one interpreted child process."""
    triton_interp.require_triton(B, "Triton interpreter tests need triton")
    return triton_interp.run(CHILD, CASES, python_args=("-W", "ignore"), timeout=600)


def _case_id(case):
    dt, m, n, ld, masked, variant, knobs = case
    extra = "".join(f"-{k}{v}" for k, v in knobs.items())
    return f"{dt}-{m}x{n}-ld{ld}{'-masked' if masked else ''}-{variant}{extra}"


@pytest.mark.parametrize("index", range(len(CASES)), ids=[_case_id(c) for c in CASES])
def test_triton_variant_matches_float64_reference_under_interpreter(interpreted, index):
    dt, m, n, ld, masked, variant, knobs = CASES[index]
    res = interpreted[index]
    assert "error" not in res, res["error"]
    assert res["dtype"] == f"torch.{dt}" and res["shape"] == [m, n] and res["contiguous"]
    assert res["err"] <= TOL[dt], f"max rel err {res['err']:.3g} > {TOL[dt]}"
    assert res["masked_nonzero"] == 0, "masked (-inf) logits must give exactly 0"


# -- variant heuristics (pure functions) --------------------------------------------------------

H200_SMS = 132


@pytest.mark.parametrize("m,n,expected", [
    (65536, 1024, "row"), (65536, 4096, "row"), (65536, 8192, "row"), (65536, 16384, "row"),
    (64, 512, "row"), (1024, 16385, "looped"), (1024, 32768, "looped"),
])
def test_triton_auto_picks_variant_by_shape(m, n, expected):
    assert B.triton_config(m, n, H200_SMS)["variant"] == expected


@pytest.mark.parametrize("m,n,expected", [
    (65536, 1024, "row"), (65536, 8192, "row"), (200, 4096, "row"), (1024, 32768, "looped"),
])
def test_cutile_auto_picks_variant_by_shape(m, n, expected):
    assert B.cutile_config(m, n, H200_SMS)["variant"] == expected


def test_triton_multirow_is_persistent_over_8k_element_tiles():
    cfg = B.triton_config(65536, 1024, H200_SMS, "multirow")
    assert cfg == {"variant": "multirow", "block": 1024, "rows": 8, "num_warps": 16,
                   "grid": H200_SMS * bs.TRITON_CTAS_PER_SM}


def test_triton_row_holds_the_whole_row_and_scales_warps_with_it():
    assert B.triton_config(4096, 1000, H200_SMS, "row") == {"variant": "row", "block": 1024, "rows": 1, "num_warps": 4, "grid": 4096}
    assert B.triton_config(4096, 4097, H200_SMS, "row")["num_warps"] == 16
    assert B.triton_config(4096, 4096, H200_SMS, "row")["num_warps"] == 8


def test_looped_tiles_are_4096_wide_or_the_whole_row_if_narrower():
    assert B.triton_config(64, 32768, H200_SMS)["block"] == 4096
    assert B.triton_config(64, 1000, H200_SMS, "looped")["block"] == 1024
    assert B.cutile_config(64, 32768, H200_SMS) == {"variant": "looped", "block": 4096, "rows": 1, "grid": 64}


def test_cutile_multirow_grid_is_one_program_per_sm_or_fewer_tiles():
    assert B.cutile_config(65536, 1024, H200_SMS, "multirow") == {"variant": "multirow", "block": 1024, "rows": 16, "grid": H200_SMS}
    assert B.cutile_config(300, 16384, H200_SMS, "multirow")["rows"] == 2
    assert B.cutile_config(40, 1000, H200_SMS, "multirow")["grid"] == 3  # ceil(40 / 16) row tiles


def test_knobs_override_the_heuristics():
    cfg = B.triton_config(100, 5000, 8, "looped", block=512, num_warps=2)
    assert cfg == {"variant": "looped", "block": 512, "rows": 1, "num_warps": 2, "grid": 100}
    assert B.cutile_config(100, 1000, 8, "multirow", rows=4, ctas_per_sm=2)["grid"] == 16


@pytest.mark.parametrize("config", [B.triton_config, B.cutile_config])
def test_whole_row_variants_reject_a_block_narrower_than_the_row(config):
    with pytest.raises(ValueError, match="block=512 < n=1000"):
        config(10, 1000, 8, "row", block=512)


@pytest.mark.parametrize("config", [B.triton_config, B.cutile_config])
def test_unknown_variant_is_rejected(config):
    with pytest.raises(ValueError, match="variant must be one of"):
        config(10, 1000, 8, "fastest")


# -- input checks and the registry --------------------------------------------------------------

@pytest.mark.parametrize("x,exc,match", [
    (torch.randn(2, 3, 4), ValueError, "must be 2-D"),
    (torch.randn(2, 4, dtype=torch.float64), TypeError, "must be one of"),
    (torch.randn(4, 2).t(), ValueError, "last dim must be contiguous"),
])
def test_bad_inputs_are_rejected_before_any_launch(x, exc, match):
    with pytest.raises(exc, match=match):
        B._check_inputs(x)


def test_backends_name_the_three_baselines():
    assert B.BACKENDS == {"cutile": B.cutile_softmax, "triton": B.triton_softmax, "torch": B.torch_softmax}


def test_torch_baseline_matches_float64_reference_on_padded_rows():
    x = (2 * torch.randn(5, 1040) + 150)[:, :1000]
    assert B.unavailable_reason("torch") is None
    torch.testing.assert_close(B.torch_softmax(x).double(), torch.softmax(x.double(), -1), rtol=1e-5, atol=1e-6)


def test_missing_backend_raises_its_reason_when_called(monkeypatch):
    monkeypatch.setattr(B, "ct", None)
    monkeypatch.setattr(B, "_CUTILE_ERROR", ModuleNotFoundError("No module named 'cuda.tile'"))
    with pytest.raises(RuntimeError, match="cuda.tile is not installed"):
        B.cutile_softmax(torch.randn(2, 4))


# -- cuTile kernels: trace (and compile) without a GPU where cuda.tile is installed ---------------

def _cutile_signatures():
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature
    ct = B.ct

    def arr(dt):
        return ArrayConstraint(dt, 2, index_dtype=ct.int32, stride_lower_bound_incl=0,
                               alias_groups=(), may_alias_internally=False)

    for dt in (ct.float16, ct.bfloat16, ct.float32):
        arrays = [arr(dt), arr(dt)]
        yield B._cutile_rows_kernel, KernelSignature(arrays + [16, 1024], CallingConvention.cutile_python_v1())
        yield B._cutile_looped_kernel, KernelSignature(arrays + [4096], CallingConvention.cutile_python_v1())


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
    for kernel, sig in _cutile_signatures():
        buf = io.BytesIO()
        export_kernel(kernel, [sig], buf, output_format="cubin", gpu_code="sm_90")
        assert buf.getvalue()[:4] == b"\x7fELF"


# -- compiled for sm_90 on the CPU (Triton ships its own ptxas) ---------------------------------
# The interpreter runs kernels as Python, so it accepts what the compiler rejects: a plain module
# global read inside @triton.jit failed every looped launch on the H200 (2026-11-29) while the
# interpreter tests above passed.

@pytest.mark.parametrize("kernel,signature,constexprs", [
    ("_triton_looped_kernel", {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32", "stride_x": "i32", "stride_y": "i32",
                               "BLOCK": "constexpr"}, {"BLOCK": 1024}),
    ("_triton_rows_kernel", {"x_ptr": "*bf16", "y_ptr": "*bf16", "m": "i32", "n": "i32", "stride_x": "i32",
                             "stride_y": "i32", "ROWS": "constexpr", "BLOCK": "constexpr"}, {"ROWS": 4, "BLOCK": 1024}),
])
def test_triton_kernels_compile_for_sm90(kernel, signature, constexprs):
    triton_interp.require_triton(B)
    from triton.backends.compiler import GPUTarget

    src = B.triton.compiler.ASTSource(fn=getattr(B, kernel), signature=signature, constexprs=constexprs)
    compiled = B.triton.compile(src, target=GPUTarget("cuda", 90, 32))
    assert compiled.asm["cubin"]
