"""swiglu's tests beyond the generated suite (tilekit.testing.suite adds the test_* to
tests/kernels/test_swiglu.py): 3-D inputs on the GPU; and BASELINE_CASES, what
tests/kit/test_baselines.py checks of baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import torch

from kernels.swiglu.spec import SPEC
from tilekit.testing import harness
from tilekit.runtime.baseline_cases import DTYPES, H200_SMS, BaselineCases, Has, tile_plan


def test_op_3d_inputs_cutile_rs(cuda):
    """Leading dims are flattened: (b, s, H) -> (b, s, H), b a column slice of a wider buffer."""
    a = 2 * torch.randn(3, 5, 300, device=cuda, dtype=torch.bfloat16)
    b = torch.randn(3, 5, 320, device=cuda, dtype=torch.bfloat16)[..., :300]
    y = SPEC.entry(a, b)
    assert y.shape == (3, 5, 300)
    ref = SPEC.reference({"a": a.reshape(15, 300), "b": b.reshape(15, 300)}).reshape(3, 5, 300)
    harness.check_close(y, ref, SPEC.tolerance["bfloat16"], "cutile_rs 3-D")


BASELINE_CASES = BaselineCases(
    SPEC,
    # Irregular H (1, 1000, 4097), a and b in rows of their own strides, row tiles that run past m,
    # several column tiles (4097, and forced 256-wide tiles), saturating gates (SPEC.make_inputs).
    interpreted=[
        (dict(s, dtype=dt), v, k)
        for dt in DTYPES
        for s in (
            {"m": 3, "h": 1000},
            {"m": 2, "h": 4097},
            {"m": 5, "h": 1000, "lda": 1040, "ldb": 1008},
            {"m": 1, "h": 1},
        )
        for v, k in (("tiled", {}), ("wide", {}), ("auto", {}), ("tiled", {"block": 256, "rows": 2}))
    ],
    torch_case=({"m": 5, "h": 1000, "lda": 1040, "ldb": 1008, "dtype": "float32"}, 1e-5),
    bad_inputs=[
        ((torch.randn(2, 3, 4), torch.randn(2, 3, 4)), ValueError, "a must be 2-D"),
        ((torch.randn(2, 4), torch.randn(2, 5)), ValueError, "one shape and dtype"),
        ((torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 4)), TypeError, "must be one of"),
        ((torch.randn(2, 4), torch.randn(4, 2).t()), ValueError, "b's last dim must be contiguous"),
    ],
    plans=[
        # the perf configs' auto plans (silu_and_mul's tiles: ~4K elements, padding at most 1/8)
        *(
            ("cutile_config", (m, h, H200_SMS), tile_plan("tiled", block, rows, m // rows * -(-h // block)))
            for m, h, block, rows in ((16384, 11008, 4096, 1), (16384, 13824, 2048, 2), (16384, 14336, 2048, 2))
            + ((16384, 18944, 4096, 1), (65536, 4096, 4096, 1), (256, 14336, 2048, 2), (4096, 14336, 2048, 2))
        ),
        ("triton_config", (16384, 11008, H200_SMS), tile_plan("tiled", 4096, 1, 16384 * 3, 16)),
        ("cutile_config", (16384, 14336, H200_SMS, "wide"), tile_plan("wide", 2048, 4, 4096 * 7)),
        ("cutile_config", (3, 16, H200_SMS), Has(rows=4)),
    ],
    plan_errors=[
        (fn, (10, 1000, H200_SMS, v), {}, "swiglu baseline: variant must be one of")
        for fn in ("triton_config", "cutile_config")
        for v in ("row", "fastest")
    ],
    triton_compile=[("gated_baselines.split_tiled_kernel", "bf16", {"ACT": 0, "ROWS": 2, "BLOCK": 2048})],
    # silu_and_mul's kernels (its cases compile every dtype), here on the two arrays a and b
    cutile_kernels=[
        (("gated_baselines.cutile_kernel", (variant, 4)), "bfloat16", ["A2", "A2", "A2", 0, rows, 2048], True)
        for variant, rows in (("tiled", 2), ("wide", 4))
    ],
    pinned=[("CUTILE_OCCUPANCY", lambda B: B.CUTILE_OCCUPANCY, 4, False)],
)
