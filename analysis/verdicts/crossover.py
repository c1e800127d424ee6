"""Where the spec/baseline throughput ratio crosses 1, and the plain-words verdict about it.

Ratios are interpolated linearly in log C between the two tested levels that bracket the crossing: load
levels are spaced geometrically, and throughput curves are close to straight on that axis. The crossing's
interval comes from the same interpolation applied to the ratio's lower and upper 95% bounds; a bound that
never crosses 1 inside the tested range leaves that end open (None: "beyond the tested levels").

Where levels are dense around a crossing (three or more within a factor ``FIT_SPAN`` of it, as refinement
leaves them), a power law (log ratio straight in log C) is fitted to all of them, each weighted by its
interval, and the crossing and its interval come from that line (``local_fit``): two neighbouring levels each
known to +-4% say little about where between them the ratio passes 1, four levels together say more, and
their scatter about the line says how well they are known. The same fit merges the wiggles of noise: levels a
few percent apart in C whose ratios straddle 1 out of order (1.01, 0.99, 1.005) are one crossing of a line
that falls significantly, not three.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.table import fmt_ratio
from specbench.contract.student_t import NORMAL_975 as Z95
from specbench.contract.student_t import t975

#: Levels within this factor of a crossing feed its local fit. Throughput-ratio curves bend (convex in log C):
#: over C/2..2C the emulator's cost-model curves sit 2-3% (of log ratio) off a straight line, enough to move a
#: fitted crossing by 10% where the ratio falls slowly; over C/1.5..1.5C a third of that.
FIT_SPAN = 1.5


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
    fitted: int = 0  # levels its value and band were fitted over (``local_fit``); 0: interpolated between two


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


def find_crossovers(points: Sequence[RatioPoint], *, fit: bool = True) -> list[Crossover]:
    """Every crossing of 1 by the ratio curve, each with a band from the bound curves, or from a local fit where
    the levels around it are dense enough (crossings of noise within one fit merged into one). ``fit=False``:
    the bound curves' bands only (what the fit is measured against)."""
    pts = sorted(points, key=lambda p: p.target_c)
    cs = [p.target_c for p in pts]
    mid = [p.ratio for p in pts]
    lows = _crossings(cs, [p.low if p.low is not None else p.ratio for p in pts])
    highs = _crossings(cs, [p.high if p.high is not None else p.ratio for p in pts])
    result = []
    for group in _groups(_crossings(cs, mid)):
        line = local_fit(pts, math.exp(sum(math.log(c) for _, c, _ in group) / len(group))) if fit else None
        falling = group[0][2]
        if line is not None and len(group) % 2 == 1 and line.falling == falling:
            below = max((v for v in cs if v <= line.c), default=cs[0])  # the tested levels around the fitted C
            above = min((v for v in cs if v >= line.c), default=cs[-1])
            result.append(Crossover(line.c, line.low, line.high, below, above, falling, line.levels))
            continue
        for i, c, falling in group:
            # Falling ratio: the lower bound reaches 1 first, the upper bound last; rising: the other way round.
            first, last_bound = (lows, highs) if falling else (highs, lows)
            c_low, c_high = _nearest(first, c, falling), _nearest(last_bound, c, falling)
            c_low = min(c_low, c) if c_low is not None else None  # a non-monotone bound curve cannot
            c_high = max(c_high, c) if c_high is not None else None  # put the band beside the crossing
            result.append(Crossover(c, c_low, c_high, cs[i], cs[i + 1], falling))
    return result


def _groups(crossings: list[tuple[int, float, bool]]) -> list[list[tuple[int, float, bool]]]:
    """Consecutive crossings within a factor ``FIT_SPAN`` of their group's first: candidates for one fit."""
    groups: list[list[tuple[int, float, bool]]] = []
    for x in crossings:
        if groups and x[1] <= FIT_SPAN * groups[-1][0][1]:
            groups[-1].append(x)
        else:
            groups.append([x])
    return groups


@dataclass(frozen=True)
class LineFit:
    """Where a weighted straight line through the ratios near a crossing reaches 1, with its 95% interval."""

    c: float
    low: float
    high: float
    falling: bool
    levels: int  # how many levels the line was fitted to


def local_fit(points: Sequence[RatioPoint], near: float) -> LineFit | None:
    """The crossing of 1 by the line log ratio = a + b log C (a power law, which bends as throughput ratios do)
    fitted to the levels within ``FIT_SPAN`` of ``near``, each weighted by its interval (standard error from its
    95% bounds, on the log scale); None unless three or more levels with bounds lie there, on both sides of 1,
    and the line's slope is significant and its interval inside them.

    The interval is the set of C where the line's own 95% interval contains 1 (Fieller's inversion, so it is
    not symmetric). Its scale: with four or more levels, the scatter of the levels about the line (Student t
    on n - 2 degrees of freedom; the stated intervals then only weight the levels against each other), since a
    level's stated interval can be far wider than its real spread (the conservative batches of a fixed-length
    workload: +-4% stated where seeded repeats agree to +-0.4%); with three, the stated intervals, scaled up
    (never down) by the scatter, as one degree of freedom says next to nothing about it.
    """
    span = math.log(FIT_SPAN) + 1e-9
    use = [p for p in points if p.low is not None and p.high is not None and p.high > p.low > 0
           and abs(math.log(p.target_c / near)) <= span]
    if len(use) < 3 or all(p.ratio >= 1 for p in use) or all(p.ratio < 1 for p in use):
        return None
    x = np.log([p.target_c for p in use])
    y = np.log([p.ratio for p in use])
    spreads = [high / low for p in use if (high := p.high) is not None and (low := p.low) is not None]  # all of use
    w = (2 * Z95 / np.log(spreads)) ** 2
    s, sx, sy, sxx, sxy = w.sum(), (w * x).sum(), (w * y).sum(), (w * x * x).sum(), (w * x * y).sum()
    det = s * sxx - sx * sx
    if det <= 0:
        return None
    b = (s * sxy - sx * sy) / det
    a = (sy - b * sx) / s
    chi2 = float((w * (y - a - b * x) ** 2).sum())
    dof = len(use) - 2
    # Three levels: the stated intervals set the scale (scaled up, never down, by the scatter). Four or more:
    # the scatter about the line does, with Student t on its degrees of freedom, so levels whose stated
    # intervals are wider than their real spread (batches of a fixed-length workload) still pin the crossing.
    k = Z95**2 * max(1.0, chi2 / dof) if dof < 2 else t975(dof) ** 2 * chi2 / dof
    var_a, var_b, cov = sxx / det, s / det, -sx / det
    # (a + b x)^2 <= k var(a + b x): a quadratic in x = log C, bounded only when the slope is significant.
    qa = b * b - k * var_b
    qb = 2 * (a * b - k * cov)
    qc = a * a - k * var_a
    if qa <= 0:  # b = 0 gives qa = -k var_b <= 0: no slope, no crossing
        return None
    root = math.sqrt(max(0.0, qb * qb - 4 * qa * qc))
    x_low, x_high = (-qb - root) / (2 * qa), (-qb + root) / (2 * qa)
    if x_low < x.min() - 1e-9 or x_high > x.max() + 1e-9:  # beyond the fitted levels: the line says nothing
        return None
    c = math.exp(-a / b)
    return LineFit(c, min(math.exp(x_low), c), max(math.exp(x_high), c), bool(b < 0), len(use))


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
