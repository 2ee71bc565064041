"""softmax's GPU tests beyond the generated suite (tilekit.suite adds them to
tests/kernels/test_softmax.py): masked logits, as attention masks make them."""

import pytest
import torch

from kernels.softmax.spec import SPEC
from tilekit import harness

# -inf entries must come out as exactly 0 and leave the rest of the row finite, in the whole-row
# kernel and in the looped one, including a column tile of the looped kernel whose lanes see
# nothing but -inf.
MASKED = [
    ({"m": 33, "n": 1000, "dtype": "float16"}, {"block": 1024, "rows": 8, "occupancy": -1}),
    ({"m": 33, "n": 10000, "dtype": "float32"}, {"block": 2048, "rows": 4, "occupancy": -1}),
    # the split form: chunks of nothing but -inf, 2-row tiles, a ragged last tile
    ({"m": 34, "n": 40000, "dtype": "float32"}, {"block": 2048, "rows": 2, "occupancy": -1, "chunk": 8192}),
]


def masked_id(p: dict) -> str:
    if "m" in p:
        return f"{p['m']}x{p['n']}-{p['dtype']}"
    return f"block{p['block']}" + (f"-chunk{p['chunk']}" if "chunk" in p else "")


@pytest.mark.parametrize("cfg,variant", MASKED, ids=masked_id)
def test_op_masked_logits_cutile_rs(cuda, cfg, variant):
    x = SPEC.make_inputs(cfg)["x"]
    cols = torch.arange(cfg["n"], device=x.device)
    # A ragged kept prefix per row (causal-style; row 0 keeps only column 0) with holes in it.
    limit = (torch.arange(cfg["m"], device=x.device)[:, None] * 97) % cfg["n"]
    keep = (cols[None, :] <= limit) & (cols[None, :] % 5 != 1)
    inputs = {"x": x.masked_fill(~keep, float("-inf"))}
    out = SPEC.make_out(cfg, inputs)
    SPEC.run_port(inputs, out=out, variant=variant)
    torch.cuda.synchronize()
    assert int((out[~keep] != 0).sum()) == 0, "masked (-inf) logits must give exactly 0"
    harness.check(SPEC, "cutile_rs", dict(cfg, variant=variant), inputs, out)


def test_split_all_masked_row_is_nan_cutile_rs(cuda):
    """A row of nothing but -inf gives NaN (0/0), as torch.softmax does, in the split form too; the
    other rows stay finite."""
    x = SPEC.make_inputs({"m": 4, "n": 40000, "dtype": "float32"})["x"]
    x[2] = float("-inf")
    y = SPEC.run_port({"x": x}, variant={"block": 4096, "rows": 1, "occupancy": -1, "chunk": 8192})
    torch.cuda.synchronize()
    assert bool(y[2].isnan().all()) and bool(torch.isfinite(y[[0, 1, 3]]).all())
