"""softmax suites: correctness (`test_op*`) and CUPTI performance (`test_perf`) of the cuTile
Rust port (`cutile_rs`) and its baselines (`cutile_py`, `triton`, `torch`).

    make KERNEL=softmax test        # pytest -k "cutile_rs and test_op"
    make KERNEL=softmax perf        # pytest -k "cutile_rs and test_perf" --print-record
    make KERNEL=softmax baseline    # the same test_perf for each baseline
"""
import re

import pytest
import torch

from kernels.softmax import spec
from tilekit import harness

KERNEL = spec.KERNEL


def implementation(backend_id):
    return harness.implementation(spec, backend_id)


def check(backend_id, cfg, inputs, y):
    harness.check(spec, backend_id, cfg, inputs, y)


def shape_id(shape):
    return f"{shape['m']}x{shape['n']}" + (f"ld{shape['row_stride']}" if "row_stride" in shape else "")


def poisoned(x):
    """An output buffer full of NaN, so an element the kernel does not write fails the check."""
    return torch.full(x.shape, float("nan"), dtype=x.dtype, device=x.device)


CORRECTNESS = [pytest.param(b, dict(s, dtype=d), id=f"{b}-{shape_id(s)}-{d}")
               for b in harness.BACKEND_IDS for s in spec.CORRECTNESS_SHAPES for d in spec.DTYPES]


@pytest.mark.parametrize("backend_id,cfg", CORRECTNESS)
def test_op(cuda, backend_id, cfg):
    fn = implementation(backend_id)
    inputs = spec.make_inputs(cfg)
    out = poisoned(inputs["x"])
    y = fn(inputs, out)
    torch.cuda.synchronize()
    if backend_id == "cutile_rs":
        assert y is out, "the port must write the caller's out tensor"
    check(backend_id, cfg, inputs, y)


# Whole-row shape classes (padded: n = 1000, 8195; unmasked: 64 x 4096 and 64 x 1024 with
# padded rows, every variant's tile divides them) and a looped one (n > 16384): autotune may
# pick any candidate variant, so each one must be right.
VARIANT_SHAPES = [{"m": 37, "n": 1000, "dtype": "float16"}, {"m": 19, "n": 20000, "dtype": "bfloat16"},
                  {"m": 7, "n": 8195, "dtype": "float32"}, {"m": 64, "n": 4096, "dtype": "bfloat16"},
                  {"m": 64, "n": 1024, "dtype": "float16", "row_stride": 1040}]


@pytest.mark.parametrize("cfg", VARIANT_SHAPES, ids=lambda c: f"{c['m']}x{c['n']}-{c['dtype']}")
def test_op_every_variant_cutile_rs(cuda, cfg):
    """Autotune may pick any candidate variant, so each one must be right."""
    inputs = spec.make_inputs(cfg)
    for v in spec.variants(cfg["m"], cfg["n"]):
        out = poisoned(inputs["x"])
        spec.run_port(inputs, out=out, variant=v)
        check("cutile_rs", dict(cfg, variant=v), inputs, out)


# Masked logits (as attention masks make them): -inf entries must come out as exactly 0 and
# leave the rest of the row finite, in the whole-row kernel and in the looped one, including a
# column tile of the looped kernel whose lanes see nothing but -inf.
MASKED = [({"m": 33, "n": 1000, "dtype": "float16"}, {"block": 1024, "rows": 8, "occupancy": -1}),
          ({"m": 33, "n": 10000, "dtype": "float32"}, {"block": 2048, "rows": 4, "occupancy": -1})]


@pytest.mark.parametrize("cfg,variant", MASKED, ids=lambda p: f"{p['m']}x{p['n']}-{p['dtype']}" if "m" in p else f"block{p['block']}")
def test_op_masked_logits_cutile_rs(cuda, cfg, variant):
    inputs = spec.make_inputs(cfg)
    x = inputs["x"]
    cols = torch.arange(cfg["n"], device=x.device)
    # A ragged kept prefix per row (causal-style; row 0 keeps only column 0) with holes in it.
    limit = (torch.arange(cfg["m"], device=x.device)[:, None] * 97) % cfg["n"]
    keep = (cols[None, :] <= limit) & (cols[None, :] % 5 != 1)
    inputs = {"x": x.masked_fill(~keep, float("-inf"))}
    out = poisoned(x)
    spec.run_port(inputs, out=out, variant=variant)
    torch.cuda.synchronize()
    assert int((out[~keep] != 0).sum()) == 0, "masked (-inf) logits must give exactly 0"
    check("cutile_rs", dict(cfg, variant=variant), inputs, out)


BAD_INPUTS = {
    "int_dtype": (lambda: torch.ones(4, 8, dtype=torch.int32), TypeError, "must be one of"),
    "float64": (lambda: torch.randn(4, 8, dtype=torch.float64), TypeError, "must be one of"),
    "cpu_tensor": (lambda: torch.randn(4, 8), ValueError, "CUDA device"),
    "last_dim_stride": (lambda: torch.randn(8, 4).t(), ValueError, "contiguous in its last dim"),
    "zero_dim": (lambda: torch.tensor(1.0), ValueError, "at least one dim"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=lambda c: f"cutile_rs-{c}")
def test_op_bad_input_cutile_rs(case):
    """Rejected in Python before the GPU is touched, with a message that says what to fix (runs on
    CPU tensors, so also on machines without a GPU)."""
    from kernels.softmax.op import softmax

    make, exc, needle = BAD_INPUTS[case]
    with pytest.raises(exc, match=re.escape(needle)):
        softmax(make())


PERF = [pytest.param(b, c, id=f"{b}-{c['m']}-{c['n']}-{c['dtype']}") for b in harness.BACKEND_IDS for c in spec.PERF_CONFIGS]


@pytest.mark.parametrize("backend_id,cfg", PERF)
def test_perf(cuda, request, backend_id, cfg):
    fn = implementation(backend_id)
    inputs = spec.make_inputs(cfg)
    check(backend_id, cfg, inputs, fn(inputs))  # a fast wrong answer is not a result
    harness.run_perf(request, kernel=KERNEL, backend_id=backend_id, cfg=cfg, call=lambda: fn(inputs),
                     bytes_moved=spec.bytes_moved(cfg))
