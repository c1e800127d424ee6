"""The servers' own view against time: requests running and queued, and KV-cache use, one panel per run.

Each measured window is shaded and named by its level (C, or the request rate in open loop), so a step where
the spec server queued (or filled its KV cache) is seen at a glance next to the same step on the baseline.
The names sit in rows above the plot, a name moving up a row where it would run into the one before, so they
never cover the curves, the legend or each other. Drawn with matplotlib's object API.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.typing import LineStyleType

from specbench.analysis.charts.axes import save_png
from specbench.analysis.records.summary import RunSummary, StepRow
from specbench.contract.servertext import chart_text

FIG_WIDTH_IN = 11.0
LABEL_PT = 8.0  # font size of the step names
LABEL_ROWS = 3  # rows of step names above each panel
ROW_FRACTION = 0.075  # height of one row of names, as a fraction of a panel's axes
CHAR_WIDTH = 0.62  # a character's width as a fraction of the font size (DejaVu Sans, digits and '=')
SERIES: tuple[tuple[str, str, str, LineStyleType], ...] = (
    ("running", "tab:blue", "requests running", "-"), ("queued", "tab:red", "requests queued", "-"))


def _series(summary: RunSummary, term: str, t0: float) -> tuple[list[float], list[float]]:
    points = [(s["t_s"] - t0, float(s["values"][term])) for s in summary.server_samples if term in s["values"]]
    return [t for t, _ in points], [v for _, v in points]


def has_timeline(summaries: Sequence[RunSummary]) -> bool:
    return any(s.server_samples for s in summaries)


def step_label(row: StepRow) -> str:
    """``C=10`` in closed loop, ``4 req/s`` in open loop (where every step's C is 0)."""
    return f"{row.target_rate:g} req/s" if row.target_rate is not None else f"C={row.target_c}"


def label_rows(lefts: Sequence[float], widths: Sequence[float], rows: int = LABEL_ROWS) -> list[int]:
    """The row of each name (given in left-to-right order as axes fractions): the lowest row where it clears the
    name before it by a small gap, else the row whose last name ends first (the least overlap)."""
    ends = [float("-inf")] * rows
    chosen = []
    for left, width in zip(lefts, widths, strict=True):
        free = [r for r in range(rows) if ends[r] + 0.005 <= left]
        row = free[0] if free else min(range(rows), key=lambda r: ends[r])
        ends[row] = left + width
        chosen.append(row)
    return chosen


def _windows(ax: Axes, summary: RunSummary, t0: float) -> int:
    """Shade each measured window and name it in the rows above the panel; returns the rows of names used."""
    spans = [(row.window_start_s - t0, row.window_end_s - t0, step_label(row)) for row in summary.rows
             if row.window_start_s is not None and row.window_end_s is not None and row.window_s]
    for left, right, _ in spans:
        ax.axvspan(left, right, color="tab:gray", alpha=0.12)
        ax.axvline(left, color="tab:gray", linewidth=0.6)
    lo, hi = ax.get_xlim()
    axes_width_pt = FIG_WIDTH_IN * 72 * ax.get_position().width
    lefts = [(left - lo) / (hi - lo) for left, _, _ in spans]
    widths = [len(text) * CHAR_WIDTH * LABEL_PT / axes_width_pt for _, _, text in spans]
    rows = label_rows(lefts, widths)
    for (left, _, text), row in zip(spans, rows, strict=True):
        ax.text(left, 1.01 + row * ROW_FRACTION, text, transform=ax.get_xaxis_transform(), va="bottom",
                ha="left", fontsize=LABEL_PT, clip_on=False)
    return max(rows, default=-1) + 1


def _panel(ax: Axes, summary: RunSummary) -> int:
    t0 = summary.server_samples[0]["t_s"]
    for term, colour, _, style in SERIES:
        xs, ys = _series(summary, term, t0)
        if xs:
            ax.plot(xs, ys, color=colour, linewidth=1.2, linestyle=style)
    ax.set_ylabel("requests")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    xs, ys = _series(summary, "kv_cache_usage", t0)
    if xs:
        kv = ax.twinx()
        kv.plot(xs, [y * 100 for y in ys], color="tab:green", linewidth=1, linestyle="--")
        kv.set_ylabel("KV cache use (%)")
        kv.set_ylim(0, 100)
    return _windows(ax, summary, t0)


def plot_server_timeline(summaries: Sequence[RunSummary], path: Path) -> Path:
    """Draw ``timeline_figure`` into ``path`` (PNG)."""
    save_png(timeline_figure(summaries), path)
    return path


def timeline_figure(summaries: Sequence[RunSummary]) -> Figure:
    """One row per run: running and queued requests (left axis), KV use (right axis), windows shaded and named.
    One legend for all panels, above them; the x axis in seconds since the run's first /metrics sample."""
    fig = Figure(figsize=(FIG_WIDTH_IN, 3.6 * len(summaries) + 0.5), dpi=110)
    fig.subplots_adjust(left=0.07, right=0.92, bottom=0.5 / fig.get_figheight() + 0.06 / len(summaries),
                        top=1 - 0.75 / fig.get_figheight(), hspace=0.55)
    main_axes = []
    for i, summary in enumerate(summaries):
        ax = fig.add_subplot(len(summaries), 1, i + 1)
        main_axes.append(ax)
        used = 0
        if summary.server_samples:
            used = _panel(ax, summary)
        else:
            ax.text(0.5, 0.5, "no server metrics in this run", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(f"{chart_text(summary.name)}: the server's /metrics", loc="left", pad=used * 11 + 6)
    handles = [Line2D([], [], color=c, linestyle=s, label=label) for _, c, label, s in SERIES]
    handles.append(Line2D([], [], color="tab:green", linestyle="--", label="KV cache use (right axis)"))
    fig.legend(handles=handles, loc="upper right", ncol=len(handles), fontsize="small", frameon=False)
    main_axes[-1].set_xlabel("time since the run's first /metrics sample (s); shaded: measured windows, "
                             "named by level")
    return fig
