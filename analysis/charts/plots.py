"""PNG figures of a run or a comparison, drawn from the same rows the tables print.

Uses matplotlib's object API (``Figure`` without pyplot), so no display or backend choice is involved.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from specbench.analysis.charts.axes import COLOURS, inert_warnings, level_axis, ratio_bars, save_png
from specbench.analysis.charts.category_plots import has_category_heatmap, plot_category_heatmap
from specbench.analysis.charts.decompose_plots import plot_acceptance, plot_decomposition
from specbench.analysis.charts.energy_plots import has_energy, plot_energy
from specbench.analysis.charts.server_plots import has_timeline, plot_server_timeline
from specbench.analysis.records.summary import RunSummary, StepRow
from specbench.analysis.verdicts.categories import ALL
from specbench.analysis.verdicts.compare import Comparison
from specbench.contract.servertext import chart_text

Series = tuple[str, Sequence[StepRow]]


def _points(rows: Sequence[StepRow], attr: str, scale: float = 1.0) -> tuple[list[float], list[float]]:
    pairs = [(r.level, getattr(r, attr)) for r in rows if r.window_s and getattr(r, attr) is not None]
    return [c for c, _ in pairs], [v * scale for _, v in pairs]


def _levels(series: Sequence[Series]) -> list[float]:
    return sorted({r.level for _, rows in series for r in rows if r.window_s})


def _open_loop(series: Sequence[Series]) -> bool:
    return any(r.target_rate is not None for _, rows in series for r in rows)


def plot_throughput(series: Sequence[Series], path: Path) -> Path:
    """Window throughput against concurrency, one line per run."""
    fig = Figure(figsize=(7, 4.5), dpi=110)
    ax = fig.add_subplot()
    for (name, rows), colour in zip(series, COLOURS, strict=False):
        xs, ys = _points(rows, "throughput_tok_s")
        ax.plot(xs, ys, marker="o", color=colour, label=name)
    levels = _levels(series)
    level_axis(ax, levels, _open_loop(series))
    ax.set_ylabel("output throughput (tok/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("Throughput in each step's measured window")
    if levels:
        ax.legend()
    fig.tight_layout()
    save_png(fig, path)
    return path


def plot_latency(series: Sequence[Series], path: Path) -> Path:
    """TTFT and end-to-end latency p50 (solid) and p99 (dashed) against concurrency."""
    fig = Figure(figsize=(11, 4.5), dpi=110)
    panels = [("ttft", 1000.0, "TTFT (ms)"), ("e2e", 1.0, "end-to-end latency (s)")]
    for i, (prefix, scale, label) in enumerate(panels):
        ax = fig.add_subplot(1, 2, i + 1)
        for (name, rows), colour in zip(series, COLOURS, strict=False):
            for q, style in (("p50", "-"), ("p99", "--")):
                xs, ys = _points(rows, f"{prefix}_{q}_s", scale)
                ax.plot(xs, ys, style, marker="o", color=colour, label=f"{name} {q}")
        level_axis(ax, _levels(series), _open_loop(series))
        if any((np.asarray(line.get_ydata(), dtype=float) > 0).any() for line in ax.get_lines()):
            ax.set_yscale("log")
            ax.legend(fontsize="small")
        ax.set_ylabel(label)
    fig.suptitle("Latency percentiles per step")
    fig.tight_layout()
    save_png(fig, path)
    return path


def plot_ratio(comparison: Comparison, path: Path) -> Path:
    """Spec/baseline throughput ratio with 95% intervals, the 1.0 line and the crossover band."""
    fig = Figure(figsize=(7, 4.5), dpi=110)
    ax = fig.add_subplot()
    levels = [lv for lv in comparison.levels if lv.ratio is not None]
    xs, ys = ratio_bars(ax, [(lv.target_c, ratio, lv.ratio_low, lv.ratio_high)
                             for lv in levels if (ratio := lv.ratio) is not None], "spec / baseline tok/s (95% CI)")
    added = [(lv.target_c, y) for lv, y in zip(levels, ys, strict=True) if lv.refined]
    if added:  # levels added after the ladder to pin the crossover get their own marker
        ax.plot([c for c, _ in added], [y for _, y in added], linestyle="none", marker="D",
                markersize=8, markerfacecolor="none", markeredgecolor="tab:orange", label="added to pin the crossover")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="break-even")
    level_axis(ax, xs)
    if xs:
        left, right = min(xs) / 1.3, max(xs) * 1.3
        ax.set_xlim(left, right)
        for x in comparison.verdict.crossovers:
            ax.axvspan(x.c_low or left, x.c_high or right, color="tab:green", alpha=0.15)
            ax.axvline(x.c, color="tab:green", label=f"crossover C≈{x.c:.3g} (95% interval shaded)")
    ax.set_ylabel("throughput ratio (spec / baseline)")
    ax.set_title("Does speculation pay off? (>1: spec wins)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_png(fig, path)
    return path


def plot_categories(comparison: Comparison, path: Path) -> Path:
    """Acceptance length by category (spec run, all levels) and speed-up by category at the lowest level."""
    fig = Figure(figsize=(11, 4.5), dpi=110)
    ax_acc = fig.add_subplot(1, 2, 1)
    accept = [(chart_text(cat), v) for cat, v in comparison.categories.accept_by_category if v is not None]
    if accept:
        ax_acc.bar([c for c, _ in accept], [v for _, v in accept], color="tab:orange")
        ax_acc.set_ylabel("acceptance length (tokens / verify pass)")
        ax_acc.tick_params(axis="x", labelrotation=30)
    else:
        ax_acc.text(0.5, 0.5, "no acceptance data in the spec run", ha="center", va="center")
    ax_acc.set_title("Acceptance length by category (spec run)")
    ax_up = fig.add_subplot(1, 2, 2)
    rows = comparison.categories.rows
    if rows:
        level = min(r.target_c for r in rows)
        cats = [r for r in rows if r.target_c == level and r.category != ALL and r.speedup is not None]
        names = [chart_text(r.category) for r in cats]
        ax_up.bar(names, [s for r in cats if (s := r.speedup) is not None], color="tab:blue", label="mean speed-up")
        best = [(chart_text(r.category), r.best_prompt_speedup) for r in cats if r.best_prompt_speedup is not None]
        ax_up.scatter([c for c, _ in best], [v for _, v in best], color="tab:red", zorder=3,
                      label="best single prompt")
        ax_up.axhline(1.0, color="black", linestyle="--", linewidth=1)
        ax_up.set_title(f"Per-request speed-up by category at C={level}")
        ax_up.set_ylabel("spec / baseline per-request tok/s")
        ax_up.tick_params(axis="x", labelrotation=30)
        ax_up.legend(fontsize="small")
    else:
        ax_up.text(0.5, 0.5, "no level measured in both runs", ha="center", va="center")
    fig.tight_layout()
    save_png(fig, path)
    return path


@inert_warnings
def summary_plots(summary: RunSummary, out_dir: Path) -> list[Path]:
    series = [(chart_text(summary.name), summary.rows)]
    timeline = [plot_server_timeline([summary], out_dir / "server_timeline.png")] if has_timeline([summary]) else []
    return [plot_throughput(series, out_dir / "throughput_vs_c.png"),
            plot_latency(series, out_dir / "latency_vs_c.png"), *timeline]


@inert_warnings
def comparison_plots(comparison: Comparison, out_dir: Path) -> list[Path]:
    series = [(chart_text(comparison.spec.name), comparison.spec.rows),
              (chart_text(comparison.baseline.name), comparison.baseline.rows)]
    runs = [comparison.baseline, comparison.spec]
    found = [lv.decomposition for lv in comparison.levels if lv.decomposition is not None]
    why = [plot_decomposition(found, out_dir / "decomposition_vs_c.png"),
           plot_acceptance(found, out_dir / "acceptance_hist.png",
                           [(lv.spec.level_text, lv.spec.server_accept_by_position) for lv in comparison.levels
                            if lv.spec.server_samples])] if found else []
    return [
        plot_throughput(series, out_dir / "throughput_vs_c.png"),
        plot_ratio(comparison, out_dir / "ratio_vs_c.png"),
        plot_latency(series, out_dir / "latency_vs_c.png"),
        plot_categories(comparison, out_dir / "categories.png"),
        *([plot_category_heatmap(v, out_dir / "category_ratio.png")]
          if (v := comparison.by_category) is not None and has_category_heatmap(v) and not comparison.open_loop
          else []),
        *why,
        *([plot_energy(comparison, out_dir / "energy_vs_c.png")] if has_energy(runs) else []),
        *([plot_server_timeline(runs, out_dir / "server_timeline.png")] if has_timeline(runs) else []),
    ]
