"""The servers' own view against time: requests running and queued, and KV-cache use, one panel per run.

Each measured window is shaded and labelled with its C, so a step where the spec server queued (or filled its
KV cache) is seen at a glance next to the same step on the baseline. Drawn with matplotlib's object API.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from analysis.summary import RunSummary


def _series(summary: RunSummary, term: str, t0: float) -> tuple[list[float], list[float]]:
    points = [(s["t_s"] - t0, float(s["values"][term])) for s in summary.server_samples if term in s["values"]]
    return [t for t, _ in points], [v for _, v in points]


def has_timeline(summaries: Sequence[RunSummary]) -> bool:
    return any(s.server_samples for s in summaries)


def plot_server_timeline(summaries: Sequence[RunSummary], path: Path) -> Path:
    """One row per run: running and queued requests (left axis), KV use (right axis), windows shaded."""
    fig = Figure(figsize=(11, 3.2 * len(summaries)), dpi=110)
    for i, summary in enumerate(summaries):
        ax = fig.add_subplot(len(summaries), 1, i + 1)
        t0 = summary.server_samples[0]["t_s"] if summary.server_samples else 0.0
        ax.set_title(f"{summary.name}: the server's /metrics")
        if not summary.server_samples:
            ax.text(0.5, 0.5, "no server metrics in this run", ha="center", va="center", transform=ax.transAxes)
            continue
        for term, colour in (("running", "tab:blue"), ("queued", "tab:red")):
            xs, ys = _series(summary, term, t0)
            if xs:
                ax.plot(xs, ys, color=colour, label=f"requests {term}", linewidth=1.2)
        for row in summary.rows:
            if row.window_start_s is None or row.window_end_s is None or not row.window_s:
                continue
            left, right = row.window_start_s - t0, row.window_end_s - t0
            ax.axvspan(left, right, color="tab:gray", alpha=0.12)
            ax.axvline(left, color="tab:gray", linewidth=0.6)
            ax.text(left, 1.0, f" C={row.target_c}", transform=ax.get_xaxis_transform(), va="top", fontsize="small")
        ax.set_ylabel("requests")
        ax.set_ylim(bottom=0)
        xs, ys = _series(summary, "kv_cache_usage", t0)
        if xs:
            kv = ax.twinx()
            kv.plot(xs, [y * 100 for y in ys], color="tab:green", linewidth=1, linestyle="--", label="KV use")
            kv.set_ylabel("KV cache use (%)")
            kv.set_ylim(0, 100)
            kv.legend(loc="upper right", fontsize="small")
        ax.legend(loc="upper left", fontsize="small")
        ax.grid(True, alpha=0.3)
    fig.axes[-1].set_xlabel("seconds since the first sample (shaded: measured windows)")
    fig.tight_layout()
    fig.savefig(path)
    return path
