"""The timing side of issue 40 on the CPU: bench.time_interleaved's rotation over placements, its
seeded interleaving and its clock filter (with a fake sampler and a fake clock), and what
tilekit.testing.harness decides before any GPU call (which configs are a few µs, the seed, the
backends), test_settle's cases and make settle's command. The GPU half (CUPTI samples, the CUDA
graph of the hot figure, run_settle) runs in `make settle` on a GPU host."""

import pytest

from child_env import child_env, run  # tests/kit/child_env.py
from tilekit.runtime import bench, kernel, settle
from tilekit.testing import harness, suite

ROOT = harness.__file__.rsplit("/tools/", 1)[0]


def calls_for(backends, placements, log):
    """calls[backend][p]: a call that appends (backend, p) to `log`."""
    return {b: [lambda b=b, p=p: log.append((b, p)) for p in range(placements)] for b in backends}


def constant(ms=0.002):
    """A sampler that runs the call, says it took `ms` and reads the clock (as cold_sample does,
    while the call runs)."""

    def sample(fn, clock=None):
        fn()
        return ms, ["k"], clock() if clock else None

    return sample


def test_every_backend_is_timed_laps_times_on_every_placement_in_the_seeded_order():
    log = []
    calls = calls_for(["cutile-rs", "torch", "liger"], 4, log)
    measured = bench.time_interleaved(calls, laps=3, seed=11, sample=constant(), warmup=0)
    assert [len(p) for p in measured.samples_ms["torch"]] == [3, 3, 3, 3]
    expected = [(b, p) for p, order in settle.schedule(["cutile-rs", "torch", "liger"], 4, 12, 11) for b in order]
    assert log == expected  # the calls ran in the schedule's order: rounds rotate placements, backends shuffled
    again = []
    bench.time_interleaved(calls_for(["cutile-rs", "torch", "liger"], 4, again), 3, 11, sample=constant(), warmup=0)
    assert again == log
    other = []
    bench.time_interleaved(calls_for(["cutile-rs", "torch", "liger"], 4, other), 3, 12, sample=constant(), warmup=0)
    assert other != log and sorted(other) == sorted(log)


def test_samples_land_on_their_backend_and_placement():
    log = []
    calls = calls_for(["cutile-rs", "torch"], 2, log)

    def sample(fn, clock=None):
        fn()
        backend, placement = log[-1]
        return (1.0 if backend == "torch" else 2.0) + placement / 10, ["k"], None

    measured = bench.time_interleaved(calls, laps=2, seed=0, sample=sample, warmup=1)
    assert measured.samples_ms == {"cutile-rs": [[2.0, 2.0], [2.1, 2.1]], "torch": [[1.0, 1.0], [1.1, 1.1]]}
    assert measured.dropped == {"cutile-rs": 0, "torch": 0} and measured.clock_mhz is None
    assert log[:4] == [("cutile-rs", 0), ("cutile-rs", 1), ("torch", 0), ("torch", 1)]  # the warm-up, once each


def test_samples_taken_while_the_clock_had_dropped_are_discarded_and_counted():
    log = []
    calls = calls_for(["cutile-rs", "torch"], 2, log)
    # the warm-up's 4 samples set the reference (their highest, 1980), then the 12 timed ones: three
    # laps, so no (backend, placement) loses all three of its samples to the three low clocks
    timed = [1980.0] * 12
    timed[1], timed[4], timed[5], timed[7] = 1700.0, 1781.0, 1782.0, 1000.0
    clocks = iter([1900.0, 1980.0, 1950.0, 1700.0, *timed])
    measured = bench.time_interleaved(calls, 3, 5, sample=constant(), clock=lambda: next(clocks), warmup=1)
    assert measured.clock_mhz == 1980.0
    # 1700, 1781 (< 0.9 * 1980 = 1782) and 1000 dropped; 1782 exactly kept
    assert sum(measured.dropped.values()) == 3
    assert sum(len(s) for per in measured.samples_ms.values() for s in per) == 9


def test_a_placement_keeps_its_sample_at_the_highest_clock_when_every_one_fell_below():
    log = []
    calls = calls_for(["cutile-rs"], 1, log)
    clocks = iter([1980.0] + [1000.0, 1200.0, 1100.0])

    def sample(fn, clock=None):
        fn()
        return 0.001 * len(log), ["k"], clock()

    measured = bench.time_interleaved(calls, 3, 0, sample=sample, clock=lambda: next(clocks), warmup=1)
    assert measured.samples_ms == {"cutile-rs": [[0.003]]}  # the second timed sample, at 1200 MHz
    assert measured.dropped == {"cutile-rs": 2}


def test_without_a_clock_nothing_is_dropped():
    calls = calls_for(["cutile-rs", "torch"], 2, [])
    measured = bench.time_interleaved(calls, 2, 1, sample=constant(), warmup=1)
    assert measured.clock_mhz is None and measured.dropped == {"cutile-rs": 0, "torch": 0}


def test_backends_must_share_their_placements():
    calls = {"cutile-rs": [lambda: None] * 3, "torch": [lambda: None] * 2}
    with pytest.raises(ValueError, match="same placements"):
        bench.time_interleaved(calls, 1, 0, sample=constant(), warmup=0)


@pytest.mark.parametrize(
    "name,cfg,small",
    [
        ("rms_norm", {"dtype": "bfloat16", "m": 256, "n": 4096}, True),  # 4 MB: under 1 µs at the peak
        ("rms_norm", {"dtype": "float16", "m": 262144, "n": 4096}, False),  # 4 GB
        ("matmul", {"dtype": "bfloat16", "m": 16, "n": 4096, "k": 4096}, True),
        ("matmul", {"dtype": "bfloat16", "m": 8192, "n": 8192, "k": 8192}, False),  # 1.1 PFLOP: over 1 ms
    ],
)
def test_a_config_whose_floor_is_20_us_or_more_is_never_settled(name, cfg, small):
    spec = kernel.load(name)
    assert (harness.floor_ms(spec, cfg) < settle.SMALL_MS) == small


def test_the_seed_is_fixed_per_config_unless_given(monkeypatch):
    spec = kernel.load("rms_norm")
    a, b = {"dtype": "bfloat16", "m": 256, "n": 4096}, {"dtype": "bfloat16", "m": 256, "n": 8192}
    monkeypatch.delenv("TILEKIT_SETTLE_SEED", raising=False)
    assert harness.settle_seed(spec, a) == harness.settle_seed(spec, dict(reversed(list(a.items()))))
    assert harness.settle_seed(spec, a) != harness.settle_seed(spec, b)
    monkeypatch.setenv("TILEKIT_SETTLE_SEED", "42")
    assert harness.settle_seed(spec, a) == 42


def test_settle_times_the_backends_make_names_that_can_run_and_says_why_not_of_the_others(monkeypatch):
    spec = kernel.load("swiglu")
    monkeypatch.setenv("TILEKIT_SETTLE_BACKENDS", "torch,triton,nosuch,cutile")
    run_, skipped = harness.settle_backends(spec)
    assert run_[:2] == ["torch", "triton"]
    assert "nosuch" in skipped and "has no nosuch baseline" in skipped["nosuch"]
    if spec.baselines().unavailable_reason("cutile"):  # no cuda.tile here: named with its reason
        assert "cutile" in skipped and "cutile" not in run_
    monkeypatch.delenv("TILEKIT_SETTLE_BACKENDS")
    run_, skipped = harness.settle_backends(spec)
    assert set(run_) | set(skipped) == set(spec.baselines().BACKENDS)


def test_every_perf_config_has_a_settle_case():
    spec = kernel.load("silu_and_mul")
    ids = [p.id for p in suite.cases(spec, None)["test_settle"]]
    assert len(ids) == len(spec.perf_configs) == len(set(ids))
    assert "256-14336-bfloat16" in ids


def test_make_settle_times_each_kernel_in_one_process_into_its_settle_log(tmp_path):
    env = {k: v for k, v in child_env().items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "BASELINES")}
    argv = ["make", "--no-print-directory", "-n", "V=1", "KERNEL=swiglu", f"OUT_ROOT={tmp_path}", "settle"]
    done = run(argv, timeout=120, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if "test_settle" in ln)
    assert "GPUS=1" in line and "TILEKIT_SETTLE_BACKENDS='cutile,triton,torch,tilegym,liger,liger_cutile'" in line
    assert f"{tmp_path}/swiglu/reports/logs/settle_perf.full.txt -- tests/kernels/test_swiglu.py -k test_settle" in line
    assert "--figure cold" in done.stdout
    hot = run([*argv, "SETTLE_FIGURE=hot"], timeout=120, cwd=ROOT, env=env)
    assert hot.returncode == 0 and "--figure hot" in hot.stdout
