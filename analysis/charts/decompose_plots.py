"""The decomposition's plots: its factors and product against C beside the measured ratio, and acceptance
histograms per level and per category, with the server's acceptance by draft position beside them. Figures come
from ``analysis.verdicts.decompose`` (via ``decompose_report``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from specbench.analysis.charts.axes import COLOURS, level_axis, save_png
from specbench.analysis.reporting.decompose_report import by_category, histogram
from specbench.analysis.verdicts.decompose import Decomposition, Estimate
from specbench.contract.servertext import chart_text


def _errorbar(ax: Axes, xs: list[int], ests: Sequence[Estimate], scale: float = 1.0, **kw: Any) -> None:
    pairs = [(x, e, v) for x, e in zip(xs, ests, strict=True) if (v := e.value) is not None]
    ys = [v * scale for _, _, v in pairs]
    lows = [(v - e.low) * scale if e.low is not None else 0.0 for _, e, v in pairs]
    highs = [(e.high - v) * scale if e.high is not None else 0.0 for _, e, v in pairs]
    kw.setdefault("marker", "o")
    ax.errorbar([x for x, _, _ in pairs], ys, yerr=[lows, highs], capsize=3, **kw)


def plot_decomposition(levels: Sequence[Decomposition], path: Path) -> Path:
    """Left: tokens per pass, baseline step / verify pass and their product (log y) beside the measured
    per-request ratio. Right: the verify pass and the baseline step in ms, against C."""
    fig = Figure(figsize=(12, 4.8), dpi=110)
    xs = [d.target_c for d in levels]
    ax = fig.add_subplot(1, 2, 1)
    speed = [Estimate(1 / d.pass_cost.value if d.pass_cost.value else None,
                      1 / d.pass_cost.high if d.pass_cost.high else None,
                      1 / d.pass_cost.low if d.pass_cost.low else None) for d in levels]
    _errorbar(ax, xs, [d.spec.tokens_per_pass for d in levels], color="tab:orange", label="tokens per verify pass")
    _errorbar(ax, xs, speed, color="tab:blue", label="baseline step / verify pass")
    _errorbar(ax, xs, [d.product for d in levels], color="tab:purple", linewidth=2, label="product")
    _errorbar(ax, xs, [d.measured for d in levels], color="black", linestyle="none", marker="x",
              label="measured per-request ratio")
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    level_axis(ax, xs)
    if xs:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("factor (log scale)")
    ax.set_title("Per-request ratio = tokens per pass x step/pass time")
    ax.legend(fontsize="small")
    ax_t = fig.add_subplot(1, 2, 2)
    _errorbar(ax_t, xs, [d.spec.pass_s for d in levels], 1000.0, color=COLOURS[0], label="spec verify pass")
    _errorbar(ax_t, xs, [d.baseline.pass_s for d in levels], 1000.0, color=COLOURS[1], label="baseline step")
    level_axis(ax_t, xs)
    ax_t.set_ylim(bottom=0)
    ax_t.set_ylabel("time of one pass (ms)")
    ax_t.set_title("What one pass costs (decode time / passes)")
    ax_t.legend(fontsize="small")
    fig.tight_layout()
    save_png(fig, path)
    return path


def _hist(ax: Axes, values: Sequence[float], label: str, colour: str) -> None:
    hist = histogram(values)
    edges, counts = hist["edges"], hist["counts"]
    total = sum(counts)
    if total:
        ax.stairs([c / total for c in counts], edges, color=colour, label=f"{label} ({total})")


PositionRates = Sequence[tuple[str, tuple[float, ...] | None]]


def _by_position(ax: Axes, by_position: PositionRates) -> None:
    """The server's acceptance rate per draft position, one line per level; says so where it is not exported."""
    shown = [(label, rates) for label, rates in by_position if rates]
    for i, (label, rates) in enumerate(shown):
        ax.plot(range(len(rates)), rates, marker="o", color=f"C{i % 10}", label=label)
    if shown:
        ax.set_xticks(range(max(len(rates) for _, rates in shown)))
    else:
        ax.text(0.5, 0.5, "not exported by this server", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("draft position (0 = first drafted token)")
    ax.set_ylabel("share of verify passes that accepted it")
    ax.set_title("Acceptance by draft position (server counters)")


def plot_acceptance(levels: Sequence[Decomposition], path: Path, by_position: PositionRates = ()) -> Path:
    """Per-request tokens per verify pass: one histogram per level, and per category at the lowest level; with
    ``by_position`` ((level label, rates) of the spec run), a third panel with the server's per-position rates."""
    fig = Figure(figsize=(18 if by_position else 12, 4.5), dpi=110)
    panels = 3 if by_position else 2
    ax = fig.add_subplot(1, panels, 1)
    for i, d in enumerate(levels):
        _hist(ax, d.spec_tokens_per_pass, f"C={d.target_c}", f"C{i % 10}")
    ax.set_title("Tokens per verify pass per request, by level")
    ax_c = fig.add_subplot(1, panels, 2)
    if levels:
        for i, (cat, values) in enumerate(by_category(levels[0]).items()):
            _hist(ax_c, values, chart_text(cat), f"C{i % 10}")  # a prompt file's label: data
        ax_c.set_title(f"By prompt category at C={levels[0].target_c}")
    for a in (ax, ax_c):
        a.set_xlabel("tokens per verify pass (decode tokens / passes)")
        a.set_ylabel("share of requests")
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize="small")
    if by_position:
        ax_p = fig.add_subplot(1, panels, 3)
        _by_position(ax_p, by_position)
        if ax_p.get_legend_handles_labels()[0]:
            ax_p.legend(fontsize="small")
    fig.tight_layout()
    save_png(fig, path)
    return path
