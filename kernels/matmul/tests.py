"""matmul's tests beyond the generated suite (tilekit.testing.suite adds the test_* to
tests/kernels/test_matmul.py), and BASELINE_CASES, what tests/kit/test_baselines.py checks of
baselines.py on the CPU (tilekit.runtime.baseline_cases)."""

import json

import pytest
import torch

from kernels.matmul.op import matmul_acc_
from kernels.matmul.spec import SPEC
from tilekit.runtime import autotune, mma
from tilekit.testing import harness
from tilekit.runtime.baseline_cases import H200_SMS as SMS
from tilekit.runtime.baseline_cases import GEMM_NAMED, TOL, Has, gemm_cases


def test_op_persistent_grid_strides_over_more_tiles_than_programs_cutile_rs(cuda):
    """64x64 tiles of a 1000x1100 output: 288 tiles for one tile block per SM, each walks several."""
    cfg = {"m": 1000, "n": 1100, "k": 520, "dtype": "bfloat16"}
    harness.check_variant(SPEC, cfg, SPEC.make_inputs(cfg), mma.variant(64, 64, 32, persistent=True, group=4))


def test_op_split_k_adds_uneven_runs_of_k_tiles_cutile_rs(cuda):
    """Split-K: k = 1000 in 128-deep steps is 8 K-tiles, cut into runs of 3, 3 and 2 (the last one's
    tile ragged); a ragged 33 x 1000 output in a column slice (ldc), B column-major (x @ W.t())."""
    cfg = {"m": 33, "n": 1000, "k": 1000, "bt": 1, "ldc": 1024, "dtype": "bfloat16"}
    harness.check_variant(SPEC, cfg, SPEC.make_inputs(cfg), mma.variant(32, 64, 128, occupancy=2) | {"splits": 3})


def _acc_case(m, n, k, *, b_t=False, ldc=None, dtype=torch.bfloat16, seed=0):
    """(c, a, b, c's buffer) on the GPU: c (m, n) a column slice of an (m, ldc) buffer when ldc > n,
    b column-major with b_t."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).to(dtype)
    b = torch.randn(n, k, device="cuda", generator=g).to(dtype)
    b = b.t() if b_t else b.t().contiguous()
    buffer = torch.randn(m, ldc or n, device="cuda", generator=g).to(dtype)
    return buffer[:, :n], a, b, buffer


def _add_and_check(c, a, b, **kwargs):
    """matmul_acc_(c, a, b) against c + a @ b in float64: one rounding of f32 sums (matmul's bound,
    relative to 1 + |ref|)."""
    ref = c.double() + a.double() @ b.double()
    assert matmul_acc_(c, a, b, **kwargs) is c
    err = ((c.double() - ref).abs() / (1 + ref.abs())).max().item()
    assert err <= TOL[str(c.dtype)[6:]], f"max |c - ref| / (1 + |ref|) = {err:.3g}"


@pytest.mark.parametrize(
    "variant, mnk",
    [
        ("default", (129, 257, 1000)),
        # 16 x 33 = 528 tiles of 64 x 64 for 132 tile blocks: each adds into four tiles in turn
        (mma.variant(64, 64, 32, persistent=True, group=4), (1000, 2100, 520)),
        (mma.variant(32, 64, 128, occupancy=2) | {"splits": 3}, (33, 257, 1000)),
    ],
    ids=["default", "persistent", "split_k"],
)
@pytest.mark.parametrize("b_t", [False, True], ids=["nn", "nt"])
def test_op_accumulate_adds_into_c_cutile_rs(cuda, variant, mnk, b_t):
    """matmul_acc_: c += a @ b, ragged on every dim, c a column slice (the columns past it untouched);
    one tile per block, a persistent grid walking several tiles, and split-K (whose reduce adds c);
    b row- and column-major."""
    m, n, k = mnk
    c, a, b, buffer = _acc_case(m, n, k, b_t=b_t, ldc=n + 7)
    beyond = buffer[:, n:].clone()
    _add_and_check(c, a, b, variant=variant)
    assert torch.equal(buffer[:, n:], beyond), _stores_past(buffer[:, n:], beyond)


def _stores_past(now, before) -> str:
    """What changed in the columns past c (the buffer's padding): where, and into what."""
    changed = now != before
    rows, cols = changed.nonzero(as_tuple=True)
    new, old = now[changed].float(), before[changed].float()
    return (
        f"a store past c's columns: {int(changed.sum())} of {changed.numel()} padding elements changed, "
        f"rows {rows.min().item()}..{rows.max().item()}, columns n+{cols.min().item()}..n+{cols.max().item()}; "
        f"{int((new == 0).sum())} now zero; first (before, now): "
        f"{list(zip(old[:4].tolist(), new[:4].tolist()))}"
    )


def test_op_accumulate_autotune_adds_once_cutile_rs(cuda, tmp_path, monkeypatch):
    """With variant "auto" and nothing cached, every candidate is timed several times, on a copy of c
    (tilekit.runtime.port.tuning_tensors): c holds c + a @ b once, not once per run. Then again
    (the pick cached) and under torch.compile (the op torch.ops.tilekit.matmul_acc_)."""
    cache = tmp_path / "autotune.json"
    monkeypatch.setenv("TILEKIT_AUTOTUNE_CACHE", str(cache))
    monkeypatch.delenv("TILEKIT_AUTOTUNE", raising=False)
    monkeypatch.setattr(autotune, "_MEMO", {})
    c, a, b, _ = _acc_case(200, 300, 520, b_t=True)
    _add_and_check(c, a, b)
    tuned = [
        e for per_gpu in json.loads(cache.read_text()).values() for k, e in per_gpu["matmul"].items() if "acc" in k
    ]
    assert len(tuned) == 1 and len(tuned[0]["tried"]) > 1, tuned
    _add_and_check(c, a, b)
    compiled = torch.compile(lambda c, a, b: matmul_acc_(c, a, b), fullgraph=True)
    ref = c.double() + a.double() @ b.double()
    compiled(c, a, b)
    err = ((c.double() - ref).abs() / (1 + ref.abs())).max().item()
    assert err <= TOL["bfloat16"], err


def test_acc_refuses_grad_shapes_dtypes_and_shared_memory():
    """matmul_acc_'s refusals, on the CPU: grad, shapes, dtypes, shared memory, then the device check."""
    c, a, b = (
        torch.zeros(4, 8, dtype=torch.bfloat16),
        torch.zeros(4, 2, dtype=torch.bfloat16),
        torch.zeros(2, 8, dtype=torch.bfloat16),
    )
    with pytest.raises(ValueError, match="requires grad: use c \\+ matmul"):
        matmul_acc_(c, a.requires_grad_(), b)
    a = a.detach()
    with pytest.raises(ValueError, match="c must be \\(m, n\\), a \\(m, k\\) and b \\(k, n\\)"):
        matmul_acc_(c, a, b[:, :4])
    with pytest.raises(TypeError, match="matmul_acc_"):
        matmul_acc_(c.float(), a.float(), b.float())
    with pytest.raises(ValueError, match="c and a share memory"):
        matmul_acc_(c, c[:, :2], b)
    with pytest.raises(ValueError, match="must be on one CUDA device"):
        matmul_acc_(c, a, b)


BASELINE_CASES = gemm_cases(
    SPEC,
    # compiled for sm_90: (bm, bn, bk, TRANS_A, TRANS_B, SHARED_B)
    [(128, 256, 64, 0, 0, 0), (64, 64, 32, 0, 0, 0), (128, 128, 64, 0, 1, 0), (64, 64, 32, 1, 1, 0)],
    # Tiny (one partial tile), ragged on every dim (K not a multiple of BK: the masked K step), K a
    # multiple of BK (the unmasked path), column slices, and a persistent grid of one program ("one
    # SM" on the CPU) that walks every tile.
    interpreted=[
        (dict(m=m, n=n, k=k, lda=lda, ldb=ldb, dtype=dt), v, {})
        for dt in ("float16", "bfloat16")
        for m, n, k, lda, ldb in (
            (3, 5, 7, 7, 5),
            (129, 257, 65, 65, 257),
            (130, 300, 128, 128, 300),
            (65, 40, 70, 80, 48),
        )
        for v in ("auto", *GEMM_NAMED)
    ]
    # column-major B (x @ W.t()), and both operands column-major with a ragged K
    + [(dict(m=65, n=40, k=70, bt=1, dtype="bfloat16"), v, {}) for v in ("auto", "persistent")]
    + [(dict(m=33, n=17, k=65, at=1, bt=1, dtype="float16"), "128x128x64", {})],
    torch_case=({"m": 33, "n": 17, "k": 65, "lda": 70, "dtype": "bfloat16"}, TOL["bfloat16"]),
    bad_inputs=[
        ((torch.randn(2, 3, 4).half(), torch.randn(4, 2).half()), ValueError, r"a must be \(m, k\)"),
        ((torch.randn(2, 4).half(), torch.randn(5, 2).half()), ValueError, r"b \(k, n\)"),
        ((torch.randn(2, 4), torch.randn(4, 2)), TypeError, "share one dtype"),
        ((torch.randn(2, 4).half(), torch.randn(4, 2).bfloat16()), TypeError, "share one dtype"),
        ((torch.randn(4, 8).half()[:, ::2], torch.randn(4, 2).half()), ValueError, "a must be contiguous in its last"),
    ],
    plans=[
        # auto is left to autotune on the GPU, and is the big tile off it
        ("triton_config", (4096, 4096, 4096, SMS), None),
        ("triton_config", (100, 100, 100, 1), {"on_gpu": False}, Has(variant="128x256x64", bm=128, bn=256, bk=64)),
        # masked K only when K is ragged
        ("triton_config", (129, 257, 65, SMS, "128x128x64"), Has(even_k=False)),
        # persistent: one program per SM, or fewer tiles (ceil(1000 / 128) * ceil(1000 / 256))
        ("triton_config", (8192, 8192, 64, SMS, "persistent"), Has(grid=SMS)),
        ("triton_config", (1000, 1000, 64, SMS, "persistent"), Has(grid=8 * 4)),
        ("cutile_config", (8192, 8192, SMS, "persistent"), Has(grid=SMS)),
        ("cutile_config", (1000, 1000, SMS, "persistent"), Has(grid=8 * 4)),
    ],
)
