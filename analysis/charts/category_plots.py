"""The per-category verdict as a heat map: categories down, levels across, each cell the throughput ratio.

Colour is log2 of the ratio on a red (spec loses) to green (spec wins) scale centred on 1, so equal gains and
losses look equally strong; the text says the ratio and whether its interval (the table's, Bonferroni) is above
1 (+), below (-), holds 1 (?) or could not be had (n/a).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from specbench.analysis.charts.axes import save_png
from specbench.analysis.verdicts.category_verdict import CategoryVerdict
from specbench.contract.servertext import chart_text

MARKS = {"spec": "+", "baseline": "-", "unclear": "?"}


def has_category_heatmap(verdict: CategoryVerdict | None) -> bool:
    return verdict is not None and len({cell.category for cell in verdict.cells}) >= 2


def plot_category_heatmap(verdict: CategoryVerdict, path: Path) -> Path:
    names = sorted({cell.category for cell in verdict.cells})
    levels = sorted({cell.target_c for cell in verdict.cells})
    grid = np.full((len(names), len(levels)), np.nan)
    fig = Figure(figsize=(max(6.0, 1.1 * len(levels) + 2.5), max(2.5, 0.5 * len(names) + 1.5)), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    for cell in verdict.cells:
        if cell.ratio is not None and cell.ratio > 0:
            grid[names.index(cell.category), levels.index(cell.target_c)] = math.log2(cell.ratio)
    reach = max(0.25, float(np.nanmax(np.abs(grid)))) if np.isfinite(grid).any() else 1.0
    for cell in verdict.cells:
        row, col = names.index(cell.category), levels.index(cell.target_c)
        places = 3 if cell.ratio is not None and f"{cell.ratio:.2f}" == "1.00" else 2
        text = "-" if cell.ratio is None else f"{cell.ratio:.{places}f}\n{MARKS.get(cell.winner or '', 'n/a')}"
        dark = bool(np.isfinite(grid[row, col]) and abs(grid[row, col]) > 0.6 * reach)  # white on the deep colours
        ax.text(col, row, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    image = ax.imshow(grid, cmap="RdYlGn", vmin=-reach, vmax=reach, aspect="auto")
    ax.set_xticks(range(len(levels)), [f"C={c}" for c in levels])
    ax.set_yticks(range(len(names)), [chart_text(name) for name in names])  # a prompt file's labels: data
    ax.set_title("Spec / baseline throughput ratio per category (+ / -: interval above / below 1)")
    bar = fig.colorbar(image, ax=ax)
    ticks = [t for t in (-2, -1, -0.5, 0, 0.5, 1, 2) if abs(t) <= reach]
    bar.set_ticks(ticks, labels=[f"{2**t:.2g}x" for t in ticks])
    fig.tight_layout()
    save_png(fig, path)
    return path
