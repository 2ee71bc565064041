"""silu_and_mul suites: correctness (`test_op*`) and CUPTI performance (`test_perf`) of the cuTile
Rust port (`cutile_rs`) and its baselines (`cutile_py`, `triton`, `torch`).

    make KERNEL=silu_and_mul test        # pytest -k "cutile_rs and test_op"
    make KERNEL=silu_and_mul perf        # pytest -k "cutile_rs and test_perf" --print-record
    make KERNEL=silu_and_mul baseline    # the same test_perf for each baseline
"""
import re

import pytest
import torch

from kernels.silu_and_mul import spec
from tilekit import harness

KERNEL = spec.KERNEL


def implementation(backend_id):
    return harness.implementation(spec, backend_id)


def check(backend_id, cfg, inputs, y):
    harness.check(spec, backend_id, cfg, inputs, y)


def shape_id(shape):
    return f"{shape['m']}x{shape['h']}" + (f"ld{shape['row_stride']}" if "row_stride" in shape else "")


CORRECTNESS = [pytest.param(b, dict(s, dtype=d), id=f"{b}-{shape_id(s)}-{d}")
               for b in harness.BACKEND_IDS for s in spec.CORRECTNESS_SHAPES for d in spec.DTYPES]


def poisoned_out(x, device):
    """An (m, H) output full of NaN, so an element the kernel does not write fails the check."""
    return torch.full((x.shape[0], x.shape[1] // 2), float("nan"), dtype=x.dtype, device=device)


@pytest.mark.parametrize("backend_id,cfg", CORRECTNESS)
def test_op(cuda, backend_id, cfg):
    fn = implementation(backend_id)
    inputs = spec.make_inputs(cfg)
    out = poisoned_out(inputs["x"], cuda)
    y = fn(inputs, out)
    torch.cuda.synchronize()
    if backend_id == "cutile_rs":
        assert y is out, "the port must write the caller's out tensor"
    check(backend_id, cfg, inputs, y)


# 37 rows: partial row tiles for every rows > 1; H = 1000 one padded tile, H = 14336 seven tiles
# of 2048 (or fourteen of 1024: whole tiles, so the one-row variants take the unmasked entry),
# H = 4097 a 1-element last tile; 64 x 4096 with padded rows: every variant unmasked.
VARIANT_SHAPES = [{"m": 37, "h": 1000, "dtype": "float16"}, {"m": 19, "h": 14336, "dtype": "bfloat16"},
                  {"m": 37, "h": 4097, "dtype": "float32"}, {"m": 64, "h": 4096, "dtype": "float16", "row_stride": 8200}]


@pytest.mark.parametrize("cfg", VARIANT_SHAPES, ids=lambda c: f"{c['m']}x{c['h']}-{c['dtype']}")
def test_op_every_variant_cutile_rs(cuda, cfg):
    """Autotune may pick any candidate variant, and "default" takes ffi.rs's: each must be right."""
    inputs = spec.make_inputs(cfg)
    for v in spec.variants(cfg["m"], cfg["h"]) + ["default"]:
        out = poisoned_out(inputs["x"], cuda)
        spec.run_port(inputs, out=out, variant=v)
        check("cutile_rs", dict(cfg, variant=v), inputs, out)


def test_op_3d_input_cutile_rs(cuda):
    """Leading dims are flattened: (b, s, 2H) -> (b, s, H)."""
    from kernels.silu_and_mul.op import silu_and_mul

    x = 2 * torch.randn(3, 5, 2 * 300, device=cuda, dtype=torch.bfloat16)
    y = silu_and_mul(x)
    assert y.shape == (3, 5, 300)
    ref = spec.reference({"x": x.reshape(15, 600)}).reshape(3, 5, 300)
    harness.check_close(y, ref, spec.TOLERANCE["bfloat16"], "cutile_rs 3-D")


BAD_INPUTS = {
    "odd_last_dim": (lambda: torch.randn(4, 7), None, ValueError, "even last dim"),
    "cpu_tensor": (lambda: torch.randn(4, 8), None, ValueError, "CUDA device"),
    "float64": (lambda: torch.randn(4, 8, dtype=torch.float64), None, TypeError, "must be one of"),
    "int32": (lambda: torch.ones(4, 8, dtype=torch.int32), None, TypeError, "must be one of"),
    "out_shape": (lambda: torch.randn(4, 8), lambda: torch.empty(4, 8), ValueError, "out must be (4, 4)"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=lambda c: f"cutile_rs-{c}")
def test_op_bad_input_cutile_rs(case):
    """Rejected in Python before the GPU is touched, with a message that says what to fix (runs on
    CPU tensors, so also on machines without a GPU)."""
    from kernels.silu_and_mul.op import silu_and_mul

    make_x, make_out, exc, needle = BAD_INPUTS[case]
    with pytest.raises(exc, match=re.escape(needle)):
        silu_and_mul(make_x(), out=make_out() if make_out else None)


PERF = [pytest.param(b, c, id=f"{b}-{c['m']}-{c['h']}-{c['dtype']}") for b in harness.BACKEND_IDS for c in spec.PERF_CONFIGS]


@pytest.mark.parametrize("backend_id,cfg", PERF)
def test_perf(cuda, request, backend_id, cfg):
    fn = implementation(backend_id)
    inputs = spec.make_inputs(cfg)
    check(backend_id, cfg, inputs, fn(inputs))  # a fast wrong answer is not a result
    harness.run_perf(request, kernel=KERNEL, backend_id=backend_id, cfg=cfg, call=lambda: fn(inputs),
                     bytes_moved=spec.bytes_moved(cfg))
