"""energy_vs_c.png: GPU energy per output token against concurrency for both runs, and their ratio (#40).

Drawn only when a run measured energy (``--gpu-metrics``): ``has_energy`` says so, and a comparison without it
gets no such file and no such section in report.md or report.html.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from specbench.analysis.charts.axes import COLOURS, level_axis, ratio_bars, save_png
from specbench.analysis.records.summary import RunSummary
from specbench.analysis.verdicts.compare import Comparison


def has_energy(runs: list[RunSummary]) -> bool:
    """Whether any step of these runs has a measured energy per output token."""
    return any(r.energy_per_token_j is not None for run in runs for r in run.rows)


def plot_energy(comparison: Comparison, path: Path) -> Path:
    """Left: J per output token per step, one line per run; right: spec / baseline with its 95% interval."""
    fig = Figure(figsize=(11, 4.5), dpi=110)
    ax = fig.add_subplot(1, 2, 1)
    open_loop = any(r.target_rate is not None for run in (comparison.spec, comparison.baseline) for r in run.rows)
    levels: set[float] = set()
    for run, colour in zip((comparison.spec, comparison.baseline), COLOURS, strict=False):
        pairs = [(r.level, r.energy_per_token_j) for r in run.rows if r.window_s and r.energy_per_token_j is not None]
        levels.update(c for c, _ in pairs)
        ax.plot([c for c, _ in pairs], [j for _, j in pairs], marker="o", color=colour, label=run.name)
    level_axis(ax, sorted(levels), open_loop)
    ax.set_ylabel("GPU energy per output token (J)")
    ax.set_ylim(bottom=0)
    ax.set_title("Energy per output token in each step's window")
    if levels:
        ax.legend()
    ax_r = fig.add_subplot(1, 2, 2)
    xs, _ = ratio_bars(ax_r, [(lv.target_c, ratio, e.ratio_low, e.ratio_high) for lv in comparison.levels
                              if (e := lv.energy) is not None and (ratio := e.ratio) is not None],
                       "spec / baseline J/token (95% CI)")
    ax_r.axhline(1.0, color="black", linestyle="--", linewidth=1, label="same energy")
    level_axis(ax_r, xs, open_loop)
    ax_r.set_ylabel("energy per token ratio (spec / baseline)")
    ax_r.set_title("Energy cost of speculation (>1: spec uses more)")
    ax_r.legend(fontsize="small")
    fig.tight_layout()
    save_png(fig, path)
    return path
