"""CUPTI timing, one policy for the port and every baseline (DESIGN.md "Measuring").

    timing = time_cupti(lambda: op(x, w), nrep=100)
    record = perf_record(kernel="rms_norm", backend="cutile-rs", config={...}, timing=timing,
                         bytes_moved=..., test=request.node.nodeid)

How a sample is taken: the L2 is flushed (a buffer of twice the L2 size is zeroed) and the device
synchronized *outside* the profiler; then one `torch.profiler` session (CUPTI underneath) wraps
one call and a synchronize. The sample is the sum of the durations of every device activity the
call launched (kernels, memcpy, memset), so launch gaps and host time are excluded and extra
launches (a hidden copy, a fill) are charged to the backend that made them. The kernel inventory
(names and count per call) goes into the record, and a call whose inventory changes between
samples (a JIT or autotune inside the timed region) is flagged.

Warm-up: `warmup` calls (the first one compiles and autotunes) before any sample is kept.
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# Datasheet peaks per GPU name, for "% of peak" (DESIGN.md: the H200's 4.8 TB/s).
PEAK_GBPS = {"NVIDIA H200": 4800.0, "NVIDIA H100 80GB HBM3": 3350.0}
# Dense bf16/f16 tensor-core TFLOP/s.
PEAK_TFLOPS = {"NVIDIA H200": 989.0, "NVIDIA H100 80GB HBM3": 989.0}


@dataclass
class Timing:
    samples_ms: list[float]
    kernels: list[str] = field(default_factory=list)  # one call's device activities, in order
    inventory_stable: bool = True
    l2_flush: bool = True

    def stats(self) -> dict:
        s = self.samples_ms
        return {
            "median_ms": statistics.median(s),
            "mean_ms": statistics.fmean(s),
            "std_ms": statistics.pstdev(s) if len(s) > 1 else 0.0,
            "min_ms": min(s),
            "max_ms": max(s),
            "nrep": len(s),
        }


def device_activities(prof) -> list[tuple[str, float]]:
    """(name, duration in ms) of every CUDA device activity in a finished profiler session, in
    start order. User annotations (ranges, not work) are left out."""
    import torch

    events = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.device_type() == torch.autograd.DeviceType.CUDA and not e.is_user_annotation()
    ]
    events.sort(key=lambda e: e.start_ns())
    return [(e.name(), e.duration_ns() / 1e6) for e in events]


@functools.lru_cache(maxsize=None)
def _flush_buffer(device_index: int):
    import torch

    l2 = getattr(torch.cuda.get_device_properties(device_index), "L2_cache_size", 0) or 64 << 20
    return torch.empty(2 * l2, dtype=torch.int8, device=f"cuda:{device_index}")


def time_cupti(fn, *, nrep: int = 100, warmup: int = 5, flush: bool = True) -> Timing:
    """Time `fn()` (one call of the operation, on the current device) with CUPTI."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if nrep < 1:
        raise ValueError(f"nrep={nrep}: need at least one sample")
    for _ in range(max(1, warmup)):
        fn()
    torch.cuda.synchronize()
    buf = _flush_buffer(torch.cuda.current_device()) if flush else None
    samples, first, stable = [], None, True
    for _ in range(nrep):
        if buf is not None:
            buf.zero_()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        acts = device_activities(prof)
        if not acts:
            raise RuntimeError(
                "CUPTI saw no device activity for this call: is the op running on the GPU, "
                "and is the profiler (kineto) available? see `make doctor`"
            )
        names = [n for n, _ in acts]
        if first is None:
            first = names
        elif names != first:
            stable = False
        samples.append(sum(ms for _, ms in acts))
    return Timing(samples_ms=samples, kernels=first or [], inventory_stable=stable, l2_flush=flush)


# -- environment fingerprint ---------------------------------------------------------------------


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def cutile_crate_version(lock: Path | None = None) -> str:
    """The `cutile` version pinned in cutile_kernels/Cargo.lock."""
    lock = lock or Path(__file__).resolve().parents[3] / "cutile_kernels" / "Cargo.lock"
    try:
        text = lock.read_text()
    except OSError:
        return "unknown"
    for block in text.split("[[package]]"):
        if 'name = "cutile"' in block:
            for line in block.splitlines():
                if line.startswith("version = "):
                    return line.split('"')[1]
    return "unknown"


def tileiras_release() -> str:
    for root in (
        os.environ.get("CUTILE_TILEIRAS_PATH"),
        os.environ.get("CUDA_TOOLKIT_PATH"),
        os.environ.get("CUDA_HOME"),
    ):
        if not root:
            continue
        exe = Path(root) if root.endswith("tileiras") else Path(root) / "bin" / "tileiras"
        if exe.is_file():
            try:
                out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=20).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            for tok in out.split(","):
                if tok.strip().startswith("V"):
                    return tok.strip()
    return "unknown"


@functools.lru_cache(maxsize=None)
def environment() -> dict:
    """What a reader needs to trust and reproduce a number; cached per process."""
    import torch

    driver = "unknown"
    try:
        driver = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            .stdout.split("\n")[0]
            .strip()
            or driver
        )
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "driver": driver,
        "cuda": torch.version.cuda or "none",
        "torch": str(torch.__version__),  # a TorchVersion (str subclass) otherwise
        "triton": _version("triton"),
        "cuda_tile": _version("cuda-tile"),
        "cutile_crate": cutile_crate_version(),
        "tileiras": tileiras_release(),
    }


def physical_gpu(visible: str | None, device: int) -> int | str:
    """The GPU that CUDA device ``device`` is, as nvidia-smi numbers it: entry ``device`` of
    CUDA_VISIBLE_DEVICES when that is set (GPUS=N pins each worker to one entry; an entry may be a
    UUID, kept as text), else ``device`` itself."""
    entries = [e.strip() for e in (visible or "").split(",") if e.strip()]
    if visible is None or device >= len(entries):
        return device
    return int(entries[device]) if entries[device].isdigit() else entries[device]


def current_gpu() -> int | str | None:
    """physical_gpu of torch's current device; None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    return physical_gpu(os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.current_device())


def perf_record(
    *,
    kernel: str,
    backend: str,
    config: dict,
    timing: Timing,
    test: str,
    bytes_moved: int | None = None,
    flops: int | None = None,
    env: dict | None = None,
    gpu_index: int | str | None = None,
) -> dict:
    """A record v1 (see tilekit.reports.records) with throughput, % of peak inputs and the fingerprint.
    ``gpu_index`` (default: current_gpu()) says which GPU of the host timed it; ``env`` names its model."""
    env = env if env is not None else environment()
    gpu_index = gpu_index if gpu_index is not None else current_gpu()
    st = timing.stats()
    rec = {"test": test, "kernel": kernel, "backend": backend, "config": config, "timer": "cupti", **st}
    seconds = st["median_ms"] / 1e3
    if bytes_moved:
        rec["gbps"] = round(bytes_moved / seconds / 1e9, 2)
        if env.get("gpu") in PEAK_GBPS:
            rec["peak_gbps"] = PEAK_GBPS[env["gpu"]]
    if flops:
        rec["tflops"] = round(flops / seconds / 1e12, 2)
        if env.get("gpu") in PEAK_TFLOPS:
            rec["peak_tflops"] = PEAK_TFLOPS[env["gpu"]]
    rec["l2_flush"] = timing.l2_flush
    rec["launches"] = len(timing.kernels)
    rec["kernels"] = sorted({name[:80] for name in timing.kernels})
    if not timing.inventory_stable:
        rec["inventory_stable"] = False
    if gpu_index is not None:
        rec["gpu_index"] = gpu_index
    rec["env"] = env
    return rec
