"""rms_norm's tests beyond the generated suite: BASELINE_CASES, what tests/kit/test_baselines.py
checks of baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import torch

from kernels.rms_norm.spec import EPS, SPEC
from tilekit.runtime.baseline_cases import H200_SMS as SMS
from tilekit.runtime.baseline_cases import (
    NORM_FORMS,
    norm_triton_compile,
    ROW_ERRORS,
    BaselineCases,
    Has,
    row_interpreted,
)
from tilekit.runtime.baseline_cases import row_plans, tile_plan

BASELINE_CASES = BaselineCases(
    SPEC,
    interpreted=row_interpreted(),
    torch_case=({"m": 5, "n": 1000, "row_stride": 1040, "dtype": "float32"}, 1e-5),
    bad_inputs=[
        ((torch.randn(2, 3, 4), torch.randn(4)), ValueError, "must be 2-D"),
        ((torch.randn(2, 4), torch.randn(5)), ValueError, r"w must have shape \(4,\)"),
        ((torch.randn(2, 4), torch.randn(4, dtype=torch.float64)), TypeError, "share one dtype"),
        ((torch.randn(4, 2).t(), torch.randn(4)), ValueError, "last dim must be contiguous"),
    ],
    plans=row_plans(
        auto={  # the perf shapes' (the committed H200 results were timed with these)
            (262144, 1024): (("looped", 1024, 1, 262144, 4), ("multirow", 1024, 16, SMS)),
            (262144, 2048): (("looped", 2048, 1, 262144, 4), ("multirow", 2048, 4, SMS)),
            (262144, 4096): (("looped", 4096, 1, 262144, 8), ("multirow", 4096, 4, SMS)),
            (65536, 8192): (("looped", 4096, 1, 65536, 8), ("multirow", 8192, 4, SMS)),
            (65536, 16384): (("looped", 4096, 1, 65536, 8), ("multirow", 16384, 2, SMS)),
        },
        **NORM_FORMS,
    )
    + [  # multirow: persistent, one weight load per program
        ("triton_config", (262144, 1024, SMS, "multirow"), tile_plan("multirow", 1024, 8, 2 * SMS, 16)),
        ("cutile_config", (300, 16384, SMS), Has(rows=2)),
    ],
    plan_errors=ROW_ERRORS,
    triton_compile=norm_triton_compile(False),
    triton_types={"eps": "fp32"},
    cutile_kernels=[
        (f"norm_baselines._cutile_{form}_kernel", dt, ["A2", "A2", "A2", "A2", EPS, 0, *tile], dt == "float16")
        for dt in ("float16", "bfloat16", "float32")
        for form, tile in (("rows", (16, 1024)), ("looped", (4096,)))
    ],
)
