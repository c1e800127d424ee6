"""Where a server stops scaling: the lowest level whose throughput is already the maximum, within noise,
while queueing or time to first token keeps growing above it.

"Within noise" uses each level's 95% throughput interval: a level saturates the server when its interval
reaches the highest level's throughput (or the highest level's interval reaches it). That alone would call
a curve that is merely flat in the noise saturated, so the rows above must show the cost of more load:
the server queueing requests (its own /metrics), or the median TTFT growing by ``TTFT_GROWTH``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.analysis.records.summary import RunSummary
from specbench.analysis.table import fmt_num

QUEUED_FROM = 1.0  # mean requests waiting for a batch slot from which a level counts as queueing
TTFT_GROWTH = 1.5  # median TTFT this many times the saturation level's: load only adds waiting
FLAT_WITHOUT_INTERVAL = 0.03  # levels without an interval: within 3% of the maximum counts as the maximum


@dataclass(frozen=True)
class LoadPoint:
    """One level of one server: throughput with its 95% interval, and the signs of waiting."""

    target_c: int
    tok_s: float
    low: float | None = None
    high: float | None = None
    ttft_p50_s: float | None = None
    queued: float | None = None  # mean requests queued on the server (None without server metrics)


@dataclass(frozen=True)
class Saturation:
    """A server's saturation level, or why none was found."""

    name: str
    target_c: int | None  # the saturation level; None: still scaling (or no evidence) at the tested levels
    tok_s: float | None
    queue_from: int | None  # first level from which the server queued requests
    ttft_growth: float | None  # median TTFT at the highest level / at the saturation level
    text: str


def _reaches_max(p: LoadPoint, top: LoadPoint) -> bool:
    if p.high is not None and p.high >= top.tok_s:
        return True
    if top.low is not None and p.tok_s >= top.low:
        return True
    return p.tok_s >= top.tok_s * (1 - FLAT_WITHOUT_INTERVAL)


def find_saturation(name: str, points: Sequence[LoadPoint]) -> Saturation:
    """The lowest level at the maximum throughput (within its interval) with waiting growing above it."""
    pts = sorted((p for p in points if p.tok_s > 0), key=lambda p: p.target_c)
    if len(pts) < 2:
        return Saturation(name, None, None, None, None, f"{name}: too few levels to tell where it saturates")
    top = max(pts, key=lambda p: p.tok_s)
    sat = next(p for p in pts if _reaches_max(p, top))
    above = [p for p in pts if p.target_c > sat.target_c]
    queue_from = next((p.target_c for p in pts if p.queued is not None and p.queued >= QUEUED_FROM), None)
    last = pts[-1]
    growth = (last.ttft_p50_s / sat.ttft_p50_s if last.ttft_p50_s and sat.ttft_p50_s and last is not sat
              else None)
    queueing = queue_from is not None and queue_from > sat.target_c - 1 and bool(above)
    waiting = growth is not None and growth >= TTFT_GROWTH
    if not above or not (queueing or waiting):
        text = (f"{name} still scales at the highest tested level (C={last.target_c}, {fmt_num(last.tok_s)} tok/s)"
                if sat is last or not above else
                f"{name}: throughput flat from C={sat.target_c} but neither queueing nor TTFT grows; no saturation "
                "claimed")
        return Saturation(name, None, None, queue_from, growth, text)
    signs = []
    if queueing:
        signs.append(f"server queue from C={queue_from}")
    if waiting:
        signs.append(f"TTFT p50 x{growth:.1f} by C={last.target_c}")
    text = f"{name} saturates near C={sat.target_c} at {sat.tok_s:,.0f} tok/s ({'; '.join(signs)})"
    return Saturation(name, sat.target_c, sat.tok_s, queue_from, growth, text)


def skipped_levels(ladder: Sequence[int], saturations: Sequence[Saturation], after: int) -> tuple[int, ...]:
    """Ladder levels more than ``after`` levels beyond a saturation every server shows (none if one does not)."""
    levels = sorted(ladder)
    if after < 0 or not saturations or any(s.target_c is None for s in saturations):
        return ()
    last_sat = max(s.target_c for s in saturations if s.target_c is not None)
    at = max(i for i, c in enumerate(levels) if c <= last_sat) if any(c <= last_sat for c in levels) else -1
    return tuple(levels[at + after + 1:])


def saturation_of(summary: RunSummary) -> Saturation:
    """A run's saturation from its closed-loop rows (throughput interval, TTFT, server queue)."""
    points = []
    for row in summary.rows:
        if row.target_rate is not None or not row.window_s or not row.throughput_tok_s:
            continue
        ci = row.throughput_ci_rel
        tok = row.throughput_tok_s
        points.append(LoadPoint(row.target_c, tok, tok * (1 - ci) if ci is not None else None,
                                tok * (1 + ci) if ci is not None else None, row.ttft_p50_s, row.server_queued))
    # A level measured twice (a re-run step) counts once: its last window, as ``row_at`` takes it.
    last = {p.target_c: p for p in points}
    return find_saturation(summary.name, list(last.values()))


def skipped_statement(ladder: Sequence[int], measured: Sequence[int], after: int | None,
                      saturations: Sequence[Saturation]) -> str | None:
    """Which ladder levels no server ran, and why, when ``--stop-after-saturation`` skipped them."""
    skipped = sorted(set(ladder) - set(measured))
    if after is None or not skipped:
        return None
    at = ", ".join(f"{s.name} near C={s.target_c}" for s in saturations if s.target_c is not None)
    return (f"skipped {', '.join(f'C={c}' for c in skipped)}: more than {after} level{'s' if after != 1 else ''} "
            f"beyond the saturation every server showed ({at or 'as the ladders judged it live'}; "
            f"--stop-after-saturation {after})")
