"""matmul suites: correctness (`test_op*`) and CUPTI performance (`test_perf`) of the cuTile Rust
port (`cutile_rs`) and its baselines (`cutile_py`, `triton`, `torch`).

    make KERNEL=matmul test        # pytest -k "cutile_rs and test_op"
    make KERNEL=matmul perf        # pytest -k "cutile_rs and test_perf" --print-record
    make KERNEL=matmul baseline    # the same test_perf for each baseline
"""
import re

import pytest
import torch

from kernels.matmul import spec
from tilekit import harness

KERNEL = spec.KERNEL


def implementation(backend_id):
    return harness.implementation(spec, backend_id)


def check(backend_id, cfg, inputs, c):
    harness.check(spec, backend_id, cfg, inputs, c)


def shape_id(shape):
    strides = "".join(f"-{key}{shape[key]}" for key in ("lda", "ldb", "ldc") if key in shape)
    return f"{shape['m']}x{shape['n']}x{shape['k']}{strides}"


CORRECTNESS = [pytest.param(b, dict(s, dtype=d), id=f"{b}-{shape_id(s)}-{d}")
               for b in harness.BACKEND_IDS for s in spec.CORRECTNESS_SHAPES for d in spec.DTYPES]


@pytest.mark.parametrize("backend_id,cfg", CORRECTNESS)
def test_op(cuda, backend_id, cfg):
    fn = implementation(backend_id)
    inputs = spec.make_inputs(cfg)
    out = spec.make_out(cfg, inputs)  # NaN-poisoned, a column slice when the config has ldc
    c = fn(inputs, out)
    torch.cuda.synchronize()
    if backend_id == "cutile_rs":
        assert c is out, "the port must write the caller's out tensor"
    check(backend_id, cfg, inputs, c)


# 129x257x65: ragged on every dim, few tiles (the small-problem variant list). 2176x1920x320:
# the large-problem list (136 tiles of 128x256, so the persistent variant loops on an H200), a
# ragged N edge, and every dim a multiple of 16 like 4096^3, so the JIT'd variants are reused.
VARIANT_SHAPES = [{"m": 129, "n": 257, "k": 65, "dtype": "bfloat16"}, {"m": 2176, "n": 1920, "k": 320, "dtype": "float16"}]


@pytest.mark.parametrize("cfg", VARIANT_SHAPES, ids=lambda c: f"{shape_id(c)}-{c['dtype']}")
def test_op_every_variant_cutile_rs(cuda, cfg):
    """Autotune may pick any candidate variant, so each one must be right."""
    inputs = spec.make_inputs(cfg)
    for v in spec.variants(cfg["m"], cfg["n"], cfg["k"]):
        out = spec.make_out(cfg, inputs)
        spec.run_port(inputs, out=out, variant=v)
        check("cutile_rs", dict(cfg, variant=v), inputs, out)


def test_op_persistent_grid_strides_over_more_tiles_than_programs_cutile_rs(cuda):
    """64x64 tiles of a 1000x1100 output: 288 tiles for one tile block per SM, each walks several."""
    cfg = {"m": 1000, "n": 1100, "k": 520, "dtype": "bfloat16"}
    inputs = spec.make_inputs(cfg)
    out = spec.make_out(cfg, inputs)
    v = {"bm": 64, "bn": 64, "bk": 32, "group": 4, "persistent": True, "occupancy": 1, "cga": 1}
    spec.run_port(inputs, out=out, variant=v)
    check("cutile_rs", dict(cfg, variant=v), inputs, out)


def test_op_default_variant_cutile_rs(cuda):
    """`variant="default"` (every knob -1: ffi.rs's defaults) is a valid launch."""
    cfg = {"m": 300, "n": 500, "k": 200, "dtype": "float16"}
    inputs = spec.make_inputs(cfg)
    out = spec.make_out(cfg, inputs)
    spec.run_port(inputs, out=out, variant="default")
    check("cutile_rs", cfg, inputs, out)


BAD_INPUTS = {
    "dtype_mix": (lambda: (torch.randn(4, 8, dtype=torch.float16), torch.randn(8, 3, dtype=torch.bfloat16)), TypeError, "share one dtype"),
    "inner_dim": (lambda: (torch.randn(4, 8, dtype=torch.float16), torch.randn(7, 3, dtype=torch.float16)), ValueError, "a must be (m, k) and b (k, n)"),
    "cpu_tensor": (lambda: (torch.randn(4, 8, dtype=torch.float16), torch.randn(8, 3, dtype=torch.float16)), ValueError, "CUDA device"),
    "last_dim_stride": (lambda: (torch.randn(8, 4, dtype=torch.float16).t(), torch.randn(8, 3, dtype=torch.float16)), ValueError, "a must be contiguous in its last dim"),
    "float32": (lambda: (torch.randn(4, 8), torch.randn(8, 3)), TypeError, "share one dtype"),
    "batched": (lambda: (torch.randn(2, 4, 8, dtype=torch.float16), torch.randn(8, 3, dtype=torch.float16)), ValueError, "a must be (m, k)"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=lambda c: f"cutile_rs-{c}")
def test_op_bad_input_cutile_rs(case):
    """Rejected in Python before the GPU is touched, with a message that says what to fix (runs on
    CPU tensors, so also on machines without a GPU)."""
    from kernels.matmul.op import matmul

    make, exc, needle = BAD_INPUTS[case]
    a, b = make()
    with pytest.raises(exc, match=re.escape(needle)):
        matmul(a, b)


PERF = [pytest.param(b, c, id=f"{b}-{c['m']}x{c['n']}x{c['k']}-{c['dtype']}") for b in harness.BACKEND_IDS for c in spec.PERF_CONFIGS]


@pytest.mark.parametrize("backend_id,cfg", PERF)
def test_perf(cuda, request, backend_id, cfg):
    fn = implementation(backend_id)
    inputs = spec.make_inputs(cfg)
    check(backend_id, cfg, inputs, fn(inputs))  # a fast wrong answer is not a result
    harness.run_perf(request, kernel=KERNEL, backend_id=backend_id, cfg=cfg, call=lambda: fn(inputs),
                     flops=spec.flops(cfg))
