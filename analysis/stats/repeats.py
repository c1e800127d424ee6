"""Repeated measurements: one ratio over interleaved repeats, and whether a server drifted between them.

Why: a comparison measured once per side (all of the baseline, then all of the speculative server) reads any
drift over the run (a GPU warming up or throttling, a neighbour starting) as a difference between the servers,
and its interval covers only the noise inside each window. Measured in repeats taken in alternating order, the
run-to-run variation shows in how the repeats' ratios spread.

- ``combine_ratios``: the repeats form a paired design (each repeat measures both sides close in time), so the
  combined ratio is the geometric mean of the repeats' ratios and its interval the exact t interval over their
  logarithms, n - 1 degrees of freedom. Their spread holds both the noise inside each window and the variation
  between repeats; which of the two dominated is told by comparing the spread with the windows' own intervals.
- ``drift_check``: one side's throughput at one level over its repeats, in time order. Cochran's Q tests whether
  the repeats differ by more than their windows' intervals allow (chi-square, k - 1 degrees of freedom); a
  drift is reported when they do (``contract.policy.DRIFT_P``) by at least ``DRIFT_MIN_CHANGE`` between the
  lowest and the highest, with its size (last against first) and direction. Two measures (the first level at
  the start and again at the end of a ladder) are the same test with one degree of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.contract.policy import DRIFT_MIN_CHANGE, DRIFT_P
from specbench.contract.student_t import NORMAL_975, t975

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


def combine_ratios(repeats: Sequence[Measure]) -> CombinedRatio | None:
    """The repeats' ratios (spec / baseline at one level, one per repeat) as one ratio with its interval."""
    usable = [m for m in repeats if m.value > 0 and math.isfinite(m.value)]
    if not usable:
        return None
    logs = [math.log(m.value) for m in usable]
    n = len(logs)
    mean = sum(logs) / n
    ses = [m.log_se for m in usable if m.log_se is not None]
    within = sum(se * se for se in ses) / len(ses) if ses else None
    if n < 2:
        return CombinedRatio(math.exp(mean), None, None, n, None, within)
    var = sum((x - mean) ** 2 for x in logs) / (n - 1)
    half = t975(n - 1) * math.sqrt(var / n)
    return CombinedRatio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, var, within)


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
