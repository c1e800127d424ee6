"""What every figure shares: the run colours and the level axis, so that C (or the rate) reads alike in each PNG.

Its own module, under the figures of ``plots``, ``decompose_plots``, ``equivalence_plots`` and ``multi_plots``,
so that none of them imports another for its axes.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes

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
