"""The two figures of a many-configuration report: every curve in one plot, and the ratio heat map.

Drawn from the rows ``multi.compare_many`` built (matplotlib object API, no display), like ``plots.py``.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib import colormaps
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from specbench.analysis.charts.axes import inert_warnings, level_axis, save_png
from specbench.analysis.verdicts.multi import MultiComparison


def _colour(i: int) -> tuple[float, float, float, float]:
    return colormaps["tab10"](i % 10)


def plot_all_curves(m: MultiComparison, path: Path) -> Path:
    """Left: every configuration's throughput against C. Right: each one's ratio to the baseline (95% CI)."""
    fig = Figure(figsize=(12, 4.8), dpi=110)
    ax_t, ax_r = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    levels = [lv.target_c for lv in m.levels]
    for i, name in enumerate(m.all_names):
        pts = [(lv.target_c, cl, tok) for lv in m.levels
               if (cl := lv.config(name)) is not None and (tok := cl.tok_s) is not None]
        style = "--" if name == m.baseline_name else "-"
        ax_t.plot([c for c, _, _ in pts], [tok for _, _, tok in pts], style, marker="o", color=_colour(i),
                  label=name + (" (baseline)" if name == m.baseline_name else ""))
        if name == m.baseline_name:
            continue
        rp = [(c, cl, ratio) for c, cl, _ in pts if (ratio := cl.ratio) is not None]
        ys = [ratio for _, _, ratio in rp]
        lows = [r - cl.ratio_low if cl.ratio_low is not None else 0.0 for _, cl, r in rp]
        highs = [cl.ratio_high - r if cl.ratio_high is not None else 0.0 for _, cl, r in rp]
        ax_r.errorbar([c for c, _, _ in rp], ys, yerr=[lows, highs], marker="o", capsize=3, color=_colour(i),
                      label=name)
    ax_r.axhline(1.0, color="black", linestyle="--", linewidth=1, label=f"{m.baseline_name} (break-even)")
    for s in m.policy.switches:
        ax_r.axvline(s.c, color="grey", linewidth=1, alpha=0.7)
        ax_r.text(s.c, 0.02, f" {s.to_name}", rotation=90, va="bottom", fontsize="x-small",
                  transform=ax_r.get_xaxis_transform())
    for ax in (ax_t, ax_r):
        level_axis(ax, levels)
        if levels:
            ax.legend(fontsize="small")
    ax_t.set_ylabel("output throughput (tok/s)")
    ax_t.set_ylim(bottom=0)
    ax_t.set_title("Throughput in each step's measured window")
    ax_r.set_ylabel(f"throughput ratio (configuration / {m.baseline_name})")
    ax_r.set_ylim(bottom=0)
    ax_r.set_title("Ratio to the baseline (grey lines: policy switch points)")
    fig.tight_layout()
    save_png(fig, path)
    return path


def plot_heatmap(m: MultiComparison, path: Path) -> Path:
    """Configuration x level, coloured by ratio to the baseline (log scale, 1.0 white); the best boxed."""
    names = list(m.all_names)
    cs = [lv.target_c for lv in m.levels]
    fig = Figure(figsize=(max(6.0, 1.0 + 0.9 * len(cs)), max(3.0, 1.2 + 0.55 * len(names))), dpi=110)
    ax = fig.add_subplot()
    grid = [[math.nan] * len(cs) for _ in names]
    for j, lv in enumerate(m.levels):
        for i, name in enumerate(names):
            cl = lv.config(name)
            if cl is not None and cl.ratio:
                grid[i][j] = math.log2(cl.ratio)
    finite = [abs(v) for row in grid for v in row if not math.isnan(v)]
    span = max([0.1, *finite])
    image = ax.imshow(grid, cmap="RdBu", norm=TwoSlopeNorm(vcenter=0.0, vmin=-span, vmax=span), aspect="auto")
    for j, lv in enumerate(m.levels):
        for i, name in enumerate(names):
            value = grid[i][j]
            if not math.isnan(value):
                ax.text(j, i, f"{2 ** value:.2f}x", ha="center", va="center", fontsize="small",
                        color="white" if abs(value) > 0.6 * span else "black")
            if name == lv.best:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2.5))
    ax.set_xticks(range(len(cs)), [str(c) for c in cs])
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("target concurrency C")
    ax.set_title(f"Throughput ratio to {m.baseline_name} (blue: faster; boxed: best at that level)")
    bar = fig.colorbar(image, ax=ax)
    bar.set_label("log2 ratio")
    fig.tight_layout()
    save_png(fig, path)
    return path


@inert_warnings
def multi_plots(m: MultiComparison, out_dir: Path) -> list[Path]:
    return [plot_all_curves(m, out_dir / "throughput_vs_c.png"), plot_heatmap(m, out_dir / "ratio_heatmap.png")]
