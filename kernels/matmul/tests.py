"""matmul's GPU tests beyond the generated suite (tilekit.suite adds them to
tests/kernels/test_matmul.py)."""

from kernels.matmul.spec import SPEC
from tilekit import harness


def test_op_persistent_grid_strides_over_more_tiles_than_programs_cutile_rs(cuda):
    """64x64 tiles of a 1000x1100 output: 288 tiles for one tile block per SM, each walks several."""
    cfg = {"m": 1000, "n": 1100, "k": 520, "dtype": "bfloat16"}
    inputs = SPEC.make_inputs(cfg)
    out = SPEC.make_out(cfg, inputs)
    v = {"bm": 64, "bn": 64, "bk": 32, "group": 4, "persistent": True, "occupancy": 1, "cga": 1}
    SPEC.run_port(inputs, out=out, variant=v)
    harness.check(SPEC, "cutile_rs", dict(cfg, variant=v), inputs, out)


def test_op_default_variant_cutile_rs(cuda):
    """`variant="default"` (every knob -1: ffi.rs's defaults) is a valid launch."""
    cfg = {"m": 300, "n": 500, "k": 200, "dtype": "float16"}
    inputs = SPEC.make_inputs(cfg)
    out = SPEC.make_out(cfg, inputs)
    SPEC.run_port(inputs, out=out, variant="default")
    harness.check(SPEC, "cutile_rs", cfg, inputs, out)
