"""The rules every entry shares (tilekit.runtime.port.entry): ranks, the aliasing rule, and autotune's
scratch copies for in-place calls (tilekit.runtime.port.tuning_tensors), on CPU and meta tensors. Every
kernel's own cases (its refusals on its ffi_example) are generated: test_op_bad_input_cutile_rs."""

import pytest
import torch
from torch import Tensor

from tilekit.runtime import autotune, bench, checks, port


def test_overlap_tells_one_tensor_from_neighbours_and_partial_overlaps():
    buf = torch.zeros(8, 32)
    x = buf[:, :16]
    assert checks.overlap(x, buf[:, :16]) == "same"
    assert checks.overlap(x, buf[:, 16:]) == "none"  # the other half of each row: interleaved, disjoint
    assert checks.overlap(x, buf[:, 15:31]) == "partial"  # one column in common
    assert checks.overlap(x, buf[1:, :16]) == "partial"  # shifted by a row
    assert checks.overlap(x, buf.view(16, 16)) == "partial"  # same start, other strides
    assert checks.overlap(x, buf[:, :16].view(torch.int16)[:, :16]) == "partial"  # same start, other dtype
    assert checks.overlap(x, torch.zeros(8, 16)) == "none"
    assert checks.overlap(x, buf[:0]) == "none"  # empty: no element in common


def test_overlap_ignores_the_strides_of_one_element_dims_and_tells_fake_tensors_apart():
    from torch._subclasses.fake_tensor import FakeTensorMode

    hidden = torch.zeros(4, 16)
    last = hidden[-1:, :8]  # strides (16, 1): its one row's stride places nothing
    assert checks.overlap(last, last.view(1, 8)) == "same" and last.view(1, 8).stride() == (8, 1)
    with FakeTensorMode():  # no addresses (data_ptr is 0): storage and offset decide
        a, b = torch.empty(4, 8, device="cuda"), torch.empty(4, 8, device="cuda")
        assert [checks.overlap(a, b), checks.overlap(a, a), checks.overlap(a, a[1:])] == ["none", "same", "partial"]


def test_an_out_whose_elements_share_memory_is_refused():
    x = torch.zeros(4, 8)
    with pytest.raises(ValueError, match=r"toy: out \(4, 8\) with strides \(0, 1\) has elements that share memory"):
        toy(x, torch.zeros(8), out=torch.zeros(8).expand(4, 8))
    assert not checks.internal_overlap(torch.zeros(8, 4).t()) and checks.internal_overlap(
        torch.zeros(5).as_strided((3, 3), (1, 1))
    )


def test_the_checks_doctests_pass():
    import doctest

    assert doctest.testmod(checks).failed == 0


def test_overlap_on_the_meta_device_reads_storage_offsets():
    buf = torch.empty(8, 32, device="meta")
    assert checks.overlap(buf[:, :16], buf[:, :16]) == "same"
    assert checks.overlap(buf[:, :16], buf[:, 16:]) == "none"
    assert checks.overlap(buf[:, :16], buf[1:, :16]) == "partial"
    assert checks.overlap(buf, torch.empty(8, 32, device="meta")) == "none"  # another storage


@port.entry(layouts={"x": "(..., n)", "w": "(n,)", "b": "(n,)"}, in_place=("x",))
def toy(x: "Tensor", w: "Tensor", b: "Tensor | None" = None, eps: "float" = 1e-6, *, variant="auto", out=None):
    return "ran"


def test_entry_checks_ranks_then_aliasing_before_the_body():
    x, w = torch.zeros(4, 8), torch.zeros(8)
    assert toy(x, w) == "ran" and toy(x, w, None, out=x) == "ran" and toy(x, w, out=torch.zeros(4, 8)) == "ran"
    with pytest.raises(ValueError, match=r"toy: x must be \(\.\.\., n\), a tensor of at least 1 dim, got a 0-d"):
        toy(torch.tensor(1.0), w)
    with pytest.raises(
        ValueError, match=r"toy: b must be \(n,\), a tensor of 1 dim, got a 2-d tensor of shape \(8, 1\)"
    ):
        toy(x, w, b=torch.zeros(8, 1))
    with pytest.raises(TypeError, match="toy: w must be a torch.Tensor"):
        toy(x, [0.0] * 8)
    with pytest.raises(TypeError, match="toy: out must be a torch.Tensor or None, got list"):
        toy(x, w, out=[])
    with pytest.raises(
        ValueError, match=r"toy: out overlaps x: .* pass an out that shares no memory with x, or out=x itself"
    ):
        toy(x, w, out=x[1:].flatten()[:8])
    with pytest.raises(
        ValueError, match=r"toy: out is w \(the same memory, shape and strides\), and toy runs in place only on x"
    ):
        toy(torch.zeros(1, 8), w, out=w)
    assert toy.layouts == {"x": "(..., n)", "w": "(n,)", "b": "(n,)"} and toy.in_place == ("x",)


def test_entry_refuses_a_declaration_that_names_no_argument():
    with pytest.raises(TypeError, match=r"port.entry names \['y'\]"):
        port.entry(layouts={"y": "(n,)"})(lambda x, *, out=None: x)
    with pytest.raises(TypeError, match="toy2: argument n is annotated 'list'; a torch op takes"):

        @port.entry(layouts={})
        def toy2(n: "list", *, variant="auto", out=None): ...


def test_scratch_copies_keep_shape_strides_values_and_16_byte_phase():
    rows = torch.randn(5, 40)[1:, 3:11]  # padded rows at an odd offset
    copy = port.scratch_like(rows)
    assert copy.data_ptr() != rows.data_ptr() and torch.equal(copy, rows)
    assert (copy.shape, copy.stride(), copy.data_ptr() % 16) == (rows.shape, rows.stride(), rows.data_ptr() % 16)
    x, w = torch.zeros(4, 8), torch.zeros(8)
    assert port.tuning_tensors(torch.zeros(4, 8), (x, w, 1e-6))[1] is x  # no overlap: the caller's own
    out, *args = port.tuning_tensors(x, (x, w, 1e-6))
    assert out is args[0] and out.data_ptr() != x.data_ptr() and args[1:] == [w, 1e-6]
    # out read by the export (C += A B): the candidates accumulate into a copy, the arguments are the caller's
    c, a, b = torch.ones(4, 8), torch.zeros(4, 2), torch.zeros(2, 8)
    out, *args = port.tuning_tensors(c, (a, b), mutated=(c,))
    assert out.data_ptr() != c.data_ptr() and torch.equal(out, c) and args[0] is a and args[1] is b


class Timing:
    def __init__(self, ms):
        self.ms = ms

    def stats(self):
        return {"median_ms": self.ms}


def test_in_place_autotune_tunes_on_scratch_and_writes_the_callers_tensor_once(tmp_path, monkeypatch):
    """The bug of issue 38: every candidate ran on out=x, so later ones read what earlier ones wrote.
    Here the 'kernel' doubles x in place; tuning times each candidate three times, yet x is doubled
    once, by the pick, and no candidate touched it."""
    from kernels.rms_norm import op

    monkeypatch.setenv("TILEKIT_AUTOTUNE_CACHE", str(tmp_path / "autotune.json"))
    monkeypatch.setenv("TILEKIT_TUNE_THREADS", "1")
    monkeypatch.setattr(autotune, "_MEMO", {})
    monkeypatch.setattr(autotune, "_gpu_name", lambda: "toy GPU")
    timings = iter(range(100, 0, -1))

    def fake_cupti(fn, nrep, warmup):
        for _ in range(3):
            fn()
        return Timing(next(timings))

    monkeypatch.setattr(bench, "time_cupti", fake_cupti)
    x = torch.randn(4, 8)
    x0 = x.clone()
    written = []

    def doubling_launch(op_, out, x_, *args, **variant):
        written.append(out.data_ptr())
        out.copy_(2 * x_)

    monkeypatch.setattr(port, "launch", doubling_launch)
    port.run(op, "auto", (4, 8), x, x, torch.ones(8), 1e-6)
    tuned = len(op.variants(4, 8)) * 3
    assert len(written) == tuned + 1 and written.count(x.data_ptr()) == 1 and written[-1] == x.data_ptr()
    assert torch.equal(x, 2 * x0)
