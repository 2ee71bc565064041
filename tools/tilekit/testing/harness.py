"""What every kernel suite does the same way: compare with the float64 reference, run the timed
case and attach its record, and name each case. The suites themselves are generated from each
kernel's declaration (tilekit.runtime.kernel, tilekit.testing.suite).
"""

from __future__ import annotations

import functools
import os
import statistics
import zlib

from tilekit.reports.records import PROPERTY, canonical_config
from tilekit.runtime import autotune, bench, kernel, providers, settle
from tilekit.runtime.baseline_support import NotServed

# pytest id of a backend -> its name in records (DESIGN.md "Backend names"); a provider's id is its
# name (tilekit.runtime.providers: tilegym, liger, liger_cutile).
RECORD_NAME = {
    "cutile_rs": "cutile-rs",
    "cutile_py": "cutile",
    "triton": "triton",
    "torch": "torch",
    "torch_flash": "torch_flash",
    "torch_compile": "torch_compile",
    **{name: name for name in providers.NAMES},
}
BACKEND_IDS = tuple(RECORD_NAME)


def check_close(
    y, ref, tol: tuple[float, float], what: str, norm_floor: float = 0.0, max_error_scale: str = "one"
) -> None:
    """Fail unless y (any float dtype) matches the float64 reference: every element written (no
    NaN), relative L2 error <= tol[0], max |y - ref| / (scale + |ref|) <= tol[1], scale 1 or, with
    max_error_scale "rms" (a spec's choice for long reductions: matmul's 128256-deep K, whose
    elements near zero are differences of partial sums of the tensor's RMS, NOTES.md), the larger
    of 1 and the reference's RMS. The relative L2 error
    is taken against at least the norm of a tensor of y's dtype's smallest normal (torch.finfo.tiny):
    values below it are subnormal, rounded to an absolute step, not a relative one (f16's 2^-24, for
    values below 6.1e-5), so a relative error of a tensor lying wholly below it says nothing about the
    kernel; the max error (relative to scale + |ref|) still holds (f32's and bf16's floor is ~1e-38).
    `norm_floor` raises that floor where the caller knows the scale below which a result is rounding
    noise (check_backward: a gradient that cancels to zero)."""
    import torch

    assert y.shape == ref.shape, f"{what}: shape {tuple(y.shape)} != reference {tuple(ref.shape)}"
    y64 = y.double()
    nan = int(torch.isnan(y64).sum())
    assert nan == 0, f"{what}: {nan} of {y.numel()} elements are NaN (unwritten or wrong)"
    diff = (y64 - ref).abs()
    floor = max(torch.finfo(y.dtype).tiny * max(1, ref.numel()) ** 0.5, norm_floor)
    rel_l2 = float(diff.norm() / ref.norm().clamp_min(max(floor, 1e-30)))
    scale = max(1.0, float(ref.pow(2).mean().sqrt())) if max_error_scale == "rms" and ref.numel() else 1.0
    worst = float((diff / (scale + ref.abs())).max())
    assert rel_l2 <= tol[0] and worst <= tol[1], (
        f"{what}: rel_l2={rel_l2:.3e} (tol {tol[0]:.1e}), max_err={worst:.3e} (tol {tol[1]:.1e}) at index "
        f"{tuple(int(i) for i in (diff == diff.max()).nonzero()[0])}"
    )


def case_id(backend_id: str, *parts) -> str:
    """A suite case's parameter id, backend first: ``cutile_rs-4096x4096ld4160-float16``. The one
    place these ids are made (the Makefile's -k selectors and tilekit.testing.stage_logs read them)."""
    return "-".join(str(p) for p in (backend_id, *parts))


def backend_of_case_id(param_id: str) -> str | None:
    """The backend id a parameter id made by case_id starts with, or None."""
    first = param_id.split("-", 1)[0]
    return first if first in BACKEND_IDS else None


def implementation(spec, backend_id: str, variant="auto"):
    """(inputs, out=None) -> output, for one backend of the kernel (a tilekit.runtime.kernel.KernelSpec;
    the port runs `variant`); pytest-skips with the reason when a baseline cannot run here."""
    if backend_id == "cutile_rs":
        return lambda inp, out=None: spec.run_port(inp, out=out, variant=variant)
    import pytest

    baselines = spec.baselines()
    name = RECORD_NAME[backend_id]
    if name not in baselines.BACKENDS:
        pytest.skip(f"{backend_id}: kernels/{spec.name}/baselines.py has no {name} baseline")
    reason = baselines.unavailable_reason(name)
    if reason:
        pytest.skip(f"{backend_id}: {reason}")

    def run(inp, out=None):
        try:
            return spec.run_baseline(name, inp)
        except NotServed as refused:
            pytest.skip(f"{backend_id}: {refused}")

    return run


def check(spec, backend_id: str, cfg: dict, inputs: dict, y, expected=None) -> None:
    """check_close against the spec's float64 reference with the spec's tolerance for cfg's dtype (a
    baseline's outputs made apart, stacked: tilekit.runtime.kernel.stacked), each of the spec's
    out_blocks on its own; against the rows of it the spec's reference_part gives, where it gives
    some (a reference of minutes). `expected`: what
    `expectation` gave for these inputs before the call (else it is made from them now)."""
    rows, ref = expectation(spec, inputs) if expected is None else expected
    tol, scale = spec.tolerance[cfg["dtype"]], spec.max_error_scale
    if rows is not None:
        y = kernel.stacked(y, tuple(spec.out_shape(cfg)))
        check_close(y[rows], ref, tol, f"{backend_id} {cfg} (rows of the reference_part)", max_error_scale=scale)
        return
    y = kernel.stacked(y, tuple(ref.shape))
    blocks = spec.out_blocks(cfg) if spec.out_blocks else {"": (0, ref.shape[0])}
    for name, (lo, hi) in blocks.items():
        what = f"{backend_id} {cfg}" + (f" {name} (rows {lo}:{hi})" if name else "")
        check_close(y[lo:hi], ref[lo:hi], tol, what, max_error_scale=scale)


def expectation(spec, inputs: dict) -> tuple:
    """(rows, the float64 reference of those rows) where the spec's reference_part gives some, else
    (None, the whole reference): what `check` compares an output with."""
    part = spec.reference_part(inputs) if spec.reference_part else None
    return part if part is not None else (None, spec.reference(inputs))


def checked_call(spec, backend_id: str, cfg: dict, inputs: dict, call):
    """call(inputs), checked against the reference of the inputs as they were before it (a library's
    kernel may write its result into its inputs: Liger's rope rotates q and k in place); returns
    the output."""
    expected = expectation(spec, inputs)
    y = call(inputs)
    check(spec, backend_id, cfg, inputs, y, expected)
    return y


def check_backward(spec, cfg: dict, inputs: dict, seed: int = 0) -> None:
    """The entry's gradients (autograd through its op) against the float64 reference's: the floating
    tensor inputs as leaves (but the spec's constant_inputs), a random output gradient (N(0, 1),
    seeded) backward through both, each gradient checked with the spec's tolerance for cfg's dtype
    (its backward_tolerance where it declares one; check_close). Where the spec declares
    `gradient_floor` (a gradient can cancel to zero exactly: attention whose rows each see one key,
    P = 1, so dS = dP - Δ = 0 and dq = 0, where a relative error measures nothing), each
    gradient's relative L2 error is taken against at least the norm it would have with every
    element at one rounding unit of its dtype times the output gradient's RMS
    (`gradient_norm_floor`); the max error still bounds every element. Not by default: where each
    input's gradient is a small share of one output's (cross-entropy over a vocabulary) that floor
    would pass the norm of a right gradient."""
    import torch

    leaves = {
        k: v.detach().requires_grad_()
        for k, v in inputs.items()
        if _differentiable(v) and k not in spec.constant_inputs
    }
    y = spec.entry(*(leaves.get(k, v) for k, v in inputs.items()))
    gen = torch.Generator(device=y.device).manual_seed(seed)
    grad = torch.randn(y.shape, generator=gen, device=y.device, dtype=torch.float32).to(y.dtype)
    y.backward(grad)
    ref_leaves = {k: v.detach().double().requires_grad_() for k, v in leaves.items()}
    ref = spec.reference({k: ref_leaves.get(k, v) for k, v in inputs.items()})
    ref.backward(grad.double())
    for k, leaf in leaves.items():
        assert leaf.grad is not None, f"cutile_rs {cfg}: no gradient reached {k}"
        tol = spec.backward_tolerance.get(cfg["dtype"], spec.tolerance[cfg["dtype"]])
        floor = gradient_norm_floor(leaf.grad, grad) if spec.gradient_floor else 0.0
        check_close(leaf.grad, ref_leaves[k].grad, tol, f"cutile_rs {cfg} d{k}", norm_floor=floor)


def gradient_norm_floor(grad_in, grad_out) -> float:
    """The norm of a gradient like grad_in whose every element is one rounding unit of its dtype
    (finfo.eps) times grad_out's RMS: below it, a gradient is rounding noise of the products that
    make it, and its relative error says nothing (check_backward).

    >>> import torch
    >>> round(gradient_norm_floor(torch.zeros(100, dtype=torch.bfloat16), torch.ones(7)), 6)  # 2^-7 * 1 * 10
    0.078125
    """
    import torch

    rms = float(grad_out.double().pow(2).mean().sqrt()) if grad_out.numel() else 0.0
    return torch.finfo(grad_in.dtype).eps * rms * grad_in.numel() ** 0.5


def _differentiable(v) -> bool:
    import torch

    return isinstance(v, torch.Tensor) and v.is_floating_point()


def check_variant(spec, cfg: dict, inputs: dict, variant) -> None:
    """The port with `variant` into a fresh output (spec.make_out: inside rows of the config's row
    stride where it has one), checked against the reference, its rows' padding untouched."""
    out = spec.make_out(cfg, inputs)
    spec.run_port(inputs, out=out, variant=variant)
    check(spec, "cutile_rs", dict(cfg, variant=variant), inputs, out)
    check_padding_untouched(out, f"cutile_rs {dict(cfg, variant=variant)}")


def check_padding_untouched(out, what: str) -> None:
    """An output made inside wider rows (spec.make_out with a row stride: a column slice of a
    NaN-poisoned buffer) must leave the columns past its own alone: they are the rest of the caller's
    buffer. Nothing to check for an output that is a whole tensor.

    >>> import torch
    >>> buffer = torch.full((2, 6), float("nan"))
    >>> out = buffer[:, :4]
    >>> out.zero_() is out and check_padding_untouched(out, "ok") is None
    True
    >>> buffer[1, 5] = 0.0
    >>> check_padding_untouched(out, "a store past the columns")
    Traceback (most recent call last):
    AssertionError: a store past the columns: 1 element(s) of the buffer past the output's 4 columns were written
    """
    import torch

    base = out._base
    if base is None or base.shape == out.shape or base.shape[:-1] != out.shape[:-1]:
        return
    n = out.shape[-1]
    written = int((~torch.isnan(base[..., n:])).sum())
    assert written == 0, f"{what}: {written} element(s) of the buffer past the output's {n} columns were written"


def check_in_place(spec, cfg: dict, inputs: dict, name: str, variant) -> None:
    """The port with `variant` in place of input `name` (out=inputs[name]): it returns that tensor,
    holding the reference of the inputs as they were."""
    expected = spec.reference(inputs)
    target = inputs[name]
    y = spec.run_port(inputs, out=target, variant=variant)
    assert y is target, f"in place of {name}: the port returned another tensor than out"
    check_close(y, expected, spec.tolerance[cfg["dtype"]], f"cutile_rs {dict(cfg, variant=variant)} in place of {name}")


def nrep() -> int:
    return int(os.environ.get("TILEKIT_NREP", "100"))


def rate(spec, cfg: dict) -> dict:
    """The keyword a config's record is rated by: its flops where the kernel declares them, else its bytes."""
    return {"flops": spec.flops(cfg)} if spec.flops else {"bytes_moved": spec.bytes_moved(cfg)}


def record_env(backend: str) -> dict | None:
    """A record's env: bench.environment() with a provider's package version, None (the default) for ours."""
    extra = providers.record_env(backend)
    return {**bench.environment(), **extra} if extra else None


def run_perf(request, *, kernel: str, backend_id: str, cfg: dict, call, bytes_moved=None, flops=None) -> dict:
    """Time `call` with CUPTI and attach the record to the test (the plugin prints it). A
    provider's record carries its package's version in its env; the port's, the variant it ran
    (`variant`: autotune's pick, or the one asked for)."""
    autotune.last_pick(kernel, forget=True)
    timing = bench.time_cupti(call, nrep=nrep())
    record = bench.perf_record(
        kernel=kernel,
        backend=RECORD_NAME[backend_id],
        env=record_env(RECORD_NAME[backend_id]),
        config=cfg,
        timing=timing,
        test=request.node.nodeid,
        bytes_moved=bytes_moved,
        flops=flops,
    )
    picked = autotune.last_pick(kernel)  # what the timed calls ran: autotune's pick, or the one asked for
    if backend_id == "cutile_rs" and picked is not None:
        record["variant"] = picked
    request.node.user_properties.append(("tilekit_perf_record", record))
    return record


# -- configs of a few µs, settled in one process (issue 40; docs/reports.md "Configs of a few µs") --

SETTLE_PLACEMENTS = 8  # allocations of the inputs each backend is timed on
SETTLE_LAPS = 12  # rounds per placement: each backend's samples on one placement
HOT_LAUNCHES_PER_PLACEMENT = 8  # the hot graph holds 8 launches per placement, rotating through them
HOT_REPLAYS = 30
SPACER_BYTES = 1 << 20  # placement i follows a spacer of (2i + 1) MiB + i * 4 KiB


def placements(spec, cfg: dict, k: int, seed: int) -> tuple[list[dict], list]:
    """k allocations of the config's inputs, one value set (make_inputs with one seed), each after
    a spacer allocation of its own size, so the sets start at different addresses, 2 MiB segments
    and 4 KiB page offsets (PyTorch's caching allocator rounds every block to 512 bytes, so no
    finer offset can be had this way). Returns (the input sets, the spacers: keep them alive)."""
    import torch

    spacers, sets = [], []
    for i in range(k):
        size = SPACER_BYTES * (2 * i + 1) + 4096 * i
        spacers.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        sets.append(spec.make_inputs(cfg, seed=seed))
    return sets, spacers


def floor_ms(spec, cfg: dict) -> float:
    """The least time a config can take on the fastest GPU the kit knows: its bytes at the highest
    PEAK_GBPS and, where it declares flops, its flops at the highest PEAK_TFLOPS, whichever is
    longer. A config whose floor is SMALL_MS or more is never a few µs: test_settle skips it
    without a GPU call."""
    floor = spec.bytes_moved(cfg) / (max(bench.PEAK_GBPS.values()) * 1e9) * 1e3
    if spec.flops:
        floor = max(floor, spec.flops(cfg) / (max(bench.PEAK_TFLOPS.values()) * 1e12) * 1e3)
    return floor


def settle_seed(spec, cfg: dict) -> int:
    """The schedule's seed: TILEKIT_SETTLE_SEED, else one fixed per kernel and config (a rerun
    interleaves alike); recorded in every settled record."""
    given = os.environ.get("TILEKIT_SETTLE_SEED")
    return int(given) if given else zlib.crc32(f"{spec.name}:{canonical_config(cfg)}".encode())


def settle_backends(spec) -> tuple[list[str], dict[str, str]]:
    """(the baselines' record names to time beside the port, {name: why not}): those
    TILEKIT_SETTLE_BACKENDS names (comma-separated; make passes BASELINES), else every backend the
    kernel declares, less those that cannot run here."""
    declared = spec.baselines().BACKENDS
    wanted = [b for b in os.environ.get("TILEKIT_SETTLE_BACKENDS", "").split(",") if b] or list(declared)
    run, skipped = [], {}
    for name in wanted:
        why = f"kernels/{spec.name}/baselines.py has no {name} baseline" if name not in declared else None
        why = why or spec.baselines().unavailable_reason(name)
        if why:
            skipped[name] = why
        else:
            run.append(name)
    return run, skipped


def run_settle(request, spec, cfg: dict) -> list[dict]:
    """test_settle: a config of a few µs timed by `settled_records`, its records attached to the
    test. Skips a config whose floor or whose port takes SMALL_MS or more (test_perf's records
    judge it)."""
    import pytest

    floor = floor_ms(spec, cfg)
    if floor >= settle.SMALL_MS:
        pytest.skip(f"not a config of a few µs: its floor at the GPU's peak is {floor * 1e3:.1f} µs")
    port = implementation(spec, "cutile_rs")
    probe_inputs = spec.make_inputs(cfg)
    checked_call(spec, "cutile_rs", cfg, probe_inputs, port)
    probe = statistics.median(bench.time_cupti(functools.partial(port, probe_inputs), nrep=20).samples_ms)
    if probe >= settle.SMALL_MS:
        pytest.skip(f"not a config of a few µs: the port takes {probe * 1e3:.1f} µs >= {settle.SMALL_MS * 1e3:g} µs")
    records = settled_records(spec, cfg, test=request.node.nodeid)
    request.node.user_properties += [(PROPERTY, r) for r in records]
    return records


def settled_records(
    spec, cfg: dict, *, test: str, names: list[str] | None = None, seed: int | None = None
) -> list[dict]:
    """Time one config as docs/make.md ("settle") says: the port and the baselines `names`
    (default: settle_backends') in this one process, each checked against the reference first, on
    SETTLE_PLACEMENTS placements of the inputs, interleaved in a seeded random order
    (bench.time_interleaved: cold, L2 flushed, samples at a low SM clock dropped), then the hot
    figure (bench.time_hot). One perf record per backend, with the `settle` key."""
    skipped: dict = {}
    if names is None:
        names, skipped = settle_backends(spec)
    seed = settle_seed(spec, cfg) if seed is None else seed
    port = implementation(spec, "cutile_rs")
    sets, _spacers = placements(spec, cfg, SETTLE_PLACEMENTS, seed)
    calls = {RECORD_NAME["cutile_rs"]: [functools.partial(port, inputs) for inputs in sets]}
    for name in names:
        run = functools.partial(spec.run_baseline, name)
        try:
            checked_call(spec, name, cfg, sets[0], run)  # a fast wrong answer is not a result
        except NotServed as refused:
            skipped[name] = str(refused)
            continue
        except Exception as e:  # noqa: BLE001 - a broken baseline is named in the port's record, not fatal
            skipped[name] = f"{type(e).__name__}: {e}"[:300]
            continue
        calls[name] = [functools.partial(run, inputs) for inputs in sets]
    autotune.last_pick(spec.name, forget=True)
    measured = bench.time_interleaved(calls, SETTLE_LAPS, seed)
    hot = bench.time_hot(calls, HOT_LAUNCHES_PER_PLACEMENT * len(sets), HOT_REPLAYS, seed + 1)
    session = f"{spec.name}:{canonical_config(cfg)}:{seed}"
    picked = autotune.last_pick(spec.name)
    records = []
    for backend, per_placement in measured.samples_ms.items():
        timing = bench.Timing([ms for s in per_placement for ms in s], measured.kernels[backend])
        record = bench.perf_record(
            kernel=spec.name,
            backend=backend,
            env=record_env(backend),
            config=cfg,
            timing=timing,
            test=test,
            median_ms=settle.figure(per_placement)["figure_ms"],
            **rate(spec, cfg),
        )
        hot_ms = hot.get(backend)
        is_port = backend == RECORD_NAME["cutile_rs"]
        record["settle"] = {
            "session": session,
            "seed": seed,
            "placements": len(sets),
            "laps": SETTLE_LAPS,
            "samples_ms": per_placement,
            "dropped": measured.dropped[backend],
            "clock_mhz": measured.clock_mhz,
            "hot_ms": hot_ms if isinstance(hot_ms, list) else None,
            "hot_launches": HOT_LAUNCHES_PER_PLACEMENT * len(sets),
            **({"hot_error": hot_ms} if isinstance(hot_ms, str) else {}),
            **({"not_timed": skipped} if is_port and skipped else {}),
        }
        if is_port and picked is not None:
            record["variant"] = picked
        records.append(record)
    return records
