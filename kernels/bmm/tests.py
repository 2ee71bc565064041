"""bmm's tests beyond the generated suite (tilekit.testing.suite adds the test_* to tests/kernels/test_bmm.py),
and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the CPU
(tilekit.runtime.baseline_cases)."""

import torch

from kernels.bmm.spec import SPEC
from tilekit.runtime import mma
from tilekit.testing import harness
from tilekit.runtime.baseline_cases import H200_SMS as SMS
from tilekit.runtime.baseline_cases import GEMM_NAMED, Has, gemm_cases


def test_op_persistent_grid_strides_over_the_tiles_of_every_product_cutile_rs(cuda):
    """64x64 tiles of 5 products of 600x400 with B shared: 350 tiles for one tile block per SM."""
    cfg = {"batch": 5, "m": 600, "n": 400, "k": 72, "shared": 1, "dtype": "bfloat16"}
    harness.check_variant(SPEC, cfg, SPEC.make_inputs(cfg), mma.variant(64, 64, 32, persistent=True, group=4))


def test_op_default_variant_and_out_with_interleaved_batches_cutile_rs(cuda):
    """`variant="default"` (every knob -1), into an out whose rows interleave its batches (an
    attention output (seq, heads, dim) seen as (heads, seq, dim))."""
    cfg = {"batch": 4, "m": 100, "n": 64, "k": 96, "bt": 1, "dtype": "float16"}
    inputs = SPEC.make_inputs(cfg)
    out = torch.full((100, 4, 64), float("nan"), dtype=torch.float16, device="cuda").transpose(0, 1)
    SPEC.run_port(inputs, out=out, variant="default")
    harness.check(SPEC, "cutile_rs", cfg, inputs, out)


def test_op_into_a_column_slice_cutile_rs(cuda):
    """out a column slice of a NaN-poisoned buffer, 257 of 264 bf16 columns (rows whole 16-byte
    units, out's not): the products are right and the columns past out stay NaN (C_TMA false: an
    H100's TMA store wrote to the 16-byte unit's end; kernels/matmul/NOTES.md, "Third GPU run")."""
    cfg = {"batch": 2, "m": 129, "n": 257, "k": 65, "dtype": "bfloat16"}
    inputs = SPEC.make_inputs(cfg)
    out = torch.full((2, 129, 264), float("nan"), dtype=torch.bfloat16, device="cuda")[..., :257]
    SPEC.run_port(inputs, out=out, variant="default")
    harness.check(SPEC, "cutile_rs", cfg, inputs, out)
    harness.check_padding_untouched(out, "a store past out's columns")


f16 = torch.float16
BASELINE_CASES = gemm_cases(
    SPEC,
    # compiled for sm_90: (bm, bn, bk, TRANS_A, TRANS_B, SHARED_B)
    [(128, 128, 64, 0, 0, 0), (64, 64, 32, 0, 1, 1), (128, 256, 64, 1, 1, 0)],
    # Odd sizes inside one tile, K ragged and K a multiple of BK (the unmasked path), the persistent
    # grid of one program ("one SM" on the CPU) walking every product, each layout.
    interpreted=[
        (dict(batch=q, m=m, n=n, k=k, dtype=dt), v, {})
        for dt in ("float16", "bfloat16")
        for q, m, n, k in ((3, 17, 33, 65), (2, 130, 40, 128))
        for v in ("auto", *GEMM_NAMED)
    ]
    + [(dict(batch=3, m=65, n=40, k=70, bt=1, dtype="bfloat16"), v, {}) for v in ("auto", "persistent")]
    + [(dict(batch=2, m=33, n=17, k=65, at=1, bt=1, dtype="float16"), "128x128x64", {})]
    + [(dict(batch=4, m=33, n=40, k=50, shared=1, dtype="float16"), v, {}) for v in ("128x128x64", "persistent")]
    + [(dict(batch=3, m=20, n=24, k=40, ai=1, shared=1, bt=1, dtype="bfloat16"), "128x128x64", {})],
    torch_case=({"batch": 3, "m": 33, "n": 17, "k": 65, "shared": 1, "dtype": "bfloat16"}, 1.6e-2),
    bad_inputs=[
        ((torch.randn(3, 4).half(), torch.randn(4, 2).half()), ValueError, r"a must be \(batch, m, k\)"),
        ((torch.randn(2, 3, 4).half(), torch.randn(3, 4, 2).half()), ValueError, r"b \(batch, k, n\)"),
        ((torch.randn(2, 3, 4).half(), torch.randn(2, 5, 2).half()), ValueError, r"b \(batch, k, n\)"),
        ((torch.randn(2, 3, 4), torch.randn(2, 4, 2)), TypeError, "share one dtype"),
        ((torch.randn(2, 3, 4, dtype=f16), torch.randn(2, 4, 2).bfloat16()), TypeError, "share one dtype"),
        ((torch.randn(2, 6, 8, dtype=f16)[:, ::2, ::2], torch.randn(2, 4, 2, dtype=f16)), ValueError, "middle dim"),
    ],
    plans=[
        ("triton_config", (16, 2048, 2048, 2048, SMS), None),  # auto: triton.autotune on the GPU
        ("triton_config", (2, 100, 100, 100, 1), {"on_gpu": False}, Has(variant="128x256x64", grid=2)),
        ("triton_config", (3, 129, 257, 65, SMS, "128x128x64"), Has(even_k=False, grid=3 * 2 * 3)),
        # persistent: one program per SM, or fewer tiles (3 products of ceil(1000 / 128) * ceil(300 / 256))
        ("triton_config", (16, 2048, 2048, 64, SMS, "persistent"), Has(grid=SMS)),
        ("triton_config", (3, 1000, 300, 64, SMS, "persistent"), Has(grid=3 * 8 * 2)),
        ("cutile_config", (3, 1000, 300, SMS, "persistent"), Has(grid=3 * 8 * 2)),
    ],
)
