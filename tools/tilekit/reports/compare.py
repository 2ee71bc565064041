"""Match the port's records with the baselines' on ``config``; ratios, geomean, interval, verdict.

Pure functions over ``tilekit.reports.records.Record`` lists (DESIGN.md, "Ratio, geomean, verdict").
``compare`` returns one ``Comparison`` that ``report`` renders and ``validate`` recomputes.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field

import numpy as np

from tilekit.reports.records import PORT_BACKEND, Record

# Upper edges of the bands, checked in order on the unrounded geomean.
BANDS = ((1.05, "DONE"), (1.10, "MILD_GAP"), (1.50, "MODERATE_GAP"), (math.inf, "LARGE_GAP"))
# exp(mean(log r)) of ratios that all equal an edge can land one ulp above it; a ratio within this
# relative distance of an edge counts as the edge. Times carry 6 decimals, so no real gap is lost.
EDGE_TOLERANCE = 1e-12
BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 5000


class CompareError(ValueError):
    """Input that cannot be compared (e.g. a config twice in one log); the message says the fix."""


def band(ratio: float) -> str:
    for edge, name in BANDS:
        if ratio <= edge * (1 + EDGE_TOLERANCE):
            return name
    return "LARGE_GAP"  # nan never reaches here in practice; keep the function total


def geomean(ratios) -> float:
    from scipy import stats  # imported on first use: scipy.stats alone takes ~1 s to import

    # Sorted first: float summation depends on order, and the verdict must not depend on config order.
    return float(stats.gmean(np.sort(np.asarray(ratios, dtype=float))))


def bootstrap_ci(ratios, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """95 % bootstrap interval of the geomean (mean of log-ratios, exponentiated).

    The logs are sorted first so the interval, like the geomean, does not depend on config order.
    One config, or configs that all have the same ratio, give the point itself.
    """
    from scipy import stats

    logs = np.sort(np.log(np.asarray(ratios, dtype=float)))
    point = float(np.exp(logs.mean()))
    if logs.size < 2 or np.ptp(logs) == 0:
        return point, point
    result = stats.bootstrap(
        (logs,),
        np.mean,
        confidence_level=0.95,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(seed),
        batch=500,
    )
    low, high = result.confidence_interval
    return float(np.exp(low)), float(np.exp(high))


def straddled_edges(low: float, high: float) -> list[float]:
    """Band edges that lie inside the interval (its ends fall in different bands)."""
    return [edge for edge, _ in BANDS[:-1] if band(low) != band(high) and low <= edge < high]


def index_by_config(records: list[Record], label: str) -> dict[str, Record]:
    """config_key -> record; a config twice in one log is an error naming it and its lines."""
    seen: dict[str, list[Record]] = {}
    for record in records:
        seen.setdefault(record.config_key, []).append(record)
    duplicates = {k: v for k, v in seen.items() if len(v) > 1}
    if duplicates:
        detail = "; ".join(
            f"config {k} at lines {', '.join(str(r.line) for r in v)}" for k, v in sorted(duplicates.items())
        )
        raise CompareError(
            f"{label}: duplicate configs ({detail}). Each config must be timed once per "
            "log: re-run the stage that writes this log instead of appending to it."
        )
    return {k: v[0] for k, v in seen.items()}


def gpu_model(record: Record) -> str | None:
    """The GPU model a record was timed on: its env's `gpu` (a top-level `gpu` in older logs);
    None when the record does not say, and then it compares as before."""
    return _gpu_model(record.fields.get("env"), record.fields.get("gpu"))


@functools.lru_cache(maxsize=4096)
def _gpu_model(env_text: str | None, gpu: str | None) -> str | None:
    # A log repeats a few env texts over thousands of records: parse each text once.
    try:
        env = json.loads(env_text) if env_text else {}
    except json.JSONDecodeError:
        env = {}
    return (env.get("gpu") if isinstance(env, dict) else None) or gpu or None


def config_sort_key(config: dict) -> tuple:
    """Natural order: keys sorted, numbers by value (65536 before 262144)."""
    return tuple(
        (k, (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v)))
        for k, v in sorted(config.items())
    )


@dataclass(frozen=True)
class BaselineSummary:
    backend: str
    configs: int
    common_geomean_ms: float | None  # geomean time over the configs every baseline has
    ratio_geomean: float | None  # geomean of port/this baseline over the configs both have


@dataclass(frozen=True)
class Row:
    config: dict
    config_key: str
    port: Record | None
    reference_ms: float | None
    baseline_ms: dict  # backend -> median_ms, for the baselines that have this config on the port's GPU model
    status: str  # "matched", "missing_port" (no port median), "missing_reference", "gpu_mismatch"
    # backend -> GPU model, for the baselines that timed this config on another model than the
    # port's record: never compared (GPUS=N on a mixed host); "gpu_mismatch" when the reference is one
    mismatched: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.port is None or self.reference_ms is None:
            return None
        return self.port.median_ms / self.reference_ms

    def ratio_to(self, backend: str) -> float | None:
        if self.port is None or backend not in self.baseline_ms:
            return None
        return self.port.median_ms / self.baseline_ms[backend]

    @property
    def best_backend(self) -> str | None:
        if not self.baseline_ms:
            return None
        return min(sorted(self.baseline_ms), key=self.baseline_ms.__getitem__)  # ties: first name

    @property
    def ratio_to_best(self) -> float | None:
        best = self.best_backend
        return None if best is None else self.ratio_to(best)

    def mismatch_note(self, backend: str) -> str:
        """Why this row has no ratio to ``backend``: both GPU models, and the fix."""
        return (
            f"{backend} was timed on {self.mismatched[backend]}, {PORT_BACKEND} on {gpu_model(self.port)}; "
            "not compared (time both on one GPU model)"
        )


@dataclass(frozen=True)
class Comparison:
    kernel: str
    verdict: str  # DONE | INVESTIGATE | BLOCKED
    severity: str  # DONE | MILD_GAP | MODERATE_GAP | LARGE_GAP | MISSING_DATA
    geomean: float | None  # over matched configs; None when there is none
    ci95: tuple | None
    reference: str | None
    reference_reason: str
    rows: list  # Row, in natural config order
    baselines: list  # BaselineSummary, by backend name
    unmatched: list  # port Records whose config no baseline has
    blocked_reason: str = ""
    notes: list = field(default_factory=list)

    @property
    def matched(self) -> list:
        return [r for r in self.rows if r.status == "matched"]

    @property
    def missing(self) -> list:
        return [r for r in self.rows if r.status != "matched"]

    @property
    def band_of_geomean(self) -> str | None:
        return None if self.geomean is None else band(self.geomean)


def choose_reference(baselines: dict[str, dict[str, Record]]) -> tuple[str, str, dict[str, float]]:
    """(winning backend, why, backend -> geomean ms over the common configs).

    The winner is the baseline with the lowest geomean time over the configs that every baseline
    has (ties go to the first name). A baseline that lacks some config another one timed (its
    library does not serve it: baseline_support.NotServed, or it failed there) is the winner only
    when no baseline has every config: a reference must give every config its ratio. If the
    baselines share no config at all, the one with the most configs is the reference, and the
    reason says so.
    """
    names = sorted(baselines)
    common = set.intersection(*(set(baselines[n]) for n in names))
    if not common:
        winner = min(names, key=lambda n: -len(baselines[n]))  # ties: first name
        return winner, f"the baselines share no config; {winner} has the most ({len(baselines[winner])})", {}
    keys = sorted(common)
    means = {n: geomean([baselines[n][k].median_ms for k in keys]) for n in names}
    every = set().union(*(set(baselines[n]) for n in names))
    complete = [n for n in names if set(baselines[n]) == every]
    if not complete or len(complete) == len(names):
        winner = min(names, key=lambda n: means[n])
        return winner, f"winning baseline: lowest geomean time over the {len(keys)} configs all baselines have", means
    every_keys = sorted(every)
    winner = min(complete, key=lambda n: geomean([baselines[n][k].median_ms for k in every_keys]))
    partial = ", ".join(n for n in names if n not in complete)
    return (
        winner,
        f"winning baseline: lowest geomean time over all {len(every_keys)} configs among the baselines that have "
        f"every config (not {partial})",
        means,
    )


def make_row(key: str, record: Record | None, present: dict[str, dict[str, Record]], reference: str) -> Row:
    """One selected config: the port's record against every baseline that has the config. A
    baseline timed on another GPU model than the port's record is set aside (``mismatched``)."""
    timed = {b: idx[key] for b, idx in present.items() if key in idx}
    port_gpu = None if record is None else gpu_model(record)
    models = {b: gpu_model(r) for b, r in timed.items()} if port_gpu else {}
    mismatched = {b: model for b, model in models.items() if model and model != port_gpu}
    ref = timed.get(reference)
    status = (
        "missing_port"
        if record is None
        else "missing_reference"
        if ref is None
        else "gpu_mismatch"
        if reference in mismatched
        else "matched"
    )
    config = (record or ref or next(iter(timed.values()))).config
    return Row(
        config,
        key,
        record,
        None if ref is None or reference in mismatched else ref.median_ms,
        {b: r.median_ms for b, r in timed.items() if b not in mismatched},
        status,
        mismatched,
    )


def mismatch_notes(rows: list[Row]) -> list[str]:
    """One note per (baseline, its GPU model, the port's model) that left ratios out."""
    counts: dict[tuple, int] = {}
    for row in rows:
        for backend, model in row.mismatched.items():
            pair = (backend, model, gpu_model(row.port))
            counts[pair] = counts.get(pair, 0) + 1
    return [
        f"{n} config(s) of {backend} were timed on {model}, the {PORT_BACKEND} records on {port_model}: "
        f"those ratios are left out (GPU_MISMATCH); time port and baselines on one GPU model"
        for (backend, model, port_model), n in sorted(counts.items())
    ]


def compare(
    kernel: str,
    port: list[Record],
    baselines: dict[str, list[Record]],
    reference: str | None = None,
    blocked_hint: str = "",
    labels: dict[str, str] | None = None,
) -> Comparison:
    """The whole comparison. ``baselines`` maps backend -> its valid records (may be empty lists).

    ``reference`` forces the reference backend; by default the winning baseline is used.
    ``blocked_hint`` is added to the BLOCKED reason (e.g. pytest's skip reasons). ``labels`` name
    each backend's log in errors (default "<backend> log").
    """
    labels = labels or {}
    port_index = index_by_config(port, labels.get(PORT_BACKEND, f"{PORT_BACKEND} log"))
    indexed = {b: index_by_config(recs, labels.get(b, f"{b} log")) for b, recs in sorted(baselines.items())}
    present = {b: idx for b, idx in indexed.items() if idx}
    notes = [f"baseline {b} has no valid record" for b, idx in indexed.items() if not idx]

    if not port_index or not present:
        what = f"no valid {PORT_BACKEND} median" if not port_index else "no valid baseline median"
        reason = what + (f": {blocked_hint}" if blocked_hint else "")
        return Comparison(
            kernel,
            "BLOCKED",
            "MISSING_DATA",
            None,
            None,
            None,
            "",
            [],
            [],
            sorted(port_index.values(), key=lambda r: config_sort_key(r.config)),
            blocked_reason=reason,
            notes=notes,
        )

    winner, why, common_means = choose_reference(present)
    if reference is not None:
        if reference not in present:
            raise CompareError(
                f"--reference {reference}: no valid {reference} records (baselines with data: {', '.join(present)})"
            )
        winner, why = reference, f"chosen with --reference (winning baseline would be {winner})"

    selected = set().union(*present.values())  # every config some baseline measured
    rows = [make_row(key, port_index.get(key), present, winner) for key in selected]
    rows.sort(key=lambda r: config_sort_key(r.config))
    unmatched = sorted((r for k, r in port_index.items() if k not in selected), key=lambda r: config_sort_key(r.config))

    summaries = []
    for b, idx in present.items():
        both = [r.port.median_ms / r.baseline_ms[b] for r in rows if r.port is not None and b in r.baseline_ms]
        summaries.append(BaselineSummary(b, len(idx), common_means.get(b), geomean(both) if both else None))

    ratios = [r.ratio for r in rows if r.status == "matched"]
    value = geomean(ratios) if ratios else None
    ci = bootstrap_ci(ratios) if ratios else None
    notes += mismatch_notes(rows)
    if any(r.status != "matched" for r in rows):
        verdict, severity = "INVESTIGATE", "MISSING_DATA"
    else:
        severity = band(value)
        verdict = "DONE" if severity == "DONE" else "INVESTIGATE"
    return Comparison(kernel, verdict, severity, value, ci, winner, why, rows, summaries, unmatched, notes=notes)
