"""tilekit.runtime.autotune and the GPU-free parts of tilekit.runtime.bench: the winner and its cache, skipped
variants, and the record a timed case produces."""

import json

import pytest

from tilekit.runtime import autotune, bench


class FakeTiming:
    def __init__(self, ms):
        self.ms = ms

    def stats(self):
        return {"median_ms": self.ms}


def fake_timer(times: dict):
    """A timer that returns a fixed median per variant (fails for variants mapped to an exception)."""

    def timer(call):
        result = call()
        if isinstance(result, Exception):
            raise result
        return FakeTiming(times[result])

    return timer


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "autotune.json"
    monkeypatch.setenv("TILEKIT_AUTOTUNE_CACHE", str(path))
    monkeypatch.delenv("TILEKIT_AUTOTUNE", raising=False)
    autotune._MEMO.clear()
    return path


VARIANTS = [{"block": 1024, "rows": 8}, {"block": 1024, "rows": 16}, {"block": 2048, "rows": 4}]


def make_call(v):
    return lambda: v["rows"]


def test_fastest_variant_wins_and_is_cached_per_gpu_kernel_and_key(cache):
    timer = fake_timer({8: 0.30, 16: 0.26, 4: 0.41})
    key = {"dtype": "float16", "n": 1024, "m_class": 262144}
    assert autotune.best("rms_norm", key, VARIANTS, make_call, gpu="NVIDIA H200", timer=timer) == VARIANTS[1]
    entry = json.loads(cache.read_text())["NVIDIA H200"]["rms_norm"][autotune.key_string(key)]
    assert entry["variant"] == VARIANTS[1] and entry["median_ms"] == 0.26
    assert [t["median_ms"] for t in entry["tried"]] == [0.30, 0.26, 0.41]


def test_cached_winner_is_reused_without_timing(cache):
    key = {"n": 1}
    autotune.best("k", key, VARIANTS, make_call, gpu="G", timer=fake_timer({8: 1.0, 16: 2.0, 4: 3.0}))
    autotune._MEMO.clear()  # a new process: only the file remains

    def no_timer(call):
        raise AssertionError("tuned again although the cache had a winner")

    assert autotune.best("k", key, VARIANTS, make_call, gpu="G", timer=no_timer) == VARIANTS[0]


def test_a_candidate_added_since_the_winner_was_cached_tunes_the_class_again(cache):
    # a kernel's list grew (as matmul's did with the 8-warp tiles): the class is timed again, the new
    # candidate with the others, rather than the old winner served without a look at it
    key = {"n": 6}
    autotune.best("k", key, VARIANTS[:2], make_call, gpu="G", timer=fake_timer({8: 1.0, 16: 2.0}))
    autotune._MEMO.clear()  # a new process
    timer = fake_timer({8: 1.0, 16: 2.0, 4: 0.5})
    assert autotune.best("k", key, VARIANTS, make_call, gpu="G", timer=timer) == VARIANTS[2]
    entry = json.loads(cache.read_text())["G"]["k"][autotune.key_string(key)]
    assert [t["variant"] for t in entry["tried"]] == VARIANTS
    autotune._MEMO.clear()  # and a list that shrank keeps the winner it still holds, untimed

    def no_timer(call):
        raise AssertionError("tuned again although the cache timed every candidate")

    assert autotune.best("k", key, VARIANTS[1:], make_call, gpu="G", timer=no_timer) == VARIANTS[2]


def test_autotune_doctests_pass():
    import doctest

    assert doctest.testmod(autotune).failed == 0


def test_another_gpu_name_tunes_again(cache):
    key = {"n": 1}
    autotune.best("k", key, VARIANTS, make_call, gpu="G1", timer=fake_timer({8: 1.0, 16: 2.0, 4: 3.0}))
    assert (
        autotune.best("k", key, VARIANTS, make_call, gpu="G2", timer=fake_timer({8: 3.0, 16: 2.0, 4: 1.0}))
        == VARIANTS[2]
    )
    assert set(json.loads(cache.read_text())) == {"G1", "G2"}


def test_a_variant_that_fails_is_skipped_with_a_note(cache):
    def call(v):
        return lambda: RuntimeError("tileiras failed") if v["rows"] == 16 else v["rows"]

    timer = fake_timer({8: 0.5, 4: 0.4})
    assert autotune.best("k", {"n": 2}, VARIANTS, call, gpu="G", timer=timer) == VARIANTS[2]
    entry = json.loads(cache.read_text())["G"]["k"]['{"n":2}']
    assert entry["skipped"] == [{"variant": VARIANTS[1], "error": "tileiras failed"}]


def test_every_variant_failing_raises_with_the_last_error(cache):
    def call(v):
        return lambda: RuntimeError(f"bad {v['rows']}")

    with pytest.raises(RuntimeError, match="every variant failed; last error: bad 4"):
        autotune.best("k", {"n": 3}, VARIANTS, call, gpu="G", timer=fake_timer({}))


def test_stale_cached_variant_outside_the_current_space_is_retuned(cache):
    key = autotune.key_string({"n": 4})
    cache.write_text(json.dumps({"G": {"k": {key: {"variant": {"block": 64, "rows": 1}, "median_ms": 0.1}}}}))
    assert (
        autotune.best("k", {"n": 4}, VARIANTS, make_call, gpu="G", timer=fake_timer({8: 3.0, 16: 1.0, 4: 2.0}))
        == VARIANTS[1]
    )


def test_autotune_off_takes_the_first_variant(cache, monkeypatch):
    monkeypatch.setenv("TILEKIT_AUTOTUNE", "0")
    assert autotune.best("k", {"n": 5}, VARIANTS, make_call, gpu="G") == VARIANTS[0]
    assert not cache.exists()


# -- bench: records ------------------------------------------------------------------------------

ENV = {"gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0"}


def test_unique_drops_unset_knobs_and_repeats_keeping_the_order():
    candidates = [{"block": 16, "warps": None}, {"block": 16}, {"block": 32, "warps": 8}, {"block": 16, "warps": None}]
    assert autotune.unique(candidates) == [{"block": 16}, {"block": 32, "warps": 8}]


def test_pick_resolves_auto_default_and_an_explicit_variant(cache, monkeypatch):
    monkeypatch.setenv("TILEKIT_AUTOTUNE", "0")
    kw = {"default": {"block": -1}, "key": {"n": 6}, "candidates": VARIANTS, "make_call": make_call}
    assert autotune.pick("k", "auto", **kw) == VARIANTS[0]
    assert autotune.pick("k", "default", **kw) == {"block": -1}
    assert autotune.pick("k", {"block": 64}, **kw) == {"block": 64}


def test_last_pick_is_what_the_last_call_ran_until_forgotten(cache, monkeypatch):
    """harness.run_perf names the port's variant in its record from last_pick: it must follow every
    pick of that kernel only, and be gone once forgotten (so a stale one is never recorded)."""
    monkeypatch.setenv("TILEKIT_AUTOTUNE", "0")
    kw = {"default": {"block": -1}, "key": {"n": 6}, "candidates": VARIANTS, "make_call": make_call}
    autotune.last_pick("k", forget=True)
    assert autotune.last_pick("k") is None
    autotune.pick("k", "auto", **kw)
    autotune.pick("other", {"block": 64}, **kw)
    assert autotune.last_pick("k") == VARIANTS[0]
    autotune.pick("k", "default", **kw)
    assert autotune.last_pick("k", forget=True) == {"block": -1}
    assert autotune.last_pick("k") is None


def test_timing_stats_are_median_mean_std_min_max():
    t = bench.Timing(samples_ms=[1.0, 3.0, 2.0, 10.0])
    assert t.stats() == {
        "median_ms": 2.5,
        "mean_ms": 4.0,
        "std_ms": pytest.approx(3.5355, abs=1e-4),
        "min_ms": 1.0,
        "max_ms": 10.0,
        "nrep": 4,
    }


def test_record_has_throughput_peak_inventory_and_env():
    t = bench.Timing(samples_ms=[0.5, 0.5, 0.5], kernels=["k_b", "k_a", "k_a"])
    rec = bench.perf_record(
        kernel="rms_norm",
        backend="cutile-rs",
        config={"m": 1},
        timing=t,
        test="t::x",
        bytes_moved=2_000_000_000,
        env=ENV,
    )
    assert rec["gbps"] == 4000.0 and rec["peak_gbps"] == 4800.0
    assert rec["launches"] == 3 and rec["kernels"] == ["k_a", "k_b"]
    assert rec["timer"] == "cupti" and rec["l2_flush"] is True and rec["env"] == ENV
    assert "inventory_stable" not in rec


def test_record_flags_a_kernel_inventory_that_changed_between_samples():
    t = bench.Timing(samples_ms=[1.0], kernels=["k"], inventory_stable=False)
    rec = bench.perf_record(
        kernel="k", backend="torch", config={}, timing=t, test="t", flops=2e12, env={"gpu": "other"}
    )
    assert rec["inventory_stable"] is False
    assert rec["tflops"] == 2000.0 and "peak_tflops" not in rec  # no peak known for that GPU


def test_cutile_crate_version_is_read_from_the_lock(tmp_path):
    lock = tmp_path / "Cargo.lock"
    lock.write_text(
        '[[package]]\nname = "cutile-ir"\nversion = "9.9.9"\n\n[[package]]\nname = "cutile"\nversion = "0.5.0"\n'
    )
    assert bench.cutile_crate_version(lock) == "0.5.0"
    assert bench.cutile_crate_version(tmp_path / "missing.lock") == "unknown"
    assert bench.cutile_crate_version() == "0.5.0"  # the project's own lock


# -- harness: the glue every kernel suite shares -------------------------------------------------


def test_harness_implementation_runs_a_baseline_through_the_spec_and_checks_it():
    import torch

    from kernels.rms_norm.spec import SPEC as spec
    from tilekit.testing import harness

    cfg = {"dtype": "float32", "m": 3, "n": 1000}
    inputs = spec.make_inputs(cfg, device="cpu", seed=0)
    y = harness.implementation(spec, "torch")(inputs)
    harness.check(spec, "torch", cfg, inputs, y)
    with pytest.raises(AssertionError, match="rel_l2="):
        harness.check(spec, "torch", cfg, inputs, y + 0.1)
    with pytest.raises(AssertionError, match="1 of 3000 elements are NaN"):
        y[0, 0] = float("nan")
        harness.check(spec, "torch", cfg, inputs, y)
    assert torch.isfinite(spec.reference(inputs)).all()


def test_an_output_of_blocks_is_judged_block_by_block():
    """fused_linear_cross_entropy's [dh; dW] (SPEC.out_blocks): a dh of zeros fails as dh (relative
    error 1), where the stacked tensor's is under 0.1 (dh is 6 % of its norm here, 1.6 % at 64 x 32000
    x 4096: under the bf16 bound); the reference passes."""

    from tilekit.runtime import kernel
    from tilekit.testing import harness

    spec = kernel.load("fused_linear_cross_entropy")
    cfg = {"dtype": "bfloat16", "m": 8, "vocab": 4000, "hidden": 256}
    inputs = spec.make_inputs(cfg, device="cpu", seed=0)
    ref = spec.reference(inputs)
    harness.check(spec, "cutile_rs", cfg, inputs, ref.bfloat16())
    wrong = ref.clone()
    wrong[:8] = 0
    harness.check_close(wrong.bfloat16(), ref, (0.1, 0.1), "the stack as one")
    with pytest.raises(AssertionError, match=r"dh \(rows 0:8\): rel_l2=1.000e\+00"):
        harness.check(spec, "cutile_rs", cfg, inputs, wrong.bfloat16())


def test_check_close_measures_subnormal_results_against_the_dtypes_normal_floor():
    """A tensor wholly below f16's smallest normal is rounded to 2^-24 steps: its relative L2 error is
    taken against the normal floor; the same error on normal values, or in f32, still fails."""
    import torch

    from tilekit.testing import harness

    ref = torch.full((1, 1), 1.4e-6, dtype=torch.float64)
    harness.check_close((ref + 1.3e-7).half(), ref, (4e-3, 1e-2), "f16 subnormal")
    with pytest.raises(AssertionError, match="rel_l2="):
        harness.check_close((ref + 1.3e-7).float(), ref, (4e-3, 1e-2), "f32")
    with pytest.raises(AssertionError, match="rel_l2="):
        harness.check_close((ref * 1e3 + 1.3e-4).half(), ref * 1e3, (4e-3, 1e-2), "f16 normal")


def test_a_gradient_that_cancels_to_zero_is_judged_by_its_rounding_floor():
    """A zero reference gradient (attention rows that each see one key) against a kernel's rounding
    noise passes with the gradient floor and fails without it; an error of one rounding unit on
    every element of a gradient of normal size still fails with it."""
    import torch

    from tilekit.testing import harness

    ref, grad_out = torch.zeros(2, 200, 64, dtype=torch.float64), torch.ones(2, 200, 64)
    noise = torch.full_like(ref, 1.4e-6).to(torch.bfloat16)
    floor = harness.gradient_norm_floor(noise, grad_out)
    harness.check_close(noise, ref, (1.2e-2, 2.4e-2), "dq = 0", norm_floor=floor)
    with pytest.raises(AssertionError, match="rel_l2="):
        harness.check_close(noise, ref, (1.2e-2, 2.4e-2), "dq = 0 without the floor")
    big = torch.full_like(ref, 0.5)
    with pytest.raises(AssertionError, match="rel_l2="):
        harness.check_close((big * 1.05).to(torch.bfloat16), big, (1.2e-2, 2.4e-2), "5 % off", norm_floor=floor)


def test_the_rms_max_error_scale_judges_deep_products_by_the_tensors_size():
    """Matmul at K = 128256 (H100, 2026-12-06): elements of RMS ~358, the worst absolute error 0.1 at
    an element near zero. "rms" passes it (the error is 3e-4 of the tensor's scale; bf16 rounds
    its neighbours by up to 1), "one" does not; an error of 10 % of the scale fails both."""
    import torch

    from tilekit.testing import harness

    ref = torch.randn(64, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 358
    ref[0, 0] = 0.05
    y = ref.clone()
    y[0, 0] += 0.1
    harness.check_close(y, ref, (8e-3, 1.6e-2), "K = 128256", max_error_scale="rms")
    with pytest.raises(AssertionError, match="max_err="):
        harness.check_close(y, ref, (8e-3, 1.6e-2), "K = 128256, scale one")
    y[0, 0] += 35.8
    with pytest.raises(AssertionError, match="max_err="):
        harness.check_close(y, ref, (8e-3, 1.6e-2), "10 % of the scale", max_error_scale="rms")


def test_case_ids_start_with_the_backend():
    from tilekit.testing import harness

    assert harness.case_id("cutile_rs", "4096x4096ld4160", "float16") == "cutile_rs-4096x4096ld4160-float16"
    assert harness.backend_of_case_id("cutile_py-65536-1024-float16") == "cutile_py"
    assert harness.backend_of_case_id("37x1000-float16") is None


def test_harness_implementation_skips_a_baseline_that_cannot_run_with_its_reason(monkeypatch):
    from kernels.rms_norm import baselines
    from kernels.rms_norm.spec import SPEC as spec
    from tilekit.testing import harness

    monkeypatch.setattr(baselines, "_CUTILE_ERROR", ModuleNotFoundError("No module named 'cuda.tile'"))
    with pytest.raises(pytest.skip.Exception, match="cutile_py: cuda.tile is not installed"):
        harness.implementation(spec, "cutile_py")


# -- warm: the candidates compile side by side before they are timed ------------------------------


def test_warm_calls_every_variant_once_side_by_side_before_timing(cache):
    """The first variant runs alone (it loads the library), then the others' first calls wait at a
    barrier for each other: it only opens when they run at the same time (one after another it
    would break after its timeout)."""
    import threading

    barrier, calls = threading.Barrier(len(VARIANTS) - 1, timeout=30), []

    def call_of(v):
        def call():
            if len(calls) < len(VARIANTS):
                calls.append(v["rows"])
                if len(calls) > 1 or v is not VARIANTS[0]:
                    barrier.wait()
            return v["rows"]

        return call

    entry = autotune.tune(VARIANTS, call_of, timer=fake_timer({8: 0.3, 16: 0.2, 4: 0.4}), workers=3)
    assert calls[0] == 8 and sorted(calls) == [4, 8, 16] and entry["variant"] == VARIANTS[1] and entry["skipped"] == []


def test_a_failure_while_warming_is_a_hint_the_timed_call_decides(cache):
    """A first call that fails under load (rows 16: only while warming) is timed all the same; one
    that fails every time (rows 4) is skipped with its error."""
    calls = {8: 0, 16: 0, 4: 0}

    def call_of(v):
        def call():
            calls[v["rows"]] += 1
            if v["rows"] == 4 or (v["rows"] == 16 and calls[16] == 1):
                raise RuntimeError(f"tileiras: out of memory ({v['rows']})")
            return v["rows"]

        return call

    def timer(call):
        return FakeTiming({8: 0.3, 16: 0.2}[call()])

    entry = autotune.tune(VARIANTS, call_of, timer=timer, workers=2)
    assert calls == {8: 2, 16: 2, 4: 2} and entry["variant"] == VARIANTS[1]
    assert entry["skipped"] == [{"variant": VARIANTS[2], "error": "tileiras: out of memory (4)"}]


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_tune_threads_must_be_a_whole_number_of_at_least_one(monkeypatch, value):
    monkeypatch.setenv("TILEKIT_TUNE_THREADS", value)
    with pytest.raises(ValueError, match="TILEKIT_TUNE_THREADS"):
        autotune.threads()


def test_one_tune_thread_leaves_the_first_call_to_the_timer(cache, monkeypatch):
    monkeypatch.setenv("TILEKIT_TUNE_THREADS", "1")
    calls = []
    entry = autotune.tune(
        VARIANTS, lambda v: lambda: calls.append(v["rows"]) or v["rows"], timer=fake_timer({8: 1, 16: 2, 4: 3})
    )
    assert calls == [8, 16, 4] and entry["variant"] == VARIANTS[0]


def test_rows_whose_phase_their_sizes_do_not_imply_tune_apart():
    """port.with_alignment on real (CPU) tensors: rows sliced out of wider ones start off 16 bytes
    where contiguous rows of that n would not (the aligned entries run there, or cannot, when x's and
    out's heads differ), so they tune apart; contiguous and 16-byte-padded rows keep the key."""
    import torch

    from tilekit.runtime import port

    key = {"dtype": "float16", "n": 4096, "m_class": 8}
    wide = lambda cols: torch.empty(8, cols, dtype=torch.float16)  # noqa: E731
    x_sliced = wide(4097)[:, :4096]
    assert port.with_alignment(key, [wide(4096), wide(4096), torch.empty(4096)]) is key
    assert port.with_alignment(key, [wide(4096), wide(4104)[:, :4096]]) is key  # padded to 16 bytes
    assert port.with_alignment(key, [wide(4096), x_sliced]) == dict(key, rows="0,2")  # heads differ
    assert port.with_alignment(key, [wide(4097)[:, :4096], x_sliced]) == dict(key, rows="2,2")
    one_row = wide(4097)[:1, :4096]  # a single row has no phase to speak of
    assert port.with_alignment(key, [one_row, one_row]) is key
    w = torch.empty(4096, 8, dtype=torch.float16)  # a GEMM operand given as w.t(): not rows
    assert port.with_alignment(key, [wide(4096), w.t()]) is key
    key_4097 = {"dtype": "float16", "n": 4097, "m_class": 8}
    assert port.with_alignment(key_4097, [wide(4097), wide(4097)]) is key_4097  # n tells


def test_a_base_off_16_bytes_tunes_apart_and_aligned_keys_stay_as_they_were():
    """port.with_alignment: a slice at an odd offset gets its own tuned winner (its entries and fastest
    tile differ: the launcher hints no 16-byte accesses), aligned calls keep the key they had."""
    import doctest
    from types import SimpleNamespace

    from tilekit.runtime import port

    at = lambda p: SimpleNamespace(data_ptr=lambda: p)  # noqa: E731
    key = {"dtype": "float16", "n": 4097, "m_class": 16384}
    assert port.with_alignment(key, [at(0), at(4096), 1e-6, None]) is key
    assert port.with_alignment(key, [at(0), at(4096 + 2)]) == dict(key, bases="off16")
    assert doctest.testmod(port).failed == 0


def test_forget_warm_forgets_one_kernels_variant_only(monkeypatch):
    """The suite's CaptureNotWarm test makes the default variant cold again (an earlier test may have
    run it on tensors of the same shapes); the kernel's other variants and other kernels stay warm."""
    from tilekit.runtime import port

    default = {"occupancy": -1, "warps": -1}
    warm = {
        port.call_signature("rope", default, ()) + ("a",),
        port.call_signature("rope", dict(reversed(default.items())), ()) + ("b",),  # the same variant
        port.call_signature("rope", "auto", ()) + ("a",),
        port.call_signature("softmax", default, ()) + ("a",),
    }
    monkeypatch.setattr(port, "_WARM", set(warm))
    port.forget_warm("rope", default)
    assert port._WARM == {
        port.call_signature("rope", "auto", ()) + ("a",),
        port.call_signature("softmax", default, ()) + ("a",),
    }


def test_a_second_export_on_the_same_tensors_is_a_call_of_its_own_for_capture(monkeypatch):
    """matmul_acc_ runs cutile_matmul_acc on matmul's very (c, a, b): a warm matmul must not let a
    first matmul_acc_ through inside CUDA-graph capture (it would JIT or tune there); forget_warm
    forgets both."""
    import torch

    from tilekit.runtime import port

    tensors = (torch.zeros(4, 8), torch.zeros(4, 2), torch.zeros(2, 8))
    plain = port.call_signature("matmul", "auto", tensors)
    acc = port.call_signature("matmul", "auto", tensors, "cutile_matmul_acc")
    assert plain != acc and acc[:-1] == plain
    monkeypatch.setattr(port, "_WARM", {plain, acc})
    port.forget_warm("matmul", "auto")
    assert not {plain, acc} & port._WARM
