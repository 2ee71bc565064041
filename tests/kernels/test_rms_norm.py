"""rms_norm suites: correctness (`test_op*`) and CUPTI performance (`test_perf`) of the cuTile
Rust port (`cutile_rs`) and its baselines (`cutile_py`, `triton`, `torch`).

    make KERNEL=rms_norm test        # pytest -k "cutile_rs and test_op"
    make KERNEL=rms_norm perf        # pytest -k "cutile_rs and test_perf" --print-record
    make KERNEL=rms_norm baseline    # the same test_perf for each baseline
"""
import re

import pytest
import torch

from kernels.rms_norm import spec
from tilekit import harness

KERNEL = spec.KERNEL


def implementation(backend_id):
    return harness.implementation(spec, backend_id)


def check(backend_id, cfg, inputs, y):
    harness.check(spec, backend_id, cfg, inputs, y)


def shape_id(shape):
    return f"{shape['m']}x{shape['n']}" + (f"ld{shape['row_stride']}" if "row_stride" in shape else "")


CORRECTNESS = [pytest.param(b, dict(s, dtype=d), id=f"{b}-{shape_id(s)}-{d}")
               for b in harness.BACKEND_IDS for s in spec.CORRECTNESS_SHAPES for d in spec.DTYPES]


@pytest.mark.parametrize("backend_id,cfg", CORRECTNESS)
def test_op(cuda, backend_id, cfg):
    fn = implementation(backend_id)
    inputs = spec.make_inputs(cfg)
    out = torch.full(inputs["x"].shape, float("nan"), dtype=inputs["x"].dtype, device=cuda)  # poisoned
    y = fn(inputs, out)
    torch.cuda.synchronize()
    if backend_id == "cutile_rs":
        assert y is out, "the port must write the caller's out tensor"
    check(backend_id, cfg, inputs, y)


VARIANT_SHAPES = [{"m": 37, "n": 1000, "dtype": "float16"}, {"m": 19, "n": 8195, "dtype": "bfloat16"}]


@pytest.mark.parametrize("cfg", VARIANT_SHAPES, ids=lambda c: f"{c['m']}x{c['n']}-{c['dtype']}")
def test_op_every_variant_cutile_rs(cuda, cfg):
    """Autotune may pick any candidate variant, so each one must be right."""
    inputs = spec.make_inputs(cfg)
    for v in spec.variants(cfg["m"], cfg["n"]):
        out = torch.full(inputs["x"].shape, float("nan"), dtype=inputs["x"].dtype, device=cuda)
        spec.run_port(inputs, out=out, variant=v)
        check("cutile_rs", dict(cfg, variant=v), inputs, out)


BAD_INPUTS = {
    "dtype_mix": (lambda: (torch.randn(4, 8, dtype=torch.float16), torch.randn(8)), TypeError, "share one dtype"),
    "weight_shape": (lambda: (torch.randn(4, 8), torch.randn(7)), ValueError, "weight must be (8,)"),
    "cpu_tensor": (lambda: (torch.randn(4, 8), torch.randn(8)), ValueError, "CUDA device"),
    "last_dim_stride": (lambda: (torch.randn(8, 4).t(), torch.randn(8)), ValueError, "contiguous in its last dim"),
    "float64": (lambda: (torch.randn(4, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)), TypeError, "share one dtype"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=lambda c: f"cutile_rs-{c}")
def test_op_bad_input_cutile_rs(case):
    """Rejected in Python before the GPU is touched, with a message that says what to fix (runs on
    CPU tensors, so also on machines without a GPU)."""
    from kernels.rms_norm.op import rms_norm

    make, exc, needle = BAD_INPUTS[case]
    x, w = make()
    with pytest.raises(exc, match=re.escape(needle)):
        rms_norm(x, w)


PERF = [pytest.param(b, c, id=f"{b}-{c['m']}-{c['n']}-{c['dtype']}") for b in harness.BACKEND_IDS for c in spec.PERF_CONFIGS]


@pytest.mark.parametrize("backend_id,cfg", PERF)
def test_perf(cuda, request, backend_id, cfg):
    fn = implementation(backend_id)
    inputs = spec.make_inputs(cfg)
    check(backend_id, cfg, inputs, fn(inputs))  # a fast wrong answer is not a result
    harness.run_perf(request, kernel=KERNEL, backend_id=backend_id, cfg=cfg, call=lambda: fn(inputs),
                     bytes_moved=spec.bytes_moved(cfg))
