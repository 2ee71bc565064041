"""What every kernel suite does the same way: compare with the float64 reference, run the timed
case and attach its record, and name each case. The suites themselves are generated from each
kernel's declaration (tilekit.runtime.kernel, tilekit.testing.suite).
"""

from __future__ import annotations

import os

from tilekit.runtime import autotune, bench, providers
from tilekit.runtime.baseline_support import NotServed

# pytest id of a backend -> its name in records (DESIGN.md "Backend names"); a provider's id is its
# name (tilekit.runtime.providers: tilegym, liger, liger_cutile).
RECORD_NAME = {
    "cutile_rs": "cutile-rs",
    "cutile_py": "cutile",
    "triton": "triton",
    "torch": "torch",
    "torch_flash": "torch_flash",
    **{name: name for name in providers.NAMES},
}
BACKEND_IDS = tuple(RECORD_NAME)


def check_close(y, ref, tol: tuple[float, float], what: str) -> None:
    """Fail unless y (any float dtype) matches the float64 reference: every element written (no
    NaN), relative L2 error <= tol[0], max |y - ref| / (1 + |ref|) <= tol[1]."""
    import torch

    assert y.shape == ref.shape, f"{what}: shape {tuple(y.shape)} != reference {tuple(ref.shape)}"
    y64 = y.double()
    nan = int(torch.isnan(y64).sum())
    assert nan == 0, f"{what}: {nan} of {y.numel()} elements are NaN (unwritten or wrong)"
    diff = (y64 - ref).abs()
    rel_l2 = float(diff.norm() / ref.norm().clamp_min(1e-30))
    worst = float((diff / (1 + ref.abs())).max())
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


def check(spec, backend_id: str, cfg: dict, inputs: dict, y) -> None:
    """check_close against the spec's float64 reference with the spec's tolerance for cfg's dtype."""
    check_close(y, spec.reference(inputs), spec.tolerance[cfg["dtype"]], f"{backend_id} {cfg}")


def check_variant(spec, cfg: dict, inputs: dict, variant) -> None:
    """The port with `variant` into a fresh output (spec.make_out: inside rows of the config's row
    stride where it has one), checked against the reference."""
    out = spec.make_out(cfg, inputs)
    spec.run_port(inputs, out=out, variant=variant)
    check(spec, "cutile_rs", dict(cfg, variant=variant), inputs, out)


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


def run_perf(request, *, kernel: str, backend_id: str, cfg: dict, call, bytes_moved=None, flops=None) -> dict:
    """Time `call` with CUPTI and attach the record to the test (the plugin prints it). A
    provider's record carries its package's version in its env; the port's, the variant it ran
    (`variant`: autotune's pick, or the one asked for)."""
    autotune.last_pick(kernel, forget=True)
    timing = bench.time_cupti(call, nrep=nrep())
    extra = providers.record_env(RECORD_NAME[backend_id])
    record = bench.perf_record(
        kernel=kernel,
        backend=RECORD_NAME[backend_id],
        env={**bench.environment(), **extra} if extra else None,
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
