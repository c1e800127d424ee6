"""Repeated measurements: one ratio over interleaved repeats, and whether a server drifted between them.

Why: a comparison measured once per side (all of the baseline, then all of the speculative server) reads any
drift over the run (a GPU warming up or throttling, a neighbour starting) as a difference between the servers,
and its interval covers only the noise inside each window. Measured in repeats taken in alternating order, the
run-to-run variation shows in how the repeats' ratios spread.

- ``combine_ratios``: the repeats form a paired design (each repeat measures both sides close in time), so the
  combined ratio is a mean of the repeats' log ratios and its interval an exact t interval over them, n - 1
  degrees of freedom. In alternating order (A B, B A, A B) a drift pulls whichever side each repeat measures
  second, one way in one order and the other way in the other; an odd number of repeats runs one order once more,
  and a plain mean keeps a third of that pull at three (#76). Given each repeat's order, the mean is balanced:
  the mean of the two order groups' means, in which any steady drift (and one whose pace changes steadily)
  cancels. Its interval takes its variance from the repeats' spread about their plain mean, which holds the
  order's pull, so a drift widens the interval instead of shifting it; the variance pooled within the order
  groups would leave n - 2 degrees of freedom, one at three repeats, and an interval three times as wide. With
  the orders equally often (an even n) both means, and the intervals, are the plain ones. The spread holds both
  the noise inside each window and the variation between repeats; which of the two dominated is told by
  comparing it with the windows' own intervals.
- ``drift_trend``: one side's throughput at one level over its repeats, each at the moment its window was measured.
  The slope of its logarithm over time (weighted by the windows' intervals; where a window has none, the residual
  spread of three or more, a t test on n - 2 degrees of freedom) says whether the side moved beyond noise
  (``contract.policy.DRIFT_P``), and the change it fits between the first window and the last whether it moved
  enough to matter (``DRIFT_MIN_CHANGE``); its size is said per minute. A slope, unlike a test of the repeats'
  agreement alone, names a trend in time, the thing that alternating orders are there to cancel.
- ``drift_check``: two or more measures of one side (the end check: the first level at the start and again at the
  end of a ladder). Cochran's Q tests whether they differ by more than their windows' intervals allow
  (chi-square, k - 1 degrees of freedom); flagged when they do by at least ``DRIFT_MIN_CHANGE``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.contract.policy import DRIFT_MIN_CHANGE, DRIFT_P
from specbench.contract.student_t import NORMAL_975, t975, t_two_sided_tail

BETWEEN = "between repeats"
WITHIN = "within windows"


@dataclass(frozen=True)
class Measure:
    """A positive figure and the standard error of its logarithm (None: measured without an interval)."""

    value: float
    log_se: float | None


def from_interval(value: float, low: float | None, high: float | None) -> Measure:
    """A figure with its 95% interval (a ratio's): the log-scale standard error is the interval's half-width."""
    if low is None or high is None or low <= 0 or high <= low:
        return Measure(value, None)
    return Measure(value, (math.log(high) - math.log(low)) / (2 * NORMAL_975))


def from_relative(value: float, rel: float | None) -> Measure:
    """A figure with its 95% half-width relative to it (a step's ``throughput_ci_rel``)."""
    if rel is None or not 0 < rel < 1:
        return Measure(value, None)
    return from_interval(value, value * (1 - rel), value * (1 + rel))


@dataclass(frozen=True)
class CombinedRatio:
    """Repeats' ratios as one: geometric mean, exact t interval (95%), and where their variance came from."""

    ratio: float
    low: float | None  # None with fewer than two repeats
    high: float | None
    n: int
    spread_var: float | None  # sample variance of the repeats' log ratios (None: one repeat)
    within_var: float | None  # mean variance of a repeat's log ratio from its own window (None: no intervals)
    balanced: bool = False  # the orders ran unequally often, and the mean weighs them equally (#76)
    second_factor: float | None = None  # what being measured second did to a ratio (< 1: it read lower)
    orders: tuple[int, int] = (0, 0)  # repeats with the spec measured second, and first (0, 0: not known)

    @property
    def between_var(self) -> float | None:
        """What the spread holds beyond the windows' own noise (0 when the windows explain it all)."""
        if self.spread_var is None or self.within_var is None:
            return None
        return max(0.0, self.spread_var - self.within_var)

    @property
    def dominated_by(self) -> str | None:
        """``BETWEEN`` when the variation between repeats is larger than the noise inside the windows."""
        between = self.between_var
        if between is None or self.within_var is None:
            return None
        return BETWEEN if between > self.within_var else WITHIN

    def holds(self, value: float) -> bool:
        return self.low is not None and self.high is not None and self.low <= value <= self.high


def combine_ratios(repeats: Sequence[Measure],
                   spec_second: Sequence[bool | None] | None = None) -> CombinedRatio | None:
    """The repeats' ratios (spec / baseline at one level, one per repeat) as one ratio with its interval.
    ``spec_second``: per repeat, whether the spec was measured after the baseline (None: not known); with both
    orders known the mean is balanced over them (the module's docstring says why)."""
    pairs = [(m, None if spec_second is None else spec_second[i]) for i, m in enumerate(repeats)
             if m.value > 0 and math.isfinite(m.value)]
    if not pairs:
        return None
    usable = [m for m, _ in pairs]
    logs = [math.log(m.value) for m in usable]
    n = len(logs)
    mean = sum(logs) / n
    ses = [m.log_se for m in usable if m.log_se is not None]
    within = sum(se * se for se in ses) / len(ses) if ses else None
    if n < 2:
        return CombinedRatio(math.exp(mean), None, None, n, None, within)
    var = sum((x - mean) ** 2 for x in logs) / (n - 1)
    second = [x for (_, later), x in zip(pairs, logs, strict=True) if later is True]
    first = [x for (_, later), x in zip(pairs, logs, strict=True) if later is False]
    orders = (len(second), len(first))
    weight = 1 / n  # the estimate's variance over one repeat's
    factor = None
    if second and first and len(second) + len(first) == n:
        m2, m1 = sum(second) / len(second), sum(first) / len(first)
        mean, factor = (m2 + m1) / 2, math.exp((m2 - m1) / 2)
        weight = (1 / len(second) + 1 / len(first)) / 4
    half = t975(n - 1) * math.sqrt(var * weight)
    return CombinedRatio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, var, within,
                         balanced=factor is not None and orders[0] != orders[1], second_factor=factor, orders=orders)


@dataclass(frozen=True)
class DriftTrend:
    """One side's figure at one level over its repeats, against the moments they were measured."""

    per_min: float  # the fitted relative change per minute (negative: it fell)
    change: float  # the fitted change from the first window to the last
    span_min: float  # minutes between the first window and the last
    p_value: float  # the slope against noise: the windows' intervals, or the residual spread (``method``)
    method: str  # "windows" or "residual"
    flagged: bool

    @property
    def direction(self) -> str:
        return "fell" if self.per_min < 0 else "rose"


def drift_trend(series: Sequence[tuple[float, Measure]], *, p_limit: float = DRIFT_P,
                min_change: float = DRIFT_MIN_CHANGE) -> DriftTrend | None:
    """The trend of one side's figure over time (``series``: (moment in seconds, measure), any order). Weighted
    by the windows' intervals where every measure has one; else, with three or more, the residual spread. None
    with too few measures to tell, or all at one moment. Flagged where the slope is beyond noise at ``p_limit``
    and the change it fits over the measures' span is at least ``min_change``."""
    pts = [(t / 60.0, math.log(m.value), m.log_se) for t, m in series if m.value > 0 and math.isfinite(m.value)
           and math.isfinite(t)]
    n = len(pts)
    if n < 2:
        return None
    span = max(t for t, _, _ in pts) - min(t for t, _, _ in pts)
    if span <= 0:
        return None
    known = all(se is not None and se > 0 for _, _, se in pts)
    if not known and n < 3:
        return None
    weights = [1.0 / se**2 if known and se else 1.0 for _, _, se in pts]
    total = sum(weights)
    t_bar = sum(w * t for w, (t, _, _) in zip(weights, pts, strict=True)) / total
    y_bar = sum(w * y for w, (_, y, _) in zip(weights, pts, strict=True)) / total
    sxx = sum(w * (t - t_bar) ** 2 for w, (t, _, _) in zip(weights, pts, strict=True))
    slope = sum(w * (t - t_bar) * (y - y_bar) for w, (t, y, _) in zip(weights, pts, strict=True)) / sxx
    if known:
        p = math.erfc(abs(slope) * math.sqrt(sxx) / math.sqrt(2.0))
    else:
        rss = sum((y - y_bar - slope * (t - t_bar)) ** 2 for t, y, _ in pts)
        se = math.sqrt(rss / (n - 2) / sxx)
        p = 0.0 if se == 0 else t_two_sided_tail(abs(slope) / se, n - 2)
    change = math.exp(slope * span) - 1.0
    return DriftTrend(math.exp(slope) - 1.0, change, span, p, "windows" if known else "residual",
                      p < p_limit and abs(change) >= min_change)


@dataclass(frozen=True)
class DriftCheck:
    """One side's figure at one level over its repeats, in time order."""

    change: float  # last against first, relative (negative: it fell)
    spread: float  # highest against lowest, relative
    p_value: float  # Cochran's Q: the repeats agree within their windows' intervals
    flagged: bool

    @property
    def direction(self) -> str:
        return "fell" if self.change < 0 else "rose"


def drift_check(series: Sequence[Measure], *, p_limit: float = DRIFT_P,
                min_change: float = DRIFT_MIN_CHANGE) -> DriftCheck | None:
    """Whether the repeats of one side differ beyond their windows' intervals (None: fewer than two with an
    interval). Flagged where Cochran's Q says so at ``p_limit`` and the repeats span at least ``min_change``."""
    usable = [m for m in series if m.value > 0 and m.log_se is not None and m.log_se > 0]
    if len(usable) < 2:
        return None
    logs = [math.log(m.value) for m in usable]
    weights = [1.0 / (m.log_se or 1.0) ** 2 for m in usable]
    pooled = sum(w * x for w, x in zip(weights, logs, strict=True)) / sum(weights)
    q = sum(w * (x - pooled) ** 2 for w, x in zip(weights, logs, strict=True))
    p = chi2_sf(q, len(usable) - 1)
    values = [m.value for m in usable]
    change = values[-1] / values[0] - 1.0
    spread = max(values) / min(values) - 1.0
    return DriftCheck(change, spread, p, p < p_limit and spread >= min_change)


def chi2_sf(x: float, df: int) -> float:
    """P(X > x) for a chi-square variable with ``df`` (a positive integer) degrees of freedom, in closed form."""
    if x <= 0:
        return 1.0
    half = x / 2.0
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for j in range(1, df // 2):
            term *= half / j
            total += term
        return min(1.0, math.exp(-half) * total)
    total = math.erfc(math.sqrt(half))
    for j in range(1, (df - 1) // 2 + 1):
        total += math.exp((j - 0.5) * math.log(half) - half - math.lgamma(j + 0.5))
    return min(1.0, total)
