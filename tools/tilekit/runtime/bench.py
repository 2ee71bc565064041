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

    if nrep < 1:
        raise ValueError(f"nrep={nrep}: need at least one sample")
    for _ in range(max(1, warmup)):
        fn()
    torch.cuda.synchronize()
    buf = _flush_buffer(torch.cuda.current_device()) if flush else None
    samples, first, stable = [], None, True
    for _ in range(nrep):
        ms, names, _ = cold_sample(fn, buf)
        if first is None:
            first = names
        elif names != first:
            stable = False
        samples.append(ms)
    return Timing(samples_ms=samples, kernels=first or [], inventory_stable=stable, l2_flush=flush)


def cold_sample(fn, buf=None, clock=None) -> tuple[float, list[str], float | None]:
    """One sample of `fn()` as time_cupti takes it: the L2 flushed (`buf`, _flush_buffer's, zeroed;
    None: not flushed) and the device synchronized outside the profiler, then the sum of the
    durations of every device activity the call launched (ms), their names, and the SM clock
    `clock()` read right after the call was enqueued, while the GPU runs it (None without one)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if buf is not None:
        buf.zero_()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        mhz = clock() if clock is not None else None
        torch.cuda.synchronize()
    acts = device_activities(prof)
    if not acts:
        raise RuntimeError(
            "CUPTI saw no device activity for this call: is the op running on the GPU, "
            "and is the profiler (kineto) available? see `make doctor`"
        )
    return sum(ms for _, ms in acts), [n for n, _ in acts], mhz


# -- configs of a few µs: placements, interleaving, clocks, a hot figure (issue 40) ------------


def sm_clock_reader():
    """A function returning the current GPU's SM clock in MHz (NVML, through nvidia-ml-py), or None
    when NVML cannot be used here (no package, no driver): samples are then kept unfiltered."""
    try:
        import pynvml

        pynvml.nvmlInit()
        gpu = current_gpu()
        if isinstance(gpu, str):
            handle = pynvml.nvmlDeviceGetHandleByUUID(gpu)
        else:
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(gpu or 0))
        if pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM) <= 0:
            return None  # a GPU (vGPU, MIG) that does not report its clock: no filter
    except Exception:  # noqa: BLE001 - any NVML failure means: no clock filter, said in the record
        return None
    return lambda: float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))


@dataclass
class Interleaved:
    """What time_interleaved measured, per backend: the kept samples (ms) per placement, how many
    were dropped for a low SM clock, and one call's device activities."""

    samples_ms: dict  # backend -> [[ms, ...] per placement]
    dropped: dict  # backend -> int
    clock_mhz: float | None  # the clock the run started with (None: no NVML)
    kernels: dict  # backend -> [names]
    seed: int
    laps: int


def time_interleaved(
    calls: dict, laps: int, seed: int, *, sample=None, clock=None, min_clock_fraction: float = 0.90, warmup: int = 3
) -> Interleaved:
    """Time every backend on every placement, interleaved: `calls[backend][p]` calls the backend
    on placement p's inputs; round r of settle.schedule (seeded) takes placement r % K and runs
    every backend once in its own random order, `laps` rounds per placement. `sample(fn, clock)` ->
    (ms, names, SM clock or None) takes one sample (default: cold_sample, the L2 flushed, the clock
    read while the call runs); `clock()` reads the SM clock (default: sm_clock_reader's, None
    without NVML). The reference clock is the highest read during the warm-up (taken as samples,
    so the GPU is busy when it is read); a sample whose clock is below min_clock_fraction of it is
    dropped and counted (NVBench's rule), but never a placement's last: of a placement whose every
    sample fell below, the one at the highest clock is kept (and the others counted)."""
    from tilekit.runtime import settle

    backends = list(calls)
    placements = {len(calls[b]) for b in backends}
    if len(placements) != 1:
        raise ValueError(f"every backend needs the same placements, got { ({b: len(calls[b]) for b in backends}) }")
    k = placements.pop()
    if sample is None:
        import torch

        sample = functools.partial(cold_sample, buf=_flush_buffer(torch.cuda.current_device()))
        clock = clock if clock is not None else sm_clock_reader()
    warm = [sample(fn, clock=clock)[2] for b in backends for fn in calls[b] for _ in range(warmup)]
    reference = max((c for c in warm if c), default=None)
    raw = {b: [[] for _ in range(k)] for b in backends}
    clocks = {b: [[] for _ in range(k)] for b in backends}
    kernels: dict = {}
    for p, order in settle.schedule(backends, k, k * laps, seed):
        for b in order:
            ms, names, mhz = sample(calls[b][p], clock=clock)
            kernels.setdefault(b, names)
            raw[b][p].append(ms)
            clocks[b][p].append(mhz)
    kept: dict = {b: [] for b in backends}
    dropped = dict.fromkeys(backends, 0)
    for b in backends:
        for p in range(k):
            samples = raw[b][p]
            if reference is not None:
                samples, _ = settle.drop_throttled(raw[b][p], clocks[b][p], reference, min_clock_fraction)
                if not samples:  # never empty a placement: keep its sample at the highest clock
                    best = max(range(len(raw[b][p])), key=lambda i: clocks[b][p][i] or 0.0)
                    samples = [raw[b][p][best]]
            kept[b].append(samples)
            dropped[b] += len(raw[b][p]) - len(samples)
    return Interleaved(kept, dropped, reference, kernels, seed, laps)


def time_hot(calls: dict, launches: int, replays: int, seed: int) -> dict:
    """The hot figure: per backend, `launches` back-to-back calls rotating through its placements
    (`calls[backend][p]`) captured in one CUDA graph, replayed `replays` times in a seeded
    interleaved order (settle.schedule over one placement); each sample is a replay's time (CUDA
    events) / launches, ms: launch overhead out, the L2 warm, as in a decode step. Each timed replay
    is queued behind an untimed one, so its start event fires when the GPU reaches it, not while
    the host is still submitting the graph. A backend that cannot be captured gets its error's text
    instead of samples (the root cause, not the capture's follow-on error), and the stream is
    restored for the next one."""
    import torch

    from tilekit.runtime import settle

    graphs, out = {}, {}
    for b, fns in calls.items():
        previous = torch.cuda.current_stream()
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(previous)
            with torch.cuda.stream(stream):  # warm on a side stream, as torch.cuda.graphs asks
                for fn in fns:
                    fn()
            previous.wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(launches):
                    fns[i % len(fns)]()
            graph.replay()
            torch.cuda.synchronize()
            graphs[b], out[b] = graph, []
        except Exception as e:  # noqa: BLE001 - a backend that cannot be captured is reported, not fatal
            torch.cuda.set_stream(previous)  # a failed capture_end leaves the capture stream current
            cause = e.__context__ or e
            out[b] = f"{type(cause).__name__}: {cause}"[:300]
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - an invalidated capture may leave an error to clear
                pass
    if not graphs:
        return out
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _, order in settle.schedule(list(graphs), 1, replays, seed):
        for b in order:
            graphs[b].replay()  # untimed: the timed replay below is queued behind it
            start.record()
            graphs[b].replay()
            end.record()
            end.synchronize()
            out[b].append(start.elapsed_time(end) / launches)
    return out


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
    median_ms: float | None = None,
) -> dict:
    """A record v1 (see tilekit.reports.records) with throughput, % of peak inputs and the fingerprint.
    ``gpu_index`` (default: current_gpu()) says which GPU of the host timed it; ``env`` names its model.
    ``median_ms`` replaces the samples' median as the record's figure (a settled config's: the
    geometric mean over placements of each placement's median, tilekit.runtime.settle.figure)."""
    env = env if env is not None else environment()
    gpu_index = gpu_index if gpu_index is not None else current_gpu()
    st = timing.stats()
    if median_ms is not None:
        st["median_ms"] = median_ms
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
