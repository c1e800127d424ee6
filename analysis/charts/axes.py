"""What every figure shares: the run colours, the level axis and the ratio bars, so that C reads alike in each PNG;
how each is saved (``save_png``: whole, or not at all); and how a figure's warnings reach stderr
(``inert_warnings``).

Text from a run or a dataset drawn on a figure (a run's label, a category) goes through
``contract.servertext.chart_text`` where it is drawn. matplotlib's own warnings quote the text they are about
(a missing glyph: the character itself), so the entry points that draw (``summary_plots``, ``comparison_plots``,
``multi_plots``, ``plot_equivalence``) also pass every warning through ``plain`` before it is shown (#70).

Its own module, under the figures of ``plots``, ``decompose_plots``, ``equivalence_plots`` and ``multi_plots``,
so that none of them imports another for its axes.
"""

from __future__ import annotations

import functools
import io
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ParamSpec, TypeVar

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from specbench.analysis.reporting.files import write_whole
from specbench.contract.servertext import plain

P = ParamSpec("P")
R = TypeVar("R")

COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def level_axis(ax: Axes, levels: Sequence[float], open_loop: bool = False) -> None:
    """Log-scaled concurrency (or request-rate) axis ticked at the tested levels (a note when there are none)."""
    ax.set_xlabel("request rate, req/s (log scale)" if open_loop else "target concurrency C (log scale)")
    ax.grid(True, which="major", alpha=0.3)
    if not levels:
        ax.text(0.5, 0.5, "no measured level", ha="center", va="center", transform=ax.transAxes)
        return
    ax.set_xscale("log")
    ax.set_xticks(list(levels))
    ax.set_xticklabels([f"{c:g}" for c in levels])
    ax.minorticks_off()


def ratio_bars(ax: Axes, points: Sequence[tuple[float, float, float | None, float | None]], label: str
               ) -> tuple[list[float], list[float]]:
    """A spec / baseline ratio per level, (level, ratio, low, high), as points with their 95% interval bars;
    returns the levels and ratios drawn. The y axis runs from 0 to above the highest bar and to 1.2 at least, so
    the 1.0 line always shows."""
    xs = [x for x, _, _, _ in points]
    ys = [y for _, y, _, _ in points]
    lows = [y - low if low is not None else 0.0 for _, y, low, _ in points]
    highs = [high - y if high is not None else 0.0 for _, y, _, high in points]
    ax.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=4, color="tab:purple", label=label)
    ax.set_ylim(bottom=0, top=max([1.2, *(y + h for y, h in zip(ys, highs, strict=True))]) * 1.05)
    return xs, ys


def inert_warnings(draw: Callable[P, R]) -> Callable[P, R]:
    """``draw`` with each warning it raises shown once, its message through ``plain``: a glyph warning about a
    label's ESC or BEL echoes the raw character, which a terminal would obey."""

    @functools.wraps(draw)
    def drawing(*args: P.args, **kwargs: P.kwargs) -> R:
        with warnings.catch_warnings(record=True) as caught:
            result = draw(*args, **kwargs)
        shown = {(plain(str(w.message), None), w.category, w.filename, w.lineno) for w in caught}
        for message, category, filename, lineno in sorted(shown, key=lambda s: (s[2], s[3], s[0])):
            warnings.warn_explicit(message, category, filename, lineno)
        return result

    return drawing


def save_png(fig: Figure, path: Path) -> Path:
    """The figure drawn in memory, then written whole (``write_whole``): a full disk leaves no 0-byte PNG."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix.lstrip(".") or "png")
    return write_whole(path, buffer.getvalue())
