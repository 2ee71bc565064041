"""layer_norm's tests beyond the generated suite: the variance of rows with a large mean (GPU), and
BASELINE_CASES, what tests/kit/test_baselines.py checks of baselines.py on the CPU
(tilekit.runtime.baseline_cases)."""

import pytest
import torch

from kernels.layer_norm import op
from kernels.layer_norm.spec import EPS, SPEC, reference
from tilekit.testing import harness
from tilekit.runtime.baseline_cases import H200_SMS as SMS
from tilekit.runtime.baseline_cases import (
    NORM_FORMS,
    norm_triton_compile,
    ROW_ERRORS,
    BaselineCases,
    row_interpreted,
    row_plans,
)


@pytest.mark.parametrize(
    "m,n,block,rows,programs_per_sm",
    [
        (64, 1000, 1024, 4, 0),
        (64, 1000, 1024, 4, 2),
        (64, 4096, 4096, 2, 0),
        (16, 16384, 4096, 2, 0),
        (9, 11008, 4096, 2, 0),
    ],
)
def test_op_large_mean_rows_keep_their_variance_cutile_rs(cuda, m, n, block, rows, programs_per_sm):
    """x = 1000 + N(0, 1) in f32, for the whole-row entries (two passes), the persistent one and the
    looped ones (shifted sums; partition and masked). E[x^2] - mean^2 in f32 would get var ~1 from
    two numbers ~1e6 apart by less than their rounding error (~0.06 each): rel. errors of percents."""
    x = 1000 + torch.randn(m, n, device="cuda")
    variant = {"block": block, "rows": rows, "occupancy": -1, "programs_per_sm": programs_per_sm}
    y = op.layer_norm(x, None, None, EPS, variant=variant)
    inputs = {"x": x, "weight": None, "bias": None, "eps": EPS}
    harness.check_close(y, reference(inputs), (5e-4, 5e-3), f"large mean {m}x{n} {variant}")


BASELINE_CASES = BaselineCases(
    SPEC,
    interpreted=row_interpreted({"m": 2, "n": 100, "absent": "weight_bias"}),
    torch_case=({"m": 5, "n": 1000, "row_stride": 1040, "dtype": "float32"}, 1e-5),
    bad_inputs=[
        ((torch.randn(2, 3, 4), None, None), ValueError, "must be 2-D"),
        ((torch.randn(2, 4), torch.randn(5), None), ValueError, r"w must be None or have shape \(4,\)"),
        ((torch.randn(2, 4), None, torch.randn(4).double()), TypeError, "b must be None .* share one dtype"),
        ((torch.randn(4, 2).t(), None, None), ValueError, "last dim must be contiguous"),
    ],
    plans=row_plans(
        auto={  # the perf shapes' (rms_norm's rules; not yet timed on the H200)
            (32768, 8192): (("looped", 4096, 1, 32768, 8), ("multirow", 8192, 4, SMS)),
            (65536, 768): (("looped", 1024, 1, 65536, 4), ("multirow", 1024, 16, SMS)),
            (16384, 5120): (("looped", 4096, 1, 16384, 8), ("multirow", 8192, 4, SMS)),
            (256, 4096): (("looped", 4096, 1, 256, 8), ("row", 4096, 1, 256)),
        },
        **NORM_FORMS,
    ),
    plan_errors=ROW_ERRORS,
    triton_compile=norm_triton_compile(True),
    triton_types={"eps": "fp32"},
    cutile_kernels=[  # W, B: (1, n)
        (f"norm_baselines._cutile_{form}_kernel", dt, ["A2", "A2", "A2", "A2", EPS, 1, *tile], dt == "bfloat16")
        for dt in ("float16", "bfloat16", "float32")
        for form, tile in (("rows", (16, 1024)), ("looped", (4096,)))
    ],
)
