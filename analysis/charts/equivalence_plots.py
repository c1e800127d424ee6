"""The output-equivalence figure: changed-answer shares against C, and where answers first differ."""

from __future__ import annotations

from pathlib import Path

from matplotlib import colormaps
from matplotlib.figure import Figure

from specbench.analysis.charts.axes import inert_warnings, level_axis, save_png
from specbench.analysis.reporting.equivalence_report import Named
from specbench.analysis.verdicts.equivalence import histogram


@inert_warnings
def plot_equivalence(named: Named, path: Path, baseline_name: str = "baseline") -> Path:
    """Left: per level, the share of answers each configuration changed against the baseline (solid), the
    baseline's own noise floor against its lowest level (dashed black) and each configuration's (dotted).
    Right: the first differing position of every changed answer (all levels), binned by powers of two."""
    fig = Figure(figsize=(12, 4.8), dpi=110)
    ax, ax_h = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    checked = [(name, eq) for name, eq in named if eq.checked]
    levels = sorted({lv.target_c for _, eq in checked for lv in eq.levels})
    noise_drawn = False
    for i, (name, eq) in enumerate(checked):
        colour = colormaps["tab10"](i % 10)
        pts = [(lv.target_c, lv.spec_vs_baseline.share) for lv in eq.levels if lv.spec_vs_baseline.share is not None]
        ax.plot([c for c, _ in pts], [100 * s for _, s in pts], "-", marker="o", color=colour,
                label=f"{name} vs {baseline_name}")
        own = [(lv.target_c, lv.spec_noise.share) for lv in eq.levels
               if lv.spec_noise and lv.spec_noise.share is not None]
        ax.plot([c for c, _ in own], [100 * s for _, s in own], ":", marker="^", color=colour,
                label=f"{name} vs its lowest C")
        if not noise_drawn:
            base = [(lv.target_c, lv.baseline_noise.share) for lv in eq.levels
                    if lv.baseline_noise and lv.baseline_noise.share is not None]
            ax.plot([c for c, _ in base], [100 * s for _, s in base], "--", marker="s", color="black",
                    label=f"{baseline_name} vs its lowest C (noise floor)")
            noise_drawn = True
        hist = histogram(eq.total.positions)  # bins start alike, so a shorter list is a prefix of a longer one
        width = 0.8 / max(1, len(checked))
        ax_h.bar([j + i * width for j in range(len(hist))], [n for _, _, n in hist], width=width, color=colour,
                 label=name)
    bins = histogram([p for _, eq in checked for p in eq.total.positions])
    ax_h.set_xticks(range(len(bins)), [f"{lo}" if hi - lo == 1 else f"{lo}-{hi - 1}" for lo, hi, _ in bins],
                    fontsize="small")
    level_axis(ax, levels)
    ax.set_ylabel("answers changed (%)")
    ax.set_ylim(bottom=0)
    ax.set_title("Changed answers at temperature 0")
    unit = checked[0][1].unit if checked else "token"
    ax_h.set_xlabel(f"first differing {unit} (spec against baseline, all levels)")
    ax_h.set_ylabel("answers")
    ax_h.set_title("Where changed answers first differ")
    if not any(eq.total.positions for _, eq in checked):
        ax_h.text(0.5, 0.5, "no changed answer" if checked else "not checked", ha="center", va="center",
                  transform=ax_h.transAxes)
    for a in (ax, ax_h):
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize="small")
    fig.tight_layout()
    save_png(fig, path)
    return path
