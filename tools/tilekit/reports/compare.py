"""Match the port's records with the baselines' on ``config``; ratios, geomean, interval, verdict.

Pure functions over ``tilekit.reports.records.Record`` lists (DESIGN.md, "Ratio, geomean, verdict").
``compare`` returns one ``Comparison`` that ``report`` renders and ``validate`` recomputes. Records
of the settle log (small configs, port and baselines timed in one process: `settle_data`) replace a
config's separate-process times and carry its settlement (tilekit.runtime.settle).
"""

from __future__ import annotations

import functools
import json
import math
import re
import statistics
from dataclasses import dataclass, field, replace

import numpy as np

from tilekit.reports.records import PORT_BACKEND, ParsedLog, Record, Rejected, parse_log
from tilekit.runtime import settle

# Upper edges of the bands, checked in order on the unrounded geomean.
BANDS = ((1.05, "DONE"), (1.10, "MILD_GAP"), (1.50, "MODERATE_GAP"), (math.inf, "LARGE_GAP"))
# exp(mean(log r)) of ratios that all equal an edge can land one ulp above it; a ratio within this
# relative distance of an edge counts as the edge. Times carry 6 decimals, so no real gap is lost.
EDGE_TOLERANCE = 1e-12
BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 5000
# The figures a settled config can be judged on: cold (L2 flushed before each call, DESIGN
# "Measuring") or hot (back-to-back launches replayed from a CUDA graph, time per launch).
FIGURES = ("cold", "hot")
SETTLE_BAND = 0.02  # a settled ratio is SAME within 1 ± this (tilekit.runtime.settle.label)


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
class Settlement:
    """One config whose port and reference were timed in one process (a settle session)."""

    session: str
    figure: str  # the figure the row's times use: "hot" only when asked for and both arms have one
    port_ms: float  # the port's time of that figure
    reference_ms: float
    cold: dict  # settle.settle over the cold samples: ratio, ci95, label, port_spread, base_spread, ...
    hot: dict | None  # the same over the hot samples as one placement; None when an arm has none
    hot_missing: str  # why hot is None ("" when it is not)
    placements: int
    laps: int
    dropped: tuple  # (port, reference): samples dropped for a low SM clock
    backends: tuple  # every backend of the session that the row shows, by name

    @property
    def label(self) -> str:
        """FASTER / SAME / SLOWER / UNSETTLED of the figure the row uses."""
        return (self.hot if self.figure == "hot" else self.cold)["label"]


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
    # set when the port and the reference were timed in one settle session: the row's times are then
    # that session's (Settlement.figure), not the separate-process medians
    settled: Settlement | None = None

    @property
    def port_ms(self) -> float | None:
        if self.settled is not None:
            return self.settled.port_ms
        return None if self.port is None else self.port.median_ms

    @property
    def ratio(self) -> float | None:
        if self.port_ms is None or self.reference_ms is None:
            return None
        return self.port_ms / self.reference_ms

    def ratio_to(self, backend: str) -> float | None:
        if self.port_ms is None or backend not in self.baseline_ms:
            return None
        return self.port_ms / self.baseline_ms[backend]

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
    figure: str = "cold"  # the figure asked for settled rows (a row without a hot time uses cold)

    @property
    def matched(self) -> list:
        return [r for r in self.rows if r.status == "matched"]

    @property
    def settled_rows(self) -> list:
        return [r for r in self.rows if r.settled is not None]

    @property
    def settled_count(self) -> int:
        return len(self.settled_rows)

    @property
    def unsettled_count(self) -> int:
        """Settled rows whose label (of the figure each uses) is UNSETTLED."""
        return settle.unsettled_count(r.settled.label for r in self.settled_rows)

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


# ---------------------------------------------------------------------------------------------
# Settle records: small configs, the port and its baselines timed in one process (`make settle`)


def settle_line(record: Record) -> int:
    """The line of the record's `settle` key in the parsed text (its BEGIN line when it has none):
    a block's fields are its lines, in order."""
    keys = list(record.fields)
    return record.line + 1 + keys.index("settle") if "settle" in keys else record.line


def _count(data: dict, key: str, least: int) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{key} is {json.dumps(value)}, not an integer >= {least}")
    return value


def _times(value, what: str) -> list:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{what} is {json.dumps(value)[:60]}, not a non-empty list of times")
    if not all(not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in value):
        raise ValueError(f"{what} holds a value that is not a finite time > 0")
    return value


def settle_data(record: Record) -> dict:
    """The record's `settle` object, checked against the record (docs/reports.md, "Record
    blocks"); a ValueError says what is wrong. Its median_ms must be settle.figure of samples_ms (figure_ms)
    (up to the block's 6 decimals) and its nrep the number of kept cold samples."""
    text = record.fields.get("settle")
    if text is None:
        raise ValueError("no `settle` key: a record of the settle log carries its samples in one")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"settle is not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("settle is not a JSON object")
    if not isinstance(data.get("session"), str) or not data["session"]:
        raise ValueError("settle has no `session` string (the id shared by the backends timed together)")
    if isinstance(data.get("seed"), bool) or not isinstance(data.get("seed"), int):
        raise ValueError(f"seed is {json.dumps(data.get('seed'))}, not an integer")
    placements, laps = _count(data, "placements", 1), _count(data, "laps", 1)
    _count(data, "dropped", 0)
    cold = data.get("samples_ms")
    if not isinstance(cold, list) or len(cold) != placements:
        size = len(cold) if isinstance(cold, list) else json.dumps(cold)[:40]
        raise ValueError(f"samples_ms has {size} placements, placements is {placements}")
    for i, samples in enumerate(cold):
        _times(samples, f"samples_ms[{i}]")
        if len(samples) > laps:
            raise ValueError(f"samples_ms[{i}] has {len(samples)} samples, more than laps={laps}")
    clock = data.get("clock_mhz")
    if clock is not None and (isinstance(clock, bool) or not isinstance(clock, (int, float)) or not clock > 0):
        raise ValueError(f"clock_mhz is {json.dumps(clock)}, not a clock > 0 or null")
    if data.get("hot_ms") is not None:
        _times(data["hot_ms"], "hot_ms")
        _count(data, "hot_launches", 1)
    if "hot_error" in data and not isinstance(data["hot_error"], str):
        raise ValueError("hot_error is not a string")
    cold_ms = settle.figure(cold)["figure_ms"]
    if not math.isclose(record.median_ms, cold_ms, rel_tol=1e-6, abs_tol=6e-7):
        raise ValueError(
            f"median_ms is {record.median_ms:.6f}, but the geometric mean over placements of samples_ms's "
            f"placement medians is {cold_ms:.6f}"
        )
    if record.nrep != sum(len(p) for p in cold):
        raise ValueError(f"nrep is {record.nrep}, but samples_ms holds {sum(len(p) for p in cold)} kept samples")
    return data


def settled_records(text: str | None, kernel: str) -> list:
    """The valid records of a settle log's text (None, no log: none), as compare's `settled`."""
    return [] if text is None else check_settle_log(parse_log(text, kernel)).records


_SETTLED_FIGURE = re.compile(r"^Settled configs: .*\((cold|hot) figure", re.M)


def figure_of(performance_md: str) -> str:
    """The figure a rendered performance.md judged its settled configs on (its `Settled configs:`
    line); "cold" when it has none."""
    found = _SETTLED_FIGURE.search(performance_md)
    return found.group(1) if found else "cold"


def check_settle_log(parsed: ParsedLog) -> ParsedLog:
    """The parsed settle log with every record whose `settle` object is not valid moved to the
    rejected blocks, its reason naming the line of the key."""
    kept, rejected = [], list(parsed.rejected)
    for record in parsed.records:
        try:
            settle_data(record)
            kept.append(record)
        except ValueError as exc:
            rejected.append(Rejected(record.line, record.test, f"line {settle_line(record)}: {exc}"))
    rejected.sort(key=lambda r: r.line)
    return replace(parsed, records=kept, rejected=rejected)


def _hot_ms(data: dict) -> list | None:
    return data.get("hot_ms") or None


def _figure_ms(data: dict, figure: str) -> float:
    return statistics.median(data["hot_ms"]) if figure == "hot" else settle.figure(data["samples_ms"])["figure_ms"]


def settle_rows(
    rows: list[Row], settled: list[Record], present: dict, reference: str, figure: str, label: str
) -> tuple[list[Row], list[str]]:
    """Rows whose port and reference have settle records of one session take that session's times
    (of ``figure``; cold where an arm has no hot time) and its settlement; the others are kept. A
    baseline outside the session keeps its separate-process time on the cold figure, and has none
    on the hot one (a hot port over a cold baseline is no ratio). Notes say what was left out."""
    by_backend: dict[str, list[Record]] = {}
    for record in settled:
        by_backend.setdefault(record.backend, []).append(record)
    indexed = {b: index_by_config(recs, f"{label} ({b})") for b, recs in sorted(by_backend.items())}
    data: dict[int, dict] = {}
    for record in settled:
        try:
            data[id(record)] = settle_data(record)
        except ValueError as exc:
            raise CompareError(f"{label}:{settle_line(record)}: {record.test}: {exc}") from None
    shown = {PORT_BACKEND, *present}
    notes = []
    stray = sorted(set(indexed) - shown)
    if stray:
        notes.append(f"the settle log times {', '.join(stray)}, which has no baseline log: left out of the rows")
    keys = {row.config_key for row in rows}
    extra = sorted({k for b in indexed for k in indexed[b]} - keys)
    if extra:
        notes.append(f"settle records of configs no baseline log has are left out: {'; '.join(extra)}")
    port_index, ref_index = indexed.get(PORT_BACKEND, {}), indexed.get(reference, {})
    out, apart, fallback = [], [], []
    for row in rows:
        key = row.config_key
        if not any(key in idx for idx in indexed.values()):
            out.append(row)  # not timed in the settle stage (a large config)
            continue
        port, ref = port_index.get(key), ref_index.get(key)
        session = data[id(port)]["session"] if port is not None else None
        if port is None or ref is None or data[id(ref)]["session"] != session:
            apart.append(key)
            out.append(row)
            continue
        arms = {
            b: data[id(idx[key])]
            for b, idx in indexed.items()
            if b in shown and key in idx and data[id(idx[key])]["session"] == session
        }
        p, r = arms[PORT_BACKEND], arms[reference]
        if p["placements"] != r["placements"]:
            notes.append(
                f"{key}: session {session}: {PORT_BACKEND} has {p['placements']} placements and {reference} "
                f"{r['placements']}: not settled (both arms are timed on the same placements)"
            )
            out.append(row)
            continue
        seed = p["seed"]  # the bootstrap's too: a re-render gives the same interval
        cold = settle.settle(p["samples_ms"], r["samples_ms"], seed=seed, band=SETTLE_BAND)
        hot, hot_missing = None, ""
        if _hot_ms(p) and _hot_ms(r):
            hot = settle.settle([p["hot_ms"]], [r["hot_ms"]], seed=seed, band=SETTLE_BAND)
        else:
            hot_missing = "; ".join(
                f"{b}: {arms[b].get('hot_error') or 'no hot_ms'}"
                for b in (PORT_BACKEND, reference)
                if not _hot_ms(arms[b])
            )
        use = "hot" if figure == "hot" and hot is not None else "cold"
        if figure == "hot" and hot is None:
            fallback.append(f"{key} ({hot_missing})")
        baseline_ms, left_out = {}, []
        for b in present:
            if b in arms and (use == "cold" or _hot_ms(arms[b])):
                baseline_ms[b] = _figure_ms(arms[b], use)
            elif b in arms:
                left_out.append(f"{b} ({arms[b].get('hot_error') or 'no hot_ms'})")
            elif b in row.baseline_ms and use == "cold":
                baseline_ms[b] = row.baseline_ms[b]
            elif b in row.baseline_ms:
                left_out.append(f"{b} (not in the session)")
        if left_out:
            notes.append(f"{key}: hot figure: no hot time of {', '.join(left_out)}; left out of that row")
        settlement = Settlement(
            session=session,
            figure=use,
            port_ms=_figure_ms(p, use),
            reference_ms=_figure_ms(r, use),
            cold=cold,
            hot=hot,
            hot_missing=hot_missing,
            placements=p["placements"],
            laps=p["laps"],
            dropped=(p["dropped"], r["dropped"]),
            backends=tuple(sorted(arms)),
        )
        port_record = row.port or port_index[key]
        mismatched = {b: m for b, m in row.mismatched.items() if b not in arms}
        out.append(
            replace(
                row,
                port=port_record,
                reference_ms=settlement.reference_ms,
                baseline_ms=baseline_ms,
                status="matched",
                mismatched=mismatched,
                settled=settlement,
            )
        )
    if apart:
        notes.append(
            f"not settled (no {PORT_BACKEND} and {reference} records of one session in the settle log; "
            f"separate-process times kept): {'; '.join(apart)}"
        )
    if fallback:
        notes.append(f"hot figure asked, judged on the cold one (an arm has no hot time): {'; '.join(fallback)}")
    return out, notes


def compare(
    kernel: str,
    port: list[Record],
    baselines: dict[str, list[Record]],
    reference: str | None = None,
    blocked_hint: str = "",
    labels: dict[str, str] | None = None,
    settled: list[Record] | None = None,
    figure: str = "cold",
) -> Comparison:
    """The whole comparison. ``baselines`` maps backend -> its valid records (may be empty lists).

    ``reference`` forces the reference backend; by default the winning baseline is used (chosen on
    the separate-process records). ``blocked_hint`` is added to the BLOCKED reason (e.g. pytest's
    skip reasons). ``labels`` name each backend's log in errors (default "<backend> log"; key
    "settle" for the settle log). ``settled`` are the settle log's records (any backend): a config
    whose port and reference share a session takes that session's times of ``figure`` ("cold" or
    "hot") and its settlement (``settle_rows``).
    """
    if figure not in FIGURES:
        raise CompareError(f"figure {figure!r}: expected one of {', '.join(FIGURES)}")
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
            figure=figure,
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
    settle_notes = []
    if settled:
        rows, settle_notes = settle_rows(rows, settled, present, winner, figure, labels.get("settle", "settle log"))

    summaries = []
    for b, idx in present.items():
        both = [r.ratio_to(b) for r in rows if r.ratio_to(b) is not None]
        summaries.append(BaselineSummary(b, len(idx), common_means.get(b), geomean(both) if both else None))

    ratios = [r.ratio for r in rows if r.status == "matched"]
    value = geomean(ratios) if ratios else None
    ci = bootstrap_ci(ratios) if ratios else None
    notes += mismatch_notes(rows) + settle_notes
    if any(r.status != "matched" for r in rows):
        verdict, severity = "INVESTIGATE", "MISSING_DATA"
    else:
        severity = band(value)
        verdict = "DONE" if severity == "DONE" else "INVESTIGATE"
    return Comparison(
        kernel, verdict, severity, value, ci, winner, why, rows, summaries, unmatched, notes=notes, figure=figure
    )
