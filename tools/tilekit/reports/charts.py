"""The charts beside the reports: ``reports/performance.svg`` and ``summary.svg`` (DESIGN.md, "Reports").

Data in, file out. ``report`` and ``summary`` gather numbers they already have (tilekit.reports.compare's
per-config ratios, geomean and interval; ``markdown.peak_share``'s % of peak) into the dataclasses
below; this module computes nothing new, it only draws. matplotlib is imported on first use, so
the report tools work without it: ``missing_matplotlib()`` says why there is no chart and the
report says so in one line.

Deterministic bytes: SVG with text kept as text (``svg.fonttype`` 'none'), DejaVu Sans (shipped
with matplotlib), a fixed ``svg.hashsalt`` for the clip-path ids, no Date/Creator metadata, the
figure built from matplotlib's defaults whatever a local matplotlibrc says. The same logs give
the same file.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from tilekit.reports.compare import BANDS
from tilekit.reports.records import write_atomic

MAX_CONFIGS = 40  # above this a chart is a wall of bars; the report's tables hold every config
DONE_EDGE = BANDS[0][0]
PORT_COLOR = "#4c72b0"
# One color per baseline in every chart, so triton is orange in each kernel's report.
BACKEND_COLORS = {
    "cutile": "#8172b3",
    "liger": "#da8bc3",
    "liger_cutile": "#64b5cd",
    "tilegym": "#937860",
    "torch": "#55a868",
    "torch_flash": "#a6d854",
    "torch_compile": "#8da0cb",
    "triton": "#dd8452",
}
OTHER_COLORS = ("#8c8c8c", "#ccb974")
BAND_COLORS = {"DONE": "#55a868", "MILD_GAP": "#ccb974", "MODERATE_GAP": "#dd8452", "LARGE_GAP": "#c44e52"}
STYLE = {
    "svg.fonttype": "none",  # text stays text: searchable, and no glyph outlines in the file
    "svg.hashsalt": "tilekit",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "figure.titlesize": 11.0,
}
METADATA = {"Date": None, "Creator": None}


@dataclass(frozen=True)
class ConfigBars:
    """One config of performance.md: the port's ratio to each baseline and its % of peak."""

    group: str  # the report's table the row is in (e.g. "float16")
    label: str  # the config within its table (e.g. "m=4096, n=1024")
    ratios: dict  # baseline -> port median / baseline median; absent where not compared
    peak_pct: float | None  # the port's % of peak, as the table's "% of peak" column
    peak_text: str  # e.g. "84.0% · 4031.5 GB/s"
    status: str = ""  # the table's verdict where the row has no ratio (MISSING, NO_REFERENCE, ...)


@dataclass(frozen=True)
class PerformanceChart:
    kernel: str
    port: str
    reference: str
    baselines: tuple  # backend names, in the report's order
    rows: tuple  # ConfigBars, in the report's order


@dataclass(frozen=True)
class KernelRatios:
    """One kernel of summary.md: its geomean ratio against its reference, and the ratios behind it."""

    kernel: str
    reference: str | None
    geomean: float | None
    ci95: tuple | None
    ratios: tuple  # per matched config
    band: str  # the geomean's band, or what the summary says instead (e.g. "not run")


@dataclass(frozen=True)
class SummaryChart:
    port: str
    kernels: tuple  # KernelRatios


def missing_matplotlib() -> str | None:
    """None when matplotlib imports; else one line saying why not."""
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as exc:
        return f"matplotlib is not importable ({exc})"
    return None


def _rc() -> dict:
    """matplotlib's defaults (never the machine's matplotlibrc) plus the fixed style above."""
    import matplotlib

    rc = {k: v for k, v in matplotlib.rcParamsDefault.items() if not k.startswith(("backend", "interactive"))}
    rc.update(STYLE)
    return rc


def _svg(build) -> str:
    import matplotlib

    with matplotlib.rc_context(_rc()):
        fig = build()
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata=METADATA)
    # matplotlib ends path lines with a blank; drop it so the committed files carry no trailing spaces
    return "\n".join(line.rstrip() for line in out.getvalue().split("\n"))


def _colors(names) -> dict:
    others = iter(OTHER_COLORS * len(names))
    return {n: BACKEND_COLORS.get(n) or next(others) for n in names}


def _label(ax, text: str, xy, dx: float, **style) -> None:
    """``text`` ``dx`` points beside ``xy``, vertically centred: to its right, starting there, or
    (dx < 0) to its left, ending there."""
    ax.annotate(
        text, xy, xytext=(dx, 0), textcoords="offset points", ha="left" if dx >= 0 else "right", va="center", **style
    )


def _padded(values, pad_left: float, pad_right: float) -> tuple[float, float]:
    low, high = min(values), max(values)
    span = max(high - low, 0.02)
    return low - pad_left * span, high + pad_right * span


# ---------------------------------------------------------------------------------------------
# performance.svg


def performance_svg(chart: PerformanceChart) -> str:
    return _svg(lambda: _performance_figure(chart))


def write_performance(chart: PerformanceChart, path: str) -> None:
    write_atomic(path, performance_svg(chart))


def _performance_figure(chart: PerformanceChart):
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows, names = chart.rows, chart.baselines
    n, nb = len(rows), max(len(names), 1)
    groups = list(dict.fromkeys(r.group for r in rows))
    fig = Figure(figsize=(10.0, 1.9 + n * (0.2 + 0.12 * nb)), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True, width_ratios=[3, 2])
    colors = _colors(names)
    bar = 0.8 / nb

    # Left: the port's time over each baseline's, a bar from 1.0 per baseline; the reference opaque
    # and outlined, with its ratio written at the bar's end.
    for j, name in enumerate(names):
        at = [(i - 0.4 + bar * (j + 0.5), r.ratios[name]) for i, r in enumerate(rows) if name in r.ratios]
        reference = name == chart.reference
        left.barh(
            [y for y, _ in at],
            [v - 1.0 for _, v in at],
            left=1.0,
            height=bar,
            color=colors[name],
            alpha=1.0 if reference else 0.4,
            edgecolor="#222222" if reference else "none",
            linewidth=0.8 if reference else 0.0,
        )
        if reference:
            for y, v in at:
                _label(left, f"{v:.4f}", (v, y), 3 if v >= 1.0 else -3, fontsize=7.5)
    for i, r in enumerate(rows):
        if r.status:
            _label(left, r.status, (1.0, i), 4, fontsize=8, color="#c44e52", fontweight="bold")
    ratios = [v for r in rows for v in r.ratios.values()]
    left.set_xlim(*_padded(ratios + [1.0, DONE_EDGE], 0.18, 0.18))
    left.axvline(1.0, color="#222222", linewidth=1.0)
    left.axvline(DONE_EDGE, color="#555555", linewidth=0.9, linestyle="--")
    left.set_title(f"{chart.port} time / baseline time (reference: {chart.reference})")
    left.set_xlabel(f"ratio (< 1: {chart.port} faster, > 1: slower)")
    # One table: its name goes in the title; several: each label names its table, a line between.
    left.set_yticks(range(n), [r.label if len(groups) == 1 else f"{r.group} · {r.label}" for r in rows])
    for i in range(1, n):
        if rows[i].group != rows[i - 1].group:
            for ax in (left, right):
                ax.axhline(i - 0.5, color="#999999", linewidth=0.8)
    left.set_ylim(n - 0.5, -0.5)  # the report's first row at the top
    left.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    left.set_axisbelow(True)

    # Right: the port's % of peak, the number of the table's "% of peak" column.
    shares = [(i, r) for i, r in enumerate(rows) if r.peak_pct is not None]
    right.barh([i for i, _ in shares], [r.peak_pct for _, r in shares], height=0.6, color=PORT_COLOR)
    top = max([100.0] + [r.peak_pct for _, r in shares])
    for i, r in shares:
        inside = r.peak_pct > 0.55 * top
        color = "white" if inside else "#222222"
        _label(right, r.peak_text, (r.peak_pct, i), -4 if inside else 4, fontsize=7.5, color=color)
    for i, r in enumerate(rows):
        if r.peak_pct is None:
            _label(right, r.peak_text, (0, i), 4, fontsize=7.5, color="#555555")
    right.set_xlim(0, top * 1.02)
    right.axvline(100.0, color="#222222", linewidth=1.0)
    right.set_title(f"{chart.port} throughput")
    right.set_xlabel("% of the GPU's peak (GB/s or TFLOP/s)")
    right.tick_params(axis="y", left=False)
    right.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    right.set_axisbelow(True)

    handles = [
        Patch(
            facecolor=colors[nm],
            alpha=1.0 if nm == chart.reference else 0.4,
            edgecolor="#222222" if nm == chart.reference else "none",
            label=f"vs {nm}" + (" (reference)" if nm == chart.reference else ""),
        )
        for nm in names
    ]
    handles += [
        Line2D([], [], color="#222222", linewidth=1.0, label="1.0: as fast"),
        Line2D([], [], color="#555555", linewidth=0.9, linestyle="--", label=f"{DONE_EDGE:.2f}: DONE edge"),
        Patch(facecolor=PORT_COLOR, label=f"{chart.port} % of peak"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4), frameon=False, fontsize=8)
    subtitle = f" ({groups[0]})" if len(groups) == 1 and groups[0] else ""
    fig.suptitle(f"{chart.kernel}: {chart.port} against its baselines{subtitle}")
    return fig


# ---------------------------------------------------------------------------------------------
# summary.svg


def summary_svg(chart: SummaryChart) -> str:
    return _svg(lambda: _summary_figure(chart))


def write_summary(chart: SummaryChart, path: str) -> None:
    write_atomic(path, summary_svg(chart))


def _summary_figure(chart: SummaryChart):
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    kernels = chart.kernels
    n = len(kernels)
    fig = Figure(figsize=(8.0, 1.9 + 0.6 * n), layout="constrained")
    ax = fig.add_subplot()
    values = [1.0, DONE_EDGE]
    for i, k in enumerate(kernels):
        if k.geomean is None:
            _label(ax, k.band, (1.0, i), -4, xycoords=("axes fraction", "data"), fontsize=8, color="#c44e52")
            continue
        ax.barh(
            [i],
            [k.geomean - 1.0],
            left=1.0,
            height=0.5,
            color=BAND_COLORS.get(k.band, "#8c8c8c"),
            edgecolor="#222222",
            linewidth=0.8,
        )
        low, high = k.ci95 or (k.geomean, k.geomean)
        ax.errorbar(
            [k.geomean],
            [i],
            xerr=[[k.geomean - low], [high - k.geomean]],
            fmt="none",
            ecolor="#222222",
            elinewidth=1.0,
            capsize=4,
        )
        # The per-config ratios, spread over the bar's height in report order (no random jitter).
        count = len(k.ratios)
        ys = [i - 0.18 + 0.36 * (j / (count - 1) if count > 1 else 0.5) for j in range(count)]
        ax.scatter(k.ratios, ys, s=14, facecolors="white", edgecolors="#222222", linewidths=0.8, zorder=3)
        # The value in a column at the right edge, clear of the bars and dots (the x range leaves room).
        _label(ax, f"{k.geomean:.4f} {k.band}", (1.0, i), -4, xycoords=("axes fraction", "data"), fontsize=8)
        values += [k.geomean, low, high] + list(k.ratios)
    low, high = _padded(values, 0.12, 0.45)
    ax.set_xlim(low, high)
    ax.axvspan(low, DONE_EDGE, color=BAND_COLORS["DONE"], alpha=0.12, linewidth=0)
    ax.axvline(1.0, color="#222222", linewidth=1.0)
    ax.axvline(DONE_EDGE, color="#555555", linewidth=0.9, linestyle="--")
    ax.set_yticks(range(n), [k.kernel + (f"\nvs {k.reference}" if k.reference else "") for k in kernels])
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlabel(f"{chart.port} time / reference baseline time (< 1: {chart.port} faster)")
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)
    handles = [
        Patch(facecolor=BAND_COLORS["DONE"], alpha=0.12, label=f"DONE band (geomean ≤ {DONE_EDGE:.2f})"),
        Patch(facecolor="#8c8c8c", edgecolor="#222222", label="geomean ratio, 95 % interval"),
        Line2D(
            [],
            [],
            linestyle="none",
            marker="o",
            markerfacecolor="white",
            markeredgecolor="#222222",
            markersize=4,
            label="one config",
        ),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False, fontsize=8)
    fig.suptitle(f"{chart.port}: geomean ratio against each kernel's reference baseline")
    return fig


# ---------------------------------------------------------------------------------------------
# sweep.svg (tilekit.testing.sweep)


@dataclass(frozen=True)
class SweepPoint:
    """One config of a sweep: its dtype, its size (bytes moved or FLOPs), the port's time over the
    best baseline's, and the port's % of peak."""

    group: str
    work: float | None
    ratio: float
    peak_pct: float | None


@dataclass(frozen=True)
class SweepChart:
    kernel: str
    points: tuple  # SweepPoint
    unit: str  # what `work` counts: "bytes moved" or "FLOPs"


def sweep_svg(chart: SweepChart) -> str:
    return _svg(lambda: _sweep_figure(chart))


def write_sweep(chart: SweepChart, path: str) -> None:
    write_atomic(path, sweep_svg(chart))


RATIO_TICKS = (0.1, 0.2, 0.33, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)


def _sweep_figure(chart: SweepChart):
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    fig = Figure(figsize=(10.0, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2, sharex=True)
    groups = sorted({p.group for p in chart.points})
    markers = dict(zip(groups, "osD^v<>"))
    colors = dict(zip(groups, (PORT_COLOR, "#dd8452", "#55a868", "#8172b3", "#937860")))
    for g in groups:
        mine = [p for p in chart.points if p.group == g and p.work]
        style = dict(marker=markers[g], s=16, facecolors="none", edgecolors=colors[g], linewidths=0.9, label=g)
        left.scatter([p.work for p in mine], [p.ratio for p in mine], **style)
        shares = [p for p in mine if p.peak_pct is not None]
        right.scatter([p.work for p in shares], [p.peak_pct for p in shares], **style)
    left.set_xscale("log")
    left.set_yscale("log")
    ratios = [p.ratio for p in chart.points] or [1.0]
    ticks = [t for t in RATIO_TICKS if min(ratios) / 1.2 <= t <= max(ratios) * 1.2] or [1.0]
    left.set_yticks(ticks, [f"{t:g}" for t in ticks])
    left.yaxis.set_minor_formatter(NullFormatter())
    left.axhline(1.0, color="#222222", linewidth=1.0)
    left.axhline(DONE_EDGE, color="#555555", linewidth=0.9, linestyle="--")
    left.set_title("port time / best baseline time (> 1: the port loses)")
    left.set_ylabel("ratio (log)")
    right.axhline(100.0, color="#222222", linewidth=1.0)
    right.set_ylim(0, max([105.0] + [p.peak_pct * 1.05 for p in chart.points if p.peak_pct is not None]))
    right.set_title("port throughput, % of the GPU's peak")
    right.set_ylabel("% of peak")
    for ax in (left, right):
        ax.set_xlabel(f"problem size ({chart.unit}, log)")
        ax.grid(color="#e0e0e0", linewidth=0.6)
        ax.set_axisbelow(True)
    if groups:
        left.legend(frameon=False, fontsize=8)
    fig.suptitle(f"{chart.kernel}: sweep over {len(chart.points)} configs")
    return fig
