"""bmm's tests beyond the generated suite (tilekit.suite adds the test_* to tests/kernels/test_bmm.py),
and BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the CPU
(tilekit.baseline_cases)."""

import torch

from kernels.bmm.spec import SPEC
from kernels.matmul.tests import TRITON_TUNED  # the same candidates (baselines.py takes matmul's)
from kernels.matmul.tests import check_persistent_port
from tilekit import harness
from tilekit.baseline_cases import H200_SMS as SMS
from tilekit.baseline_cases import BaselineCases, Has


def test_op_persistent_grid_strides_over_the_tiles_of_every_product_cutile_rs(cuda):
    """64x64 tiles of 5 products of 600x400 with B shared: 350 tiles for one tile block per SM."""
    check_persistent_port(SPEC, {"batch": 5, "m": 600, "n": 400, "k": 72, "shared": 1, "dtype": "bfloat16"})


def test_op_default_variant_and_out_with_interleaved_batches_cutile_rs(cuda):
    """`variant="default"` (every knob -1), into an out whose rows interleave its batches (an
    attention output (seq, heads, dim) seen as (heads, seq, dim))."""
    cfg = {"batch": 4, "m": 100, "n": 64, "k": 96, "bt": 1, "dtype": "float16"}
    inputs = SPEC.make_inputs(cfg)
    out = torch.full((100, 4, 64), float("nan"), dtype=torch.float16, device="cuda").transpose(0, 1)
    SPEC.run_port(inputs, out=out, variant="default")
    harness.check(SPEC, "cutile_rs", cfg, inputs, out)


NAMED = {  # (bm, bn, Triton's num_warps, num_stages): kernels/matmul/tests.py's
    "128x256x64": (128, 256, 8, 3),
    "256x128x64": (256, 128, 8, 3),
    "128x128x64": (128, 128, 8, 4),
    "persistent": (128, 256, 8, 3),
}


def _triton_autotuned(B) -> tuple:
    tuned = B.gemm._triton_autotuned
    return [(*(c.kwargs[x] for x in ("BM", "BN", "BK")), c.num_warps, c.num_stages) for c in tuned.configs], tuned.keys


f16 = torch.float16
BASELINE_CASES = BaselineCases(
    SPEC,
    # Odd sizes inside one tile, K ragged and K a multiple of BK (the unmasked path), the persistent
    # grid of one program ("one SM" on the CPU) walking every product, each layout.
    interpreted=[
        (dict(batch=q, m=m, n=n, k=k, dtype=dt), v, {})
        for dt in ("float16", "bfloat16")
        for q, m, n, k in ((3, 17, 33, 65), (2, 130, 40, 128))
        for v in ("auto", *NAMED)
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
    ]
    + [  # the named variants at the perf shapes
        p
        for q, m, n, k in (SPEC.dims_of(c).values() for c in SPEC.perf_configs)
        for v, (bm, bn, warps, stages) in NAMED.items()
        for tiles in [q * -(-m // bm) * -(-n // bn)]
        for plan in [dict(variant=v, bm=bm, bn=bn, bk=64, grid=min(tiles, SMS) if v == "persistent" else tiles)]
        for p in (
            ("triton_config", (q, m, n, k, SMS, v), dict(plan, num_warps=warps, num_stages=stages, even_k=k % 64 == 0)),
            ("cutile_config", (q, m, n, SMS, v), plan),
        )
    ],
    plan_errors=[
        ("cutile_config", (16, 2048, 2048, SMS, "auto"), {}, "'auto' is tuned on the GPU"),
        ("triton_config", (2, 10, 10, 10, 8, "fastest"), {}, "variant must be one of"),
        ("cutile_config", (2, 10, 10, 8, "fastest"), {}, "variant must be one of"),
    ],
    triton_compile=[
        (
            "gemm._triton_bmm_kernel",
            "bf16",
            dict(BM=128, BN=256, BK=64, GROUP=8, EVEN_K=even_k, PERSISTENT=persistent),
            opts,
        )
        for persistent in (False, True)
        for even_k in (True, False)
        for opts in [dict(num_warps=8, num_stages=3)]
    ],
    triton_ptx_has="mma",  # tensor-core instructions (wgmma on sm_90)
    cutile_kernels=[
        (kernel, dt, ["A3", "A3", "A3", bm, bn, bk, 8, ta, tb, shared], dt == "bfloat16" and bm == 128)
        for dt in ("bfloat16", "float16")
        for kernel in ("gemm._cutile_tiles_kernel", "gemm._cutile_persistent_kernel")
        for bm, bn, bk, ta, tb, shared in ((128, 128, 64, 0, 0, 0), (64, 64, 32, 0, 1, 1), (128, 256, 64, 1, 1, 0))
    ],
    pinned=[("triton.autotune's configs and key", _triton_autotuned, (list(TRITON_TUNED), ["Q", "M", "N", "K"]), True)],
)
