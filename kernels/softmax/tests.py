"""softmax's tests beyond the generated suite (tilekit.testing.suite adds the test_* to
tests/kernels/test_softmax.py): masked logits, as attention masks make them; and BASELINE_CASES,
what tests/kit/test_baselines.py checks of baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import pytest
import torch

from kernels.softmax.spec import SPEC
from tilekit.testing import harness
from tilekit.runtime.baseline_cases import H200_SMS as SMS
from tilekit.runtime.baseline_cases import ROW_ERRORS, BaselineCases, Has, row_interpreted, row_plans, tile_plan


def masked(x: torch.Tensor, step: int = 97) -> torch.Tensor:
    """x with -inf outside a ragged kept prefix per row (causal-style: row i keeps columns up to
    i * step mod n; row 0 only column 0), with holes in it (every fifth column from 1)."""
    m, n = x.shape
    cols = torch.arange(n, device=x.device)
    limit = (torch.arange(m, device=x.device)[:, None] * step) % n
    return x.masked_fill(~((cols[None, :] <= limit) & (cols[None, :] % 5 != 1)), float("-inf"))


# -inf entries must come out as exactly 0 and leave the rest of the row finite, in the whole-row
# kernel and in the looped one, including a column tile of the looped kernel whose lanes see
# nothing but -inf.
MASKED = [
    ({"m": 33, "n": 1000, "dtype": "float16"}, {"block": 1024, "rows": 8, "occupancy": -1}),
    ({"m": 33, "n": 10000, "dtype": "float32"}, {"block": 2048, "rows": 4, "occupancy": -1}),
    # the split form: chunks of nothing but -inf, 2-row tiles, a ragged last tile
    ({"m": 34, "n": 40000, "dtype": "float32"}, {"block": 2048, "rows": 2, "occupancy": -1, "chunk": 8192}),
    # the single-pass split (chunk == block): one-tile chunks in 2-row tiles (m even: ffi.rs runs the
    # split forms on whole row tiles only, `split_fits`)
    ({"m": 34, "n": 40000, "dtype": "bfloat16"}, {"block": 2048, "rows": 2, "occupancy": -1, "chunk": 2048}),
    # the held single pass (form 1: chunks of four tiles, exponentials held in T)
    ({"m": 34, "n": 40000, "dtype": "bfloat16"}, {"block": 2048, "rows": 2, "occupancy": -1, "chunk": 8192, "form": 1}),
    # the single pass reading its chunk twice (form 2): chunks of four tiles in 2-row tiles, the last
    # chunk holding the row's ragged tile (40000 = 19 x 2048 + 1088)
    ({"m": 34, "n": 40000, "dtype": "float16"}, {"block": 2048, "rows": 2, "occupancy": -1, "chunk": 8192, "form": 2}),
    # the persistent tail loading the next row tile ahead (form 1): 301 row tiles on a grid of one
    # tile block per SM (132 on the H200), each walking 2-3 of them
    (
        {"m": 301, "n": 11008, "dtype": "float16"},
        {"block": 8192, "tail": 4096, "rows": 1, "occupancy": 2, "warps": 8, "programs_per_sm": 1, "form": 1},
    ),
]


def masked_id(p: dict) -> str:
    if "m" in p:
        return f"{p['m']}x{p['n']}-{p['dtype']}"
    return f"block{p['block']}" + "".join(f"-{k}{p[k]}" for k in ("chunk", "tail", "form") if k in p)


@pytest.mark.parametrize("cfg,variant", MASKED, ids=masked_id)
def test_op_masked_logits_cutile_rs(cuda, cfg, variant):
    inputs = {"x": masked(SPEC.make_inputs(cfg)["x"])}
    out = SPEC.make_out(cfg, inputs)
    SPEC.run_port(inputs, out=out, variant=variant)
    torch.cuda.synchronize()
    assert int((out[inputs["x"] == float("-inf")] != 0).sum()) == 0, "masked (-inf) logits must give exactly 0"
    harness.check(SPEC, "cutile_rs", dict(cfg, variant=variant), inputs, out)


@pytest.mark.parametrize(
    "form",
    [{"chunk": 4096}, {"chunk": 8192}, {"chunk": 16384, "form": 1}, {"chunk": 16384, "form": 2}],
    ids=["single-pass", "two-kernel", "held", "reread"],
)
def test_op_split_all_masked_row_is_nan_in_every_split_form_cutile_rs(cuda, form):
    """A row of nothing but -inf gives NaN (0/0), as torch.softmax does, in every split form (chunk
    == block: the single pass; form 1: the held single pass; form 2: the single pass reading its
    chunk twice); the other rows stay finite."""
    x = SPEC.make_inputs({"m": 4, "n": 40000, "dtype": "float32"})["x"]
    x[2] = float("-inf")
    y = SPEC.run_port({"x": x}, variant={"block": 4096, "rows": 1, "occupancy": -1, **form})
    torch.cuda.synchronize()
    assert bool(y[2].isnan().all()) and bool(torch.isfinite(y[[0, 1, 3]]).all())


# The single-pass split's row tiles meet through counters: many row tiles per launch (several
# waves of the GPU), repeated calls into fresh outputs (a stale counter or a lost partial shows as a
# wrong row), and one-tile chunks beyond the SM count (147 > 132 on the H200: the two kernels run).
EXCHANGE = [
    ({"m": 4096, "n": 128256, "dtype": "bfloat16"}, {"block": 4096, "rows": 1, "occupancy": 8, "chunk": 4096}),
    (
        {"m": 300, "n": 150001, "dtype": "float32", "row_stride": 150016},
        {"block": 8192, "rows": 1, "occupancy": 4, "chunk": 8192},
    ),
    ({"m": 64, "n": 150001, "dtype": "float16"}, {"block": 1024, "rows": 1, "occupancy": -1, "chunk": 1024}),
    # the held single pass (form 1), padded f32 rows: 19 chunks of four 2048-wide tiles
    (
        {"m": 300, "n": 150001, "dtype": "float32", "row_stride": 150016},
        {"block": 2048, "rows": 1, "occupancy": 5, "chunk": 8192, "form": 1},
    ),
    # the single pass reading its chunk twice (form 2): several waves of 10-chunk row tiles, and
    # padded bf16 rows whose last chunk holds the ragged tile
    (
        {"m": 4096, "n": 151936, "dtype": "bfloat16"},
        {"block": 4096, "rows": 1, "occupancy": 8, "chunk": 16384, "form": 2},
    ),
    (
        {"m": 300, "n": 150001, "dtype": "bfloat16", "row_stride": 150016},
        {"block": 4096, "rows": 1, "occupancy": 8, "chunk": 16384, "form": 2},
    ),
]


@pytest.mark.parametrize("cfg,variant", EXCHANGE, ids=masked_id)
def test_op_split_single_pass_repeated_calls_cutile_rs(cuda, cfg, variant):
    inputs = SPEC.make_inputs(cfg)
    for _ in range(5):
        out = SPEC.make_out(cfg, inputs)  # NaN-poisoned
        SPEC.run_port(inputs, out=out, variant=variant)
        harness.check(SPEC, "cutile_rs", dict(cfg, variant=variant), inputs, out)


def _baseline_inputs(cfg: dict) -> dict:
    x = SPEC.make_inputs(cfg, device="cpu", seed=0)["x"]
    return {"x": masked(x, 997) if cfg.get("masked") else x}


BASELINE_CASES = BaselineCases(
    SPEC,
    # Also masked (-inf) logits with a ragged kept prefix, and a looped row past 16384.
    interpreted=row_interpreted({"m": 4, "n": 3000, "masked": True})
    + [({"m": 2, "n": 20000, "dtype": "float32"}, "auto", {})],
    make_inputs=_baseline_inputs,
    zero_counts=lambda y, inputs: {"masked logits not 0": int((y[inputs["x"] == float("-inf")] != 0).sum())},
    torch_case=({"m": 5, "n": 1000, "row_stride": 1040, "dtype": "float32"}, 1e-6),
    bad_inputs=[
        ((torch.randn(2, 3, 4),), ValueError, "must be 2-D"),
        ((torch.randn(2, 4, dtype=torch.float64),), TypeError, "must be one of"),
        ((torch.randn(4, 2).t(),), ValueError, "last dim must be contiguous"),
    ],
    plans=row_plans(
        auto={  # the perf shapes' (the committed H200 results were timed with these)
            (65536, 1024): (("row", 1024, 1, 65536, 4), ("row", 1024, 1, 65536)),
            (65536, 4096): (("row", 4096, 1, 65536, 8), ("row", 4096, 1, 65536)),
            (65536, 8192): (("row", 8192, 1, 65536, 16), ("row", 8192, 1, 65536)),
        },
        triton={(65536, 16384): "row", (64, 512): "row", (1024, 16385): "looped", (1024, 32768): "looped"},
        cutile={(200, 4096): "row", (1024, 32768): "looped"},
    )
    + [  # multirow: persistent over 8K-element tiles
        ("triton_config", (65536, 1024, SMS, "multirow"), tile_plan("multirow", 1024, 8, 2 * SMS, 16)),
        ("cutile_config", (65536, 1024, SMS, "multirow"), tile_plan("multirow", 1024, 16, SMS)),
        ("cutile_config", (300, 16384, SMS, "multirow"), Has(rows=2)),
        # looped tiles are 4096 wide, or the whole row if narrower
        ("triton_config", (64, 32768, SMS), Has(block=4096)),
        ("triton_config", (64, 1000, SMS, "looped"), Has(block=1024)),
        ("cutile_config", (64, 32768, SMS), tile_plan("looped", 4096, 1, 64)),
    ],
    plan_errors=ROW_ERRORS,
    triton_compile=[
        ("_triton_looped_kernel", "fp16", {"BLOCK": 1024}),
        ("_triton_rows_kernel", "bf16", {"ROWS": 4, "BLOCK": 1024}),
    ],
    cutile_kernels=[
        (kernel, dt, args, True)
        for dt in ("float16", "bfloat16", "float32")
        for kernel, args in (
            ("_cutile_rows_kernel", ["A2", "A2", 16, 1024]),
            ("_cutile_looped_kernel", ["A2", "A2", 4096]),
        )
    ],
)
