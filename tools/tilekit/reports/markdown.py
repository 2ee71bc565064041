"""Cells and tables of the markdown reports: pipe tables, cell escaping, number formats.

Shared by report (performance.md), correctness (correctness.md) and summary (summary.md); charts
reads ``peak_share`` so the chart and the "% of peak" column are one number.
"""

from __future__ import annotations


def ms_text(value) -> str:
    """A time in ms as the tables print it (6 decimals, as the record blocks); '-' when absent."""
    return "-" if value is None else f"{value:.6f}"


def ratio_text(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def cell(text: str) -> str:
    """Text made safe for one table cell: no pipe ends the cell, no newline ends the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[list[str]], headers: list[str]) -> str:
    """A GitHub pipe table of preformatted cells, columns padded to their widest cell.

    Written here rather than with tabulate: tabulate infers a type for every cell, which took
    most of the 2 s budget on a 10,000-config report whose cells are all strings already.
    """
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])


def peak_share(record) -> tuple[float, float | None, str] | None:
    """(throughput, % of peak or None, unit) of the port's record, GB/s preferred over TFLOP/s;
    None when the record has neither. The table's columns and the chart both read it."""
    if record is None:
        return None
    for value_key, peak_key, unit in (("gbps", "peak_gbps", "GB/s"), ("tflops", "peak_tflops", "TFLOP/s")):
        value = record.number(value_key)
        if value is not None:
            peak = record.number(peak_key)
            return value, (100 * value / peak if peak else None), unit
    return None


def throughput(record) -> tuple[str, str]:
    """(value, % of peak) of the port's record as the table prints them; '-' when absent."""
    share = peak_share(record)
    if share is None:
        return "-", "-"
    value, pct, _ = share
    return f"{value:.1f}", "-" if pct is None else f"{pct:.1f}%"
