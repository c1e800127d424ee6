"""Where the spec/baseline throughput ratio crosses 1, and the plain-words verdict about it.

Ratios are interpolated linearly in log C between the two tested levels that bracket the crossing: load
levels are spaced geometrically, and throughput curves are close to straight on that axis. The crossing's
interval comes from the same interpolation applied to the ratio's lower and upper 95% bounds; a bound that
never crosses 1 inside the tested range leaves that end open (None: "beyond the tested levels").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from analysis.table import fmt_ratio


@dataclass(frozen=True)
class RatioPoint:
    """The ratio at one tested level, with its 95% bounds when known."""

    target_c: int
    ratio: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Crossover:
    """A crossing of ratio = 1 between two tested levels."""

    c: float  # interpolated concurrency where the ratio is 1
    c_low: float | None  # lower end of its 95% band; None = below the lowest tested level
    c_high: float | None  # upper end; None = above the highest tested level
    below_c: int  # tested level just below the crossing
    above_c: int  # tested level just above it
    spec_wins_below: bool  # True when the ratio falls through 1 as C rises


@dataclass(frozen=True)
class Verdict:
    """Who wins where, in one sentence, with the crossings behind it."""

    kind: str  # "no_levels", "spec_wins_all", "baseline_wins_all", "crossover", "mixed"
    text: str
    crossovers: tuple[Crossover, ...] = ()
    unclear_levels: tuple[int, ...] = ()  # levels whose interval contains 1.0


def crossing_log_c(c1: float, r1: float, c2: float, r2: float) -> float:
    """C where the line through (log c1, r1) and (log c2, r2) reaches ratio 1."""
    x1, x2 = math.log(c1), math.log(c2)
    return math.exp(x1 + (1.0 - r1) * (x2 - x1) / (r2 - r1))


def _crossings(cs: Sequence[int], rs: Sequence[float]) -> list[tuple[int, float, bool]]:
    """(bracket index, crossing C, falls through 1) for every sign change of ratio - 1."""
    found = []
    for i in range(len(cs) - 1):
        if (rs[i] >= 1.0) != (rs[i + 1] >= 1.0):
            found.append((i, crossing_log_c(cs[i], rs[i], cs[i + 1], rs[i + 1]), rs[i] >= 1.0))
    return found


def _nearest(crossings: list[tuple[int, float, bool]], c: float, falling: bool) -> float | None:
    same = [x for _, x, f in crossings if f == falling]
    return min(same, key=lambda x: abs(math.log(x) - math.log(c))) if same else None


def find_crossovers(points: Sequence[RatioPoint]) -> list[Crossover]:
    """Every crossing of 1 by the ratio curve, each with a band from the bound curves."""
    pts = sorted(points, key=lambda p: p.target_c)
    cs = [p.target_c for p in pts]
    mid = [p.ratio for p in pts]
    lows = _crossings(cs, [p.low if p.low is not None else p.ratio for p in pts])
    highs = _crossings(cs, [p.high if p.high is not None else p.ratio for p in pts])
    result = []
    for i, c, falling in _crossings(cs, mid):
        # Falling ratio: the lower bound reaches 1 first, the upper bound last; rising: the other way round.
        first, last = (lows, highs) if falling else (highs, lows)
        c_low, c_high = _nearest(first, c, falling), _nearest(last, c, falling)
        c_low = min(c_low, c) if c_low is not None else None  # a non-monotone bound curve cannot
        c_high = max(c_high, c) if c_high is not None else None  # put the band beside the crossing
        result.append(Crossover(c, c_low, c_high, cs[i], cs[i + 1], falling))
    return result


def judge(points: Sequence[RatioPoint]) -> Verdict:
    """The verdict over all tested levels, naming the extreme levels truthfully."""
    pts = sorted(points, key=lambda p: p.target_c)
    if not pts:
        return Verdict("no_levels", "no level was measured in both runs; nothing to compare")
    unclear = tuple(p.target_c for p in pts if p.low is not None and p.high is not None and p.low <= 1 <= p.high)
    note = _unclear_note(unclear)
    crossovers = tuple(find_crossovers(pts))
    if not crossovers:
        spec_wins = pts[0].ratio >= 1.0
        winner = "speculation wins" if spec_wins else "baseline wins"
        span = "the only tested level" if len(pts) == 1 else "every tested level"
        text = f"{winner} at {span}; {_extremes(pts)}{note}"
        return Verdict("spec_wins_all" if spec_wins else "baseline_wins_all", text, (), unclear)
    if len(crossovers) > 1:
        at = ", ".join(f"C≈{x.c:.3g}" for x in crossovers)
        text = (f"mixed: the ratio crosses 1.0 {len(crossovers)} times ({at}); the runs are noisy or the curve "
                f"is not monotone, so no single switch point is supported{note}")
        return Verdict("mixed", text, crossovers, unclear)
    x = crossovers[0]
    side, other = ("below", "above") if x.spec_wins_below else ("above", "below")
    text = (f"speculation wins {side} C≈{x.c:.3g} ({band_text(x)}) and baseline wins {other}; ratio "
            f"{fmt_ratio(pts[0].ratio)} at C={pts[0].target_c}, {fmt_ratio(pts[-1].ratio)} at "
            f"C={pts[-1].target_c}{note}")
    return Verdict("crossover", text, crossovers, unclear)


def band_text(x: Crossover) -> str:
    """The crossing's 95% band in words, open ends named as such."""
    low = f"C≈{x.c_low:.3g}" if x.c_low is not None else "below the tested levels"
    high = f"C≈{x.c_high:.3g}" if x.c_high is not None else "above the tested levels"
    return f"95% band {low} to {high}"


def _extremes(pts: Sequence[RatioPoint]) -> str:
    """'ratio 0.84x at C=1 falling to 0.42x at C=30' with the highest level added when it is not named."""
    hi = max(pts, key=lambda p: p.ratio)
    lo = min(pts, key=lambda p: p.ratio)
    if len(pts) == 1:
        return f"ratio {fmt_ratio(pts[0].ratio)} at C={pts[0].target_c}"
    if fmt_ratio(hi.ratio) == fmt_ratio(lo.ratio):
        return f"ratio {fmt_ratio(pts[0].ratio)} at every level"
    first, second = (hi, lo) if hi.target_c < lo.target_c else (lo, hi)
    trend = "falling" if first is hi else "rising"
    text = (f"ratio {fmt_ratio(first.ratio)} at C={first.target_c} {trend} to {fmt_ratio(second.ratio)} "
            f"at C={second.target_c}")
    named = {first.target_c, second.target_c}
    if pts[0].target_c not in named:
        text = f"ratio {fmt_ratio(pts[0].ratio)} at C={pts[0].target_c}; " + text[len("ratio "):]
    if pts[-1].target_c not in named:
        text += f" ({fmt_ratio(pts[-1].ratio)} at C={pts[-1].target_c}, the highest level)"
    return text


def _unclear_note(levels: tuple[int, ...]) -> str:
    if not levels:
        return ""
    at = ", ".join(f"C={c}" for c in levels)
    return f"; no significant difference at {at} (95% interval contains 1.0)"
