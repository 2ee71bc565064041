"""Pick the fastest variant of a port for a problem class, time it with the same CUPTI bench as
the benchmarks, and remember the winner per (GPU name, kernel, key).

    variant = autotune.best("rms_norm", key={"dtype": "float16", "n": 1024, "m_class": 262144},
                            variants=[{"block": 1024, "rows": 4, "occupancy": -1}, ...],
                            make_call=lambda v: (lambda: launch(x, w, out, **v)))

A variant that fails to compile or launch is skipped with a note (kept in the cache entry), not
fatal; if every variant fails, the last error is raised. The cache is one JSON file,
$TILEKIT_AUTOTUNE_CACHE or $TILEKIT_CACHE/autotune.json (default ~/.cache/tilekit/autotune.json),
written atomically; a cached winner is kept while every current candidate is one its entry timed
(or skipped), so a candidate added to a kernel's list since then makes the class tune again
instead of being ignored; TILEKIT_AUTOTUNE=0 disables tuning (the first variant is used). Before
timing, the candidates are compiled side by side (`warm`, TILEKIT_TUNE_THREADS threads, default
min(8, CPUs); 1 compiles each at its first timed call, as before).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

from tilekit.runtime import bench
from tilekit.runtime.files import read_text

_LOCK = threading.Lock()
_MEMO: dict[tuple, dict] = {}
_LAST_PICK: dict[str, dict] = {}  # kernel -> the variant its last call ran (last_pick)


def cache_path() -> Path:
    if os.environ.get("TILEKIT_AUTOTUNE_CACHE"):
        return Path(os.environ["TILEKIT_AUTOTUNE_CACHE"])
    root = (
        os.environ.get("TILEKIT_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tilekit"
    )
    return Path(root) / "autotune.json"


def key_string(key: dict) -> str:
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def load(path: Path) -> dict:
    try:
        return json.loads(read_text(path))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as e:
        print(f"autotune: ignoring unreadable cache {path}: {e}", file=sys.stderr)
        return {}


def save(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def threads() -> int:
    """How many variants warm() compiles at once: $TILEKIT_TUNE_THREADS, else min(8, the CPUs this
    process may use)."""
    value = os.environ.get("TILEKIT_TUNE_THREADS", "")
    if value:
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"TILEKIT_TUNE_THREADS={value!r}: give a whole number of threads (1 = one at a time)")
        if n < 1:
            raise ValueError(f"TILEKIT_TUNE_THREADS={value!r}: give at least 1 (1 = one at a time)")
        return n
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(8, cpus or 1)


def _caller_stream():
    """A context that makes a worker thread launch on the calling thread's current CUDA stream
    (torch's current stream is per thread); a no-op without torch or a GPU."""
    import contextlib

    try:
        import torch
    except ImportError:
        return contextlib.nullcontext
    if not torch.cuda.is_available():
        return contextlib.nullcontext
    stream = torch.cuda.current_stream()
    return lambda: torch.cuda.stream(stream)


def warm(variants: list[dict], make_call, workers: int) -> dict[int, Exception]:
    """Call each variant once, `workers` at a time; {index: error} of those that failed (a hint: a
    failure under load may be transient, so tune times every variant all the same and skips only
    the ones that fail there). A variant's first call JITs it (Rust -> Tile IR -> tileiras: CPU work
    of about a second, outside the GIL in the cffi call), so a class's candidates compile side by
    side instead of one after another. The first variant runs alone first (it loads the library
    once), then the rest in threads; every launch goes on the caller's stream, in order with the
    caller's own work."""
    from concurrent.futures import ThreadPoolExecutor

    on_stream = _caller_stream()

    def first_call(v):
        try:
            with on_stream():
                make_call(v)()
        except Exception as e:  # noqa: BLE001 - a hint for the caller; tune's timed call decides
            return e
        return None

    if workers <= 1 or len(variants) <= 1:
        return {}  # tune's own first call compiles, as before
    errors = [first_call(variants[0])]
    with ThreadPoolExecutor(max_workers=min(workers, len(variants) - 1), thread_name_prefix="tilekit-jit") as pool:
        errors += list(pool.map(first_call, variants[1:]))
    return {i: e for i, e in enumerate(errors) if e is not None}


def tune(variants: list[dict], make_call, *, timer=None, workers: int | None = None) -> dict:
    """Time every variant (compiled side by side first by warm(), `workers` at a time: default
    threads()); a variant whose timed call fails is skipped with its error. Returns {"variant",
    "median_ms", "tried": [...], "skipped": [...]}."""
    timer = timer or (lambda fn: bench.time_cupti(fn, nrep=15, warmup=2))
    warm(variants, make_call, threads() if workers is None else workers)
    tried, skipped = [], []
    last_error = None
    for v in variants:
        try:
            ms = timer(make_call(v)).stats()["median_ms"]
        except Exception as e:  # noqa: BLE001 - a variant that cannot compile/launch is skipped
            last_error = e
            skipped.append({"variant": v, "error": str(e)[:300]})
            continue
        tried.append({"variant": v, "median_ms": round(ms, 6)})
    if not tried:
        raise RuntimeError(f"autotune: every variant failed; last error: {last_error}") from last_error
    best = min(tried, key=lambda t: t["median_ms"])
    return {"variant": best["variant"], "median_ms": best["median_ms"], "tried": tried, "skipped": skipped}


def covers(entry: dict, variants: list[dict]) -> bool:
    """Whether a cache entry still answers for `variants`: its winner is one of them and it timed (or
    skipped) each. An entry from a shorter list, or with no record of what it tried, does not.

    >>> a, b = {"block": 1024}, {"block": 2048}
    >>> entry = {"variant": a, "tried": [{"variant": a, "median_ms": 1.0}], "skipped": [{"variant": b, "error": "x"}]}
    >>> covers(entry, [a, b]), covers(entry, [a]), covers(entry, [a, b, {"block": 4096}]), covers({"variant": a}, [a])
    (True, True, False, False)
    """
    seen = [t["variant"] for t in entry.get("tried", ())] + [s["variant"] for s in entry.get("skipped", ())]
    return entry.get("variant") in variants and all(v in seen for v in variants)


def best(kernel: str, key: dict, variants: list[dict], make_call, *, gpu: str | None = None, timer=None) -> dict:
    """The cached winner for (gpu, kernel, key), tuning once when it is not cached."""
    if not variants:
        raise ValueError(f"autotune {kernel}: no variants for {key}")
    if os.environ.get("TILEKIT_AUTOTUNE") == "0":
        return variants[0]
    gpu = gpu or _gpu_name()
    memo_key = (gpu, kernel, key_string(key))
    with _LOCK:
        if memo_key in _MEMO:
            return _MEMO[memo_key]
        path = cache_path()
        data = load(path)
        entry = data.get(gpu, {}).get(kernel, {}).get(key_string(key))
        if entry is None or not covers(entry, variants):
            entry = tune(variants, make_call, timer=timer)
            for s in entry["skipped"]:
                print(f"autotune {kernel} {key_string(key)}: skipped {s['variant']}: {s['error']}", file=sys.stderr)
            data = load(path)  # re-read: another process may have written meanwhile
            data.setdefault(gpu, {}).setdefault(kernel, {})[key_string(key)] = entry
            save(path, data)
        _MEMO[memo_key] = entry["variant"]
        return entry["variant"]


def pow2(v: int) -> int:
    """v >= 1 rounded up to a power of two: the shape classes of tune keys, the row caps of variants.

    >>> [pow2(v) for v in (1, 2, 3, 65535, 65536)]
    [1, 2, 4, 65536, 65536]
    """
    return 1 << max(0, (v - 1).bit_length())


def row_tune_key(dtype: str, m: int, n: int) -> dict:
    """A row kernel's problem class: exact n (it decides tiling), m rounded up to a power of two.

    >>> row_tune_key("float16", 65535, 1000), row_tune_key("float32", 1, 1)
    ({'dtype': 'float16', 'n': 1000, 'm_class': 65536}, {'dtype': 'float32', 'n': 1, 'm_class': 1})
    """
    return {"dtype": dtype, "n": n, "m_class": pow2(m)}


def tile_rows(width: int, elems: int, max_rows: int) -> int:
    """Rows of a `width`-wide row tile that hold about `elems` elements per tile block: at least
    one, at most `max_rows` (a row kernel's candidates cap it at m rounded up and 64).

    >>> tile_rows(4096, 8192, 64), tile_rows(16384, 8192, 64), tile_rows(512, 8192, 8)
    (2, 1, 8)
    """
    return min(max(1, elems // width), max_rows)


def body_and_tail(n: int) -> tuple[int, int] | None:
    """The (body, tail) tiles that hold a row of n whole with fewer lanes than the power of two
    above n, where that saves a quarter or more of them: body the power of two below n, tail the
    power of two >= the rest (at least 16); None where a single tile serves as well, or where the
    body would pass 16384 (the register budget of rms_norm's whole-row tiles).

    >>> [body_and_tail(n) for n in (11008, 18944, 5120, 768, 4097, 13824, 3584, 8192, 40000)]
    [(8192, 4096), (16384, 4096), (4096, 1024), (512, 256), (4096, 16), None, None, None, None]
    """
    body = pow2(n) // 2
    if n <= 16 or body >= n or body > 16384:
        return None
    tail = max(16, pow2(n - body))
    return (body, tail) if 4 * (body + tail) <= 3 * 2 * body else None


def aligned_block(n: int) -> int | None:
    """The power of two below n where it can hold rows of n through the aligned-row entries
    (cutile_kernels' `ffi_util::aligned_rows_vec`: the body of whole 16-byte groups must fit the
    tile, so n at most 3 past it, the f32 bound), for tiles of 1024 to 8192; else None.

    >>> [aligned_block(n) for n in (4097, 4099, 4100, 8193, 1025, 513, 16385, 4096)]
    [4096, 4096, None, 8192, 1024, None, None, None]
    """
    half = pow2(n) // 2
    return half if 1024 <= half <= 8192 and n <= half + 3 else None


def unique(candidates) -> list[dict]:
    """Variant dicts in order, without their None knobs (the export's default) and repeats."""
    out = []
    for v in candidates:
        v = {k: x for k, x in v.items() if x is not None}
        if v not in out:
            out.append(v)
    return out


def pick(kernel: str, variant, *, default: dict, key: dict, candidates: list[dict], make_call) -> dict:
    """What an op's `variant` argument names: "auto" the cached winner of `candidates` for `key`
    (best), "default" `default` (the export's own choice, knobs at -1), a dict itself."""
    if variant == "auto":
        chosen = best(kernel, key, candidates, make_call)
    else:
        chosen = default if variant == "default" else variant
    _LAST_PICK[kernel] = chosen
    return chosen


def last_pick(kernel: str, *, forget: bool = False) -> dict | None:
    """The variant this process's last call of `kernel` ran (what pick returned), for the perf
    record: which tile shape won is what an engineer reads first. `forget` clears it (before the
    calls whose pick is wanted)."""
    return _LAST_PICK.pop(kernel, None) if forget else _LAST_PICK.get(kernel)


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name()
