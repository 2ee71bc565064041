"""tilekit.runtime.baseline_support, the skeleton every kernels/<name>/baselines.py shares: guarded imports,
checks, launch arithmetic, the row-wise launches and the row reductions' plans. How each kernel's
module uses them is tested for every kernel in test_baselines.py."""

import contextlib
import importlib.abc
import sys

import pytest
import torch

from tilekit.runtime import baseline_support as bs


# -- optional packages --------------------------------------------------------------------------


def test_a_missing_package_is_kept_as_its_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.tile", None)  # what `import cuda.tile` then raises: ModuleNotFoundError
    monkeypatch.setitem(sys.modules, "triton", None)
    ct, ct_error = bs.import_cutile()
    triton, tl, triton_error = bs.import_triton()
    assert ct is None and isinstance(ct_error, ModuleNotFoundError)
    assert triton is None and tl is None and isinstance(triton_error, ModuleNotFoundError)


def test_a_package_that_breaks_while_importing_is_kept_too(monkeypatch):
    class Broken(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "cuda.tile":
                raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.delitem(sys.modules, "cuda.tile", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Broken()] + sys.meta_path)
    ct, error = bs.import_cutile()
    assert ct is None and isinstance(error, OSError)


def test_require_raises_the_backends_reason_only_when_its_package_is_missing():
    bs.require(object(), lambda backend: pytest.fail("asked for a reason"), "triton")
    with pytest.raises(RuntimeError, match="^cutile: not here$"):
        bs.require(None, lambda backend: f"{backend}: not here", "cutile")


@pytest.mark.parametrize(
    "t,exc,message",
    [
        (torch.zeros(2, 3, 4), ValueError, "k baseline: x must be 2-D (m, n), got shape (2, 3, 4)"),
        (
            torch.zeros(2, 4, dtype=torch.float64),
            TypeError,
            "k baseline: x must be one of (torch.float32,), got torch.float64",
        ),
        (torch.zeros(4, 2).t(), ValueError, "k baseline: x's last dim must be contiguous; pass x.contiguous()"),
    ],
)
def test_check_matrix_names_the_kernel_the_operand_and_the_fault(t, exc, message):
    with pytest.raises(exc) as info:
        bs.check_matrix("k", "x", t, (torch.float32,))
    assert str(info.value) == message


def test_check_matrix_accepts_padded_rows_and_one_column():
    bs.check_matrix("k", "x", torch.zeros(3, 8)[:, :5], (torch.float32,))
    bs.check_matrix("k", "x", torch.zeros(3, 4)[:, 1:2], (torch.float32,))  # stride(1) is moot for one column


def test_check_variant_and_require_cuda_messages():
    with pytest.raises(ValueError, match=r"^k baseline: variant must be one of \('auto', 'row'\), got 'fast'$"):
        bs.check_variant("k", "fast", ("auto", "row"))
    with pytest.raises(ValueError, match="^k cutile: a must be a CUDA tensor, got cpu$"):
        bs.require_cuda("k", "a", torch.zeros(1))


@pytest.mark.parametrize(
    "fn,args,expected",
    [
        (bs.next_pow2, (1,), 1),
        (bs.next_pow2, (1000,), 1024),
        (bs.next_pow2, (1024,), 1024),
        (bs.clamp, (1, 4, 16), 4),
        (bs.clamp, (99, 4, 16), 16),
        (bs.cdiv, (10, 4), 3),
        (bs.cdiv, (8, 4), 2),
        (bs.row_block, (1,), 16),
        (bs.row_block, (4097,), 8192),
        (bs.triton_warps, (1024, 16), 4),
        (bs.triton_warps, (4096, 16), 8),
        (bs.triton_warps, (8192, 16), 16),
        (bs.triton_warps, (1 << 20, 8), 16),
        (bs.triton_warps, (4096, 8), 16),
    ],
)
def test_launch_arithmetic(fn, args, expected):
    assert fn(*args) == expected


def test_a_cpu_tensor_has_one_sm():
    assert bs.num_sms(torch.zeros(1)) == 1


class Recorder:
    """Stands for a @triton.jit kernel: records kernel[grid](*args, **kwargs)."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((grid, args, kwargs))


def test_launch_triton_rows_passes_m_and_rows_except_to_the_one_row_form():
    x, w, y = torch.zeros(5, 16)[:, :10], torch.zeros(10), torch.zeros(5, 10)
    tiles, one_row = Recorder(), Recorder()
    bs.launch_triton_rows(
        tiles, {"variant": "multirow", "grid": 3, "rows": 2, "block": 16, "num_warps": 4}, (x, w), y, (0.5,)
    )
    bs.launch_triton_rows(
        one_row, {"variant": "looped", "grid": 5, "rows": 1, "block": 8, "num_warps": 8}, (x, w), y, (0.5,)
    )
    assert tiles.calls == [((3,), (x, w, y, 5, 10, 16, 10, 0.5), {"ROWS": 2, "BLOCK": 16, "num_warps": 4})]
    assert one_row.calls == [((5,), (x, w, y, 10, 16, 10, 0.5), {"BLOCK": 8, "num_warps": 8})]


def test_launch_cutile_rows_appends_the_tile_and_launches_on_torchs_stream(monkeypatch):
    calls, devices = [], []
    fake_ct = type("ct", (), {"launch": staticmethod(lambda *a: calls.append(a))})
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: f"stream of {device}")
    monkeypatch.setattr(torch.cuda, "device", lambda device: devices.append(device) or contextlib.nullcontext())
    bs.launch_cutile_rows(
        fake_ct, "K", {"variant": "multirow", "grid": 3, "rows": 2, "block": 16}, ("x", "y", 1e-6), "cuda:1"
    )
    bs.launch_cutile_rows(
        fake_ct, "R", {"variant": "row", "grid": 7, "rows": 1, "block": 64}, ("g", "u", "y"), "cuda:0", one_row="row"
    )
    assert calls == [
        ("stream of cuda:1", (3,), "K", ("x", "y", 1e-6, 2, 16)),
        ("stream of cuda:0", (7,), "R", ("g", "u", "y", 64)),
    ]
    assert devices == ["cuda:1", "cuda:0"]


def test_launch_rows_allocates_y_plans_it_and_launches_the_variants_kernel(monkeypatch):
    x = torch.zeros(5, 16)[:, :10]
    plans, rows_kernel, looped_kernel = [], Recorder(), Recorder()

    def config(m, n, sms, variant, **knobs):
        plans.append((m, n, sms, variant, knobs))
        return {"variant": "looped", "grid": m, "rows": 1, "block": 16, "num_warps": 4}

    kernels = {"row": rows_kernel, "looped": looped_kernel}
    y = bs.launch_rows(kernels, config, (x,), (0.5,), cols=3, variant="auto", knobs={"block": 16})
    assert y.shape == (5, 3) and y.dtype == x.dtype and y.is_contiguous()
    assert plans == [(5, 3, 1, "auto", {"block": 16})]
    assert rows_kernel.calls == [] and looped_kernel.calls == [
        ((5,), (x, y, 3, 16, 3, 0.5), {"BLOCK": 16, "num_warps": 4})
    ]
    empty = bs.launch_rows(kernels, config, (torch.zeros(0, 8),), variant="auto", knobs={})
    assert empty.shape == (0, 8) and len(plans) == 1  # nothing to plan or launch


# -- row reductions' plans (rms_norm and softmax plan their named forms here) --------------------


@pytest.mark.parametrize(
    "variant,knobs,expected",
    [
        ("row", {}, {"variant": "row", "block": 1024, "rows": 1, "num_warps": 4, "grid": 4096}),
        ("multirow", {}, {"variant": "multirow", "block": 1024, "rows": 8, "num_warps": 16, "grid": 132 * 2}),
        (
            "multirow",
            {"rows": 2, "ctas_per_sm": 1},
            {"variant": "multirow", "block": 1024, "rows": 2, "num_warps": 4, "grid": 132},
        ),
        ("looped", {}, {"variant": "looped", "block": 1024, "rows": 1, "num_warps": 4, "grid": 4096}),
        (
            "looped",
            {"block": 256, "num_warps": 2},
            {"variant": "looped", "block": 256, "rows": 1, "num_warps": 2, "grid": 4096},
        ),
    ],
)
def test_triton_row_plan(variant, knobs, expected):
    assert bs.triton_row_plan("k", 4096, 1000, 132, variant, **knobs) == expected


@pytest.mark.parametrize(
    "m,n,variant,knobs,expected",
    [
        (4096, 1000, "row", {}, {"variant": "row", "block": 1024, "rows": 1, "grid": 4096}),
        (4096, 1000, "multirow", {}, {"variant": "multirow", "block": 1024, "rows": 16, "grid": 132}),
        (40, 1000, "multirow", {}, {"variant": "multirow", "block": 1024, "rows": 16, "grid": 3}),
        (300, 8192, "multirow", {}, {"variant": "multirow", "block": 8192, "rows": 4, "grid": 75}),
        (300, 16384, "multirow", {}, {"variant": "multirow", "block": 16384, "rows": 2, "grid": 132}),
        (64, 32768, "looped", {}, {"variant": "looped", "block": 4096, "rows": 1, "grid": 64}),
        (64, 1000, "looped", {"block": 256}, {"variant": "looped", "block": 256, "rows": 1, "grid": 64}),
    ],
)
def test_cutile_row_plan(m, n, variant, knobs, expected):
    assert bs.cutile_row_plan("k", m, n, 132, variant, **knobs) == expected


@pytest.mark.parametrize(
    "auto,m,n,variants",
    [
        (None, 10**6, 1000, ("row", "row")),  # no rule: row, looped only past MAX_ROW_BLOCK
        (None, 8, 16385, ("looped", "looped")),
        ({"triton": {"looped_from": 1024}}, 8, 1000, ("looped", "row")),
        ({"triton": {"looped_from": 1024}}, 8, 1024 // 2, ("row", "row")),
        ({"triton": {"multirow": "tiles"}, "cutile": {"multirow": "tiles"}}, 264 * 8, 1000, ("row", "row")),
        (
            {"triton": {"multirow": "tiles"}, "cutile": {"multirow": "tiles"}},
            264 * 8 + 1,
            1000,
            ("multirow", "multirow"),
        ),
        ({"cutile": {"multirow": "tiles"}}, 132 * 16 + 1, 1000, ("row", "multirow")),
        ({"cutile": {"multirow": "waves"}}, 264, 1000, ("row", "row")),
        ({"cutile": {"multirow": "waves"}}, 265, 1000, ("row", "multirow")),
    ],
)
def test_row_configs_resolve_auto_by_each_backends_rule(auto, m, n, variants):
    triton_config, cutile_config = bs.row_configs("k", auto)
    assert (triton_config(m, n, 132)["variant"], cutile_config(m, n, 132)["variant"]) == variants
    assert triton_config(m, n, 132) == bs.triton_row_plan("k", m, n, 132, variants[0])


@pytest.mark.parametrize("plan", [bs.triton_row_plan, bs.cutile_row_plan])
@pytest.mark.parametrize("variant", ["row", "multirow"])
def test_whole_row_forms_reject_a_block_narrower_than_the_row(plan, variant):
    backend = "triton" if plan is bs.triton_row_plan else "cutile"
    with pytest.raises(ValueError, match=f"^k {backend}: variant '{variant}' holds a whole row, block=512 < n=1000$"):
        plan("k", 10, 1000, 8, variant, block=512)
