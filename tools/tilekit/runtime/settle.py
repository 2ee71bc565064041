"""Statistics that let a port/baseline ratio of a decode-sized kernel (a few µs) be trusted.

A small config is timed over K placements (independent allocations of each backend's inputs) in
rounds: round r uses placement r % K and runs every backend once, in a seeded random order, so the
port and its baselines are interleaved (`schedule`). Samples taken while the SM clock had dropped
are discarded (`drop_throttled`). A backend's figure is the geometric mean over placements of each
placement's median (`figure`); the ratio port/baseline, the geometric mean of the per-placement
ratios since both arms ran on the same placements, gets a paired bootstrap interval
(`ratio_interval`) and a label (`label`): SAME, FASTER, SLOWER or UNSETTLED. `settle` is the one call
a report makes per small config. Times are in ms, clocks in MHz. Pure: no torch, no GPU.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence

import numpy as np

# Under ~20 µs a kernel's time moves by several % with where its tensors lie and what ran before,
# so one allocation timed in one block is not a figure: such configs are timed over placements.
SMALL_MS = 0.020

LABELS = ("SAME", "FASTER", "SLOWER", "UNSETTLED")


def schedule(backends: Sequence[str], placements: int, rounds: int, seed: int) -> list[tuple[int, list[str]]]:
    """(placement, backends in run order) per round: round r uses placement r % placements and a
    fresh order from random.Random(seed), so no backend always runs first or after the same one.
    rounds is a multiple of placements: every backend sees every placement equally often.

    >>> schedule(["port", "torch"], placements=2, rounds=4, seed=1)
    [(0, ['torch', 'port']), (1, ['torch', 'port']), (0, ['port', 'torch']), (1, ['torch', 'port'])]
    """
    if not backends:
        raise ValueError("backends is empty: name at least one backend to time")
    if len(set(backends)) != len(backends):
        dups = sorted({b for b in backends if list(backends).count(b) > 1})
        raise ValueError(f"backends names {dups} more than once: each backend runs once per round")
    if placements < 1:
        raise ValueError(f"placements={placements}: need at least one placement")
    if rounds < placements or rounds % placements:
        raise ValueError(
            f"rounds={rounds} with placements={placements}: rounds must be a positive multiple of "
            "placements, so every backend sees every placement equally often"
        )
    rng = random.Random(seed)
    plan = []
    for r in range(rounds):
        order = list(backends)
        rng.shuffle(order)
        plan.append((r % placements, order))
    return plan


def drop_throttled(
    samples_ms: Sequence[float],
    clocks_mhz: Sequence[float | None],
    reference_mhz: float,
    min_fraction: float = 0.90,
) -> tuple[list[float], int]:
    """(kept samples, how many were dropped): a sample whose SM clock was below min_fraction *
    reference_mhz is dropped, as NVBench discards samples taken while the clock dropped. A None
    clock (NVML unavailable) keeps its sample; a clock exactly at the threshold is kept.

    >>> drop_throttled([1.0, 2.0, 3.0], [1980, 1500, None], reference_mhz=1980)
    ([1.0, 3.0], 1)
    """
    if len(samples_ms) != len(clocks_mhz):
        raise ValueError(f"{len(samples_ms)} samples but {len(clocks_mhz)} clocks: take one clock per sample")
    if not reference_mhz > 0:
        raise ValueError(f"reference_mhz={reference_mhz}: must be a positive clock")
    if not 0 < min_fraction <= 1:
        raise ValueError(f"min_fraction={min_fraction}: must be in (0, 1]")
    floor = min_fraction * reference_mhz
    kept = [s for s, c in zip(samples_ms, clocks_mhz) if c is None or c >= floor]
    return kept, len(samples_ms) - len(kept)


def placement_medians(samples: Sequence[Sequence[float]]) -> list[float]:
    """The median of each placement's samples (ms), in placement order.

    >>> placement_medians([[1.0, 3.0, 2.0], [4.0, 6.0]])
    [2.0, 5.0]
    """
    if not samples:
        raise ValueError("no placements: time at least one")
    for i, s in enumerate(samples):
        if len(s) == 0:
            raise ValueError(f"placement {i} has no samples (all dropped as throttled?): time it again")
        if not all(np.isfinite(s)) or min(s) <= 0:
            raise ValueError(f"placement {i} holds a sample that is not a positive time: {list(s)}")
    return [float(statistics.median(s)) for s in samples]


def figure(samples: Sequence[Sequence[float]]) -> dict:
    """A backend's time from its samples per placement: the geometric mean over placements of the
    per-placement medians (figure_ms), and their spread ((max - min) / figure_ms), which says how
    much the placement moved the time.

    A median within a placement (an outlier sample is noise), a mean over placements (a placement's
    offset is systematic: on the H200 a median of 8 placements moved with the allocation history
    more than their mean; docs/reports.md, "The settle key"); geometric, so that the ratio of two
    figures is the geometric mean of the paired per-placement ratios.

    >>> f = figure([[1.0, 3.0], [2.0], [4.0, 4.0, 5.0]])
    >>> round(f["figure_ms"], 6), round(f["spread"], 6), f["placement_medians_ms"]
    (2.519842, 0.793701, [2.0, 2.0, 4.0])
    """
    meds = placement_medians(samples)
    mid = float(np.exp(np.mean(np.log(meds))))
    return {"figure_ms": mid, "spread": (max(meds) - min(meds)) / mid, "placement_medians_ms": meds}


def _padded(samples: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """(placements × longest) array, NaN past each placement's end, and each placement's count."""
    counts = np.array([len(s) for s in samples])
    grid = np.full((len(samples), counts.max()), np.nan)
    for i, s in enumerate(samples):
        grid[i, : len(s)] = s
    return grid, counts


def _boot_figures(grid: np.ndarray, counts: np.ndarray, idx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per draw, the geometric mean over its drawn placements of each one's median after resampling
    that placement's repetitions with replacement (each slot its own resample, even for a placement
    drawn twice): `figure` of a draw. idx is (draws × placements) of placement indices."""
    slot = np.empty(idx.shape)
    for p, n in enumerate(counts):
        where = idx == p
        picks = rng.integers(0, n, size=(int(where.sum()), n))
        slot[where] = np.median(grid[p][picks], axis=1)
    return np.exp(np.mean(np.log(slot), axis=1))


Samples = Sequence[Sequence[float]]  # one list of samples (ms) per placement


def ratio_interval(
    port: Samples, base: Samples, *, n_boot: int = 2000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float]:
    """(ratio, lo, hi): ratio = figure(port).figure_ms / figure(base).figure_ms, with a percentile
    bootstrap interval over placements × repetitions. Both arms were timed on the same placements,
    so each draw resamples placement indices with replacement, the same indices for both arms
    (paired: an offset a placement gives both arms cancels), then resamples each arm's repetitions
    within each drawn placement. With one placement only repetitions are resampled. Deterministic
    for a seed."""
    if len(port) != len(base):
        raise ValueError(f"port has {len(port)} placements and base {len(base)}: time both on the same placements")
    if n_boot < 1:
        raise ValueError(f"n_boot={n_boot}: need at least one bootstrap draw")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence}: must be in (0, 1)")
    ratio = figure(port)["figure_ms"] / figure(base)["figure_ms"]  # also checks both arms
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(port), size=(n_boot, len(port)))
    ratios = _boot_figures(*_padded(port), idx, rng) / _boot_figures(*_padded(base), idx, rng)
    lo, hi = np.percentile(ratios, [50 * (1 - confidence), 50 * (1 + confidence)])
    return ratio, float(lo), float(hi)


def label(lo: float, hi: float, band: float = 0.02) -> str:
    """What an interval [lo, hi] of port/baseline says: SAME when it lies within [1 - band, 1 + band];
    else FASTER when hi < 1 (the port, the numerator, is settled faster); else SLOWER when lo > 1;
    else UNSETTLED (it holds 1 and reaches beyond the band: time more, or accept a tie).

    >>> [label(0.99, 1.01), label(0.90, 0.95), label(1.05, 1.10), label(0.95, 1.05)]
    ['SAME', 'FASTER', 'SLOWER', 'UNSETTLED']
    """
    if not lo <= hi:
        raise ValueError(f"lo={lo} > hi={hi}: an interval needs lo <= hi")
    if not 0 <= band < 1:
        raise ValueError(f"band={band}: must be in [0, 1)")
    if 1 - band <= lo and hi <= 1 + band:
        return "SAME"
    if hi < 1:
        return "FASTER"
    if lo > 1:
        return "SLOWER"
    return "UNSETTLED"


def settle(port: Samples, base: Samples, *, n_boot: int = 2000, seed: int = 0, band: float = 0.02) -> dict:
    """The verdict on one small config: ratio port/base, its 95 % interval, the label and each
    arm's placement spread; n_boot and seed are kept so the interval can be recomputed."""
    ratio, lo, hi = ratio_interval(port, base, n_boot=n_boot, seed=seed)
    return {
        "ratio": ratio,
        "ci95": [lo, hi],
        "label": label(lo, hi, band),
        "port_spread": figure(port)["spread"],
        "base_spread": figure(base)["spread"],
        "n_boot": n_boot,
        "seed": seed,
    }


def unsettled_count(labels: Iterable[str]) -> int:
    """How many labels are UNSETTLED; an unknown label is an error, not a silent miss."""
    labels = list(labels)
    unknown = sorted(set(labels) - set(LABELS))
    if unknown:
        raise ValueError(f"unknown labels {unknown}: expected {list(LABELS)}")
    return labels.count("UNSETTLED")
