"""kernels/silu_and_mul/{baselines,spec}.py on the CPU: the Triton kernels under the Triton
interpreter against a float64 reference, the tiling rules, the port's autotune space, input
checks and `unavailable_reason`.

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
from kernels.silu_and_mul import baselines as B
from kernels.silu_and_mul import spec


# (dtype, m, h, row_stride, variant, knobs). Irregular H (1, 1000, 4097), padded rows, row tiles
# that run past m, several column tiles (4097 and the forced 256-wide block), saturating gates.
CASES = [
    (dt, m, h, ld, variant, knobs)
    for dt in ("float32", "float16", "bfloat16")
    for (m, h, ld) in ((3, 1000, 2000), (2, 4097, 8194), (5, 1000, 2080), (1, 1, 2))
    for (variant, knobs) in (("tiled", {}), ("wide", {}), ("row", {}), ("row", {"block": 256}),
                             ("tiled", {"block": 256, "rows": 2}), ("auto", {}))
]
# Error bound: max |y - ref| / (1 + |ref|), a few output ulps of each dtype.
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}

CHILD = triton_interp.PREAMBLE + r"""
from kernels.silu_and_mul import baselines as B
out = []
for dt, m, h, ld, variant, knobs in json.loads(sys.stdin.read()):
    g = torch.Generator().manual_seed(m * 7919 + h)
    x = (2 * torch.randn(m, ld, generator=g)).to(getattr(torch, dt))[:, :2 * h]
    k = min(h, 4)
    x[0, :k] = torch.tensor([-100.0, -30.0, 30.0, 100.0][:k]).to(x.dtype)
    gate, up = x.double()[:, :h], x.double()[:, h:]
    ref = gate * torch.sigmoid(gate) * up
    try:
        y = B.triton_silu_and_mul(x, variant=variant, **knobs)
        err = ((y.double() - ref).abs() / (1 + ref.abs())).max().item()
        out.append({"err": err, "nan": int(torch.isnan(y).sum()), "dtype": str(y.dtype), "shape": list(y.shape),
                    "contiguous": y.is_contiguous()})
    except Exception as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def interpreted():
    """Results of every CASE, from one interpreted child process."""
    triton_interp.require_triton(B, "Triton interpreter tests need triton")
    return triton_interp.run(CHILD, CASES)


def _case_id(case):
    dt, m, h, ld, variant, knobs = case
    extra = "".join(f"-{k}{v}" for k, v in knobs.items())
    return f"{dt}-{m}x{h}-ld{ld}-{variant}{extra}"


@pytest.mark.parametrize("index", range(len(CASES)), ids=[_case_id(c) for c in CASES])
def test_triton_variant_matches_float64_reference_under_interpreter(interpreted, index):
    dt, m, h, ld, variant, knobs = CASES[index]
    res = interpreted[index]
    assert "error" not in res, res["error"]
    assert res["dtype"] == f"torch.{dt}" and res["shape"] == [m, h] and res["contiguous"]
    assert res["nan"] == 0, f"{res['nan']} NaN outputs (saturating gates must give 0 or the identity)"
    assert res["err"] <= TOL[dt], f"max rel err {res['err']:.3g} > {TOL[dt]}"


# -- tiling rules (pure functions) ----------------------------------------------------------------

@pytest.mark.parametrize("h,block", [(1, 16), (1000, 1024), (4096, 4096), (4097, 512), (6144, 2048),
                                     (14336, 2048), (11008, 4096), (16384, 4096)])
def test_tile_width_is_the_row_up_to_4096_then_the_widest_tile_padding_at_most_an_eighth(h, block):
    assert B.tile_width(h) == block == spec.default_block(h)
    if h > 4096:
        assert -(-h // block) * block * 8 <= h * 9


def test_perf_configs_get_4k_element_tiles_with_no_padding():
    assert B.config(65536, 4096) == {"variant": "tiled", "block": 4096, "rows": 1, "grid": 65536}
    assert B.config(16384, 14336) == {"variant": "tiled", "block": 2048, "rows": 2, "grid": 8192 * 7}
    assert B.config(16384, 14336, "wide") == {"variant": "wide", "block": 2048, "rows": 4, "grid": 4096 * 7}


def test_row_variant_is_one_program_per_row_with_a_chunk_of_at_most_4096():
    assert B.config(100, 14336, "row") == {"variant": "row", "block": 4096, "rows": 1, "grid": 100}
    assert B.config(100, 1000, "row")["block"] == 1024


def test_rows_never_exceed_m_rounded_up_or_64():
    assert B.config(3, 16)["rows"] == 4
    assert B.config(1000, 16)["rows"] == 64
    assert B.config(1000, 16, "tiled", rows=8, block=32) == {"variant": "tiled", "block": 32, "rows": 8, "grid": 125}


def test_unknown_variant_is_rejected():
    with pytest.raises(ValueError, match="variant must be one of"):
        B.config(10, 1000, "fastest")


# -- the port's autotune space (spec.variants) ----------------------------------------------------

@pytest.mark.parametrize("m,h,wide", [(65536, 4096, [(4096, 1), (4096, 2)]), (16384, 14336, [(2048, 2), (2048, 4)])])
def test_port_variants_for_perf_configs_are_the_sweeps_fastest_and_larger_unmasked_tiles(m, h, wide):
    """1024 x 1 at occupancy 8 and 16, 2048 x 1 at 8, 4K- and 8K-element tiles at 4, 2048 x 1
    with 8 warps."""
    assert spec.variants(m, h) == [
        {"block": 1024, "rows": 1, "occupancy": 8},
        {"block": 1024, "rows": 1, "occupancy": 16},
        {"block": 2048, "rows": 1, "occupancy": 8},
        {"block": wide[0][0], "rows": wide[0][1], "occupancy": 4},
        {"block": wide[1][0], "rows": wide[1][1], "occupancy": 4},
        {"block": 2048, "rows": 1, "occupancy": 8, "warps": 8},
    ]


@pytest.mark.parametrize("m,h", [(1, 1), (3, 1000), (257, 4097), (4096, 4096), (1000, 14336), (65536, 4096), (37, 16)])
def test_port_variants_are_few_distinct_valid_and_start_with_the_default(m, h):
    vs = spec.variants(m, h)
    assert 1 <= len(vs) <= 8
    assert len({tuple(sorted(v.items())) for v in vs}) == len(vs)
    for v in vs:
        b, r = v["block"], v["rows"]
        # ffi.rs accepts: powers of two, block in [16, 16384], rows in [1, 256], block*rows <= 16384
        assert b & (b - 1) == 0 and r & (r - 1) == 0 and 16 <= b and 1 <= r <= 64 and b * r <= 16384
        assert v.get("warps", 4) in (4, 8) and 1 <= v["occupancy"] <= 32
    assert vs[0]["occupancy"] == 8 and vs[0]["block"] * vs[0]["rows"] <= 1024


def test_tune_key_keeps_h_and_rounds_m_up_to_a_power_of_two():
    assert spec.tune_key("bfloat16", 16384, 14336) == {"dtype": "bfloat16", "h": 14336, "m_class": 16384}
    assert spec.tune_key("float16", 257, 4097) == {"dtype": "float16", "h": 4097, "m_class": 512}


def test_bytes_moved_reads_x_once_and_writes_out_once():
    assert spec.bytes_moved({"dtype": "bfloat16", "m": 65536, "h": 4096}) == 65536 * (8192 + 4096) * 2
    assert spec.bytes_moved({"dtype": "float32", "m": 3, "h": 5}) == 3 * 15 * 4


def test_make_inputs_pads_rows_and_plants_saturating_gates():
    inp = spec.make_inputs({"dtype": "float16", "m": 4, "h": 6, "row_stride": 16}, device="cpu", seed=1)
    x = inp["x"]
    assert x.shape == (4, 12) and x.stride() == (16, 1) and x.dtype == torch.float16
    assert x[0, :4].tolist() == [-100.0, -30.0, 30.0, 100.0]
    ref = spec.reference(inp)
    assert ref.dtype == torch.float64 and ref.shape == (4, 6)
    assert ref[0, 0].item() == pytest.approx(-100 * torch.sigmoid(torch.tensor(-100.0, dtype=torch.float64)).item() * x[0, 6].item())


def test_torch_baseline_matches_float64_reference():
    x = (2 * torch.randn(5, 2080))[:, :2000]
    ref = spec.reference({"x": x})
    assert B.unavailable_reason("torch") is None
    torch.testing.assert_close(B.torch_silu_and_mul(x).double(), ref, rtol=1e-5, atol=1e-5)


# -- input checks and the registry --------------------------------------------------------------

@pytest.mark.parametrize("x,exc,match", [
    (torch.randn(2, 3, 4), ValueError, "must be 2-D"),
    (torch.randn(2, 5), ValueError, "must be even"),
    (torch.randn(2, 4, dtype=torch.float64), TypeError, "must be one of"),
    (torch.randn(4, 2).t(), ValueError, "last dim must be contiguous"),
])
def test_bad_inputs_are_rejected_before_any_launch(x, exc, match):
    with pytest.raises(exc, match=match):
        B._check_inputs(x)


def test_backends_name_the_three_baselines():
    assert B.BACKENDS == {"cutile": B.cutile_silu_and_mul, "triton": B.triton_silu_and_mul, "torch": B.torch_silu_and_mul}


def test_missing_backend_raises_its_reason_when_called(monkeypatch):
    monkeypatch.setattr(B, "ct", None)
    monkeypatch.setattr(B, "_CUTILE_ERROR", ModuleNotFoundError("No module named 'cuda.tile'"))
    with pytest.raises(RuntimeError, match="cuda.tile is not installed"):
        B.cutile_silu_and_mul(torch.randn(2, 4))


# -- cuTile kernels: trace (and compile) without a GPU where cuda.tile is installed ---------------

def _cutile_signatures():
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature
    ct = B.ct

    def arr(dt):
        return ArrayConstraint(dt, 2, index_dtype=ct.int32, stride_lower_bound_incl=0,
                               alias_groups=(), may_alias_internally=False)

    for dt in (ct.bfloat16, ct.float16, ct.float32):
        arrays = [arr(dt), arr(dt), arr(dt)]
        yield B._cutile_kernel("tiled", B.CUTILE_OCCUPANCY), KernelSignature(arrays + [2, 2048], CallingConvention.cutile_python_v1())
        yield B._cutile_kernel("wide", -1), KernelSignature(arrays + [4, 2048], CallingConvention.cutile_python_v1())
        yield B._cutile_kernel("row", B.CUTILE_OCCUPANCY), KernelSignature(arrays + [4096], CallingConvention.cutile_python_v1())


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
    for kernel, sig in list(_cutile_signatures())[:3]:  # one dtype, every kernel
        buf = io.BytesIO()
        export_kernel(kernel, [sig], buf, output_format="cubin", gpu_code="sm_90")
        assert buf.getvalue()[:4] == b"\x7fELF"
