"""Two servers under one SLO: goodput per level, each server's capacity under the SLO, and what to do.

A server's capacity under the SLO is the highest load (request rate in open loop, concurrency in closed loop)
at which its SLO attainment stays at or above ``contract.slo.CAPACITY_ATTAINMENT`` (90%) at that level and
every lower tested one. Between the last level that holds and the first that does not, it is interpolated
linearly in attainment; a server that holds at every tested level has a capacity of "at least" the highest.
Its 95% interval repeats the whole rule with every level's attainment at the low, then the high end of its
Wilson interval (a share of the window's requests): the sampling error of the attainment, not the curve's
shape between levels, which only added levels narrow (#27). An end is not kept between the two bracketing
levels: when the level that held has a lower bound under the threshold, the capacity may lie below it, and
when the level that missed has an upper bound at or over it, above it. An end beyond every tested level is
unknown (None): "below the tested levels", "above the tested levels".

Which server carries more is claimed only where a tested level shows it beyond sampling error: one at which the
larger capacity's server holds (there and below) and the other misses, and where a one-sided Fisher exact test
finds the first's share of requests meeting the SLO larger than the second's at p < 0.025 (a two-sided 5%),
Bonferroni-corrected over all such levels. Capacities ordered only by interpolation inside one shared bracket,
or by a difference that few requests cannot tell from chance, get no recommendation but what would tell them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.analysis.records.summary import RunSummary, StepRow
from specbench.analysis.stats.proportion import fisher_greater, wilson
from specbench.contract.slo import CAPACITY_ATTAINMENT, Slo

SEPARATION_P = 0.025  # one-sided: a claim in the wrong direction at most 2.5% of the time (two-sided 5%)


@dataclass(frozen=True)
class SloLevel:
    """Both runs at one tested level; ratios are spec / baseline."""

    level: float  # request rate (req/s) in open loop, concurrency in closed loop
    baseline: StepRow
    spec: StepRow

    @property
    def goodput_ratio(self) -> float | None:
        b, s = self.baseline.goodput_req_s, self.spec.goodput_req_s
        return s / b if b and s is not None else None

    @property
    def goodput_tok_ratio(self) -> float | None:
        b, s = self.baseline.goodput_tok_s, self.spec.goodput_tok_s
        return s / b if b and s is not None else None


@dataclass(frozen=True)
class Capacity:
    """The highest load a server carries within the SLO."""

    value: float | None  # None: the SLO is missed already at the lowest tested level
    at_least: bool  # held at every tested level: the capacity is this or more
    last_held: float | None  # highest tested level that held (and all below it)
    first_missed: float | None  # lowest tested level that did not
    low: float | None = None  # 95% interval of an interpolated value; None: beyond the tested levels
    high: float | None = None

    def text(self, unit: str) -> str:
        if self.value is None:
            return f"none (misses the SLO at the lowest tested level, {self.first_missed:g} {unit})"
        if self.at_least:
            return f"at least {self.value:.3g} {unit} (holds at every tested level)"
        if self.low is not None and self.high is not None:
            interval = f" (95% {self.low:.3g}-{self.high:.3g})"
        else:
            low = f"{self.low:.3g}" if self.low is not None else "below the tested levels"
            high = f"{self.high:.3g}" if self.high is not None else "above the tested levels"
            interval = f" (95% {low} to {high})"
        return (f"{self.value:.3g} {unit}{interval} (holds at {self.last_held:g}, misses at "
                f"{self.first_missed:g})")


@dataclass(frozen=True)
class SloComparison:
    """Everything the SLO part of a comparison reports."""

    slo: Slo
    threshold: float
    open_loop: bool
    levels: tuple[SloLevel, ...]
    baseline_capacity: Capacity
    spec_capacity: Capacity
    verdict: str  # who carries more traffic within the SLO
    recommendation: str

    @property
    def unit(self) -> str:
        return "req/s" if self.open_loop else "concurrent requests"


def capacity(rows: Sequence[StepRow], threshold: float = CAPACITY_ATTAINMENT) -> Capacity:
    """The capacity under the SLO from one run's rows (levels with a window and an attainment figure)."""
    measured = sorted((r for r in rows if r.slo_attainment is not None), key=lambda r: r.level)
    levels = [r.level for r in measured]
    point = _first_crossing(levels, [r.slo_attainment or 0.0 for r in measured], threshold)
    if point is None:
        return Capacity(None, False, None, None) if not measured else Capacity(levels[-1], True, levels[-1], None)
    value, missed = point
    if missed == 0:
        return Capacity(None, False, None, levels[0])
    bounds = [_attainment_bounds(r) for r in measured]
    low_end = _first_crossing(levels, [b[0] for b in bounds], threshold)  # found: each bound <= its point
    high_end = _first_crossing(levels, [b[1] for b in bounds], threshold)
    low = low_end[0] if low_end is not None and low_end[1] > 0 else None  # at index 0: below the tested levels
    high = high_end[0] if high_end is not None else None  # no upper bound under it: above the tested levels
    return Capacity(value, False, levels[missed - 1], levels[missed], low, high)


def _first_crossing(levels: Sequence[float], attainment: Sequence[float],
                    threshold: float) -> tuple[float, int] | None:
    """Where attainment first falls under ``threshold``, on the straight line from the level before (the level
    itself when it is the first), and that level's index; None when it never does."""
    for i, a1 in enumerate(attainment):
        if a1 < threshold:
            if i == 0:
                return levels[0], 0
            l0, a0, l1 = levels[i - 1], attainment[i - 1], levels[i]
            return l0 + (a0 - threshold) / (a0 - a1) * (l1 - l0), i
    return None


def _attainment_bounds(row: StepRow) -> tuple[float, float]:
    """The 95% Wilson interval of a level's attainment, from its count of requests."""
    assert row.slo_attainment is not None
    met = _met(row)
    return wilson(*met) if met else (row.slo_attainment, row.slo_attainment)


def _met(row: StepRow) -> tuple[int, int] | None:
    """(requests that met the SLO, requests) in a level's window; None for a figure recorded without its count."""
    if not row.slo_requests or row.slo_attainment is None:
        return None
    return round(row.slo_attainment * row.slo_requests), row.slo_requests


def _paired(base: RunSummary, spec: RunSummary) -> list[SloLevel]:
    def by_level(summary: RunSummary) -> dict[float, StepRow]:
        return {r.level: r for r in summary.rows if r.window_s and r.slo_attainment is not None}

    b, s = by_level(base), by_level(spec)
    return [SloLevel(level, b[level], s[level]) for level in sorted(set(b) & set(s))]


def _more(a: Capacity, b: Capacity) -> bool | None:
    """Whether capacity ``a`` is larger than ``b`` by its value; None when the tested levels cannot tell."""
    if a.value is None or b.value is None:
        return None if a.value is None and b.value is None else a.value is not None
    if a.at_least and b.at_least:
        return None
    if a.at_least:
        return True if a.value >= b.value else None
    if b.at_least:
        return False if b.value >= a.value else None
    return a.value > b.value if a.value != b.value else None


@dataclass(frozen=True)
class Separation:
    """The tested level that best shows one capacity larger than the other."""

    level: SloLevel  # the larger capacity's server holds there (and below), the other misses there
    p_value: float  # one-sided Fisher, the first's attainment > the second's, times ``tried``
    tried: int  # levels where the one holds and the other misses (Bonferroni)


def _separation(levels: Sequence[SloLevel], spec_wins: bool, winner: Capacity, loser: Capacity,
                threshold: float) -> Separation | None:
    """The level with the smallest p-value among those where ``winner`` holds and ``loser`` misses; None when
    there is none (both capacities lie between the same two tested levels)."""
    found: list[tuple[float, SloLevel]] = []
    for lv in levels:
        win, lose = (lv.spec, lv.baseline) if spec_wins else (lv.baseline, lv.spec)
        holds = winner.last_held is not None and lv.level <= winner.last_held
        misses = (loser.first_missed is not None and lv.level >= loser.first_missed
                  and (lose.slo_attainment or 0.0) < threshold)
        if holds and misses:
            found.append((_greater_p(win, lose), lv))
    if not found:
        return None
    p_value, best = min(found, key=lambda pair: pair[0])
    return Separation(best, min(1.0, p_value * len(found)), len(found))


def _greater_p(higher: StepRow, lower: StepRow) -> float:
    """One-sided p-value that ``higher`` meets the SLO more often than ``lower``; a figure without its count is
    taken as exact (0 or 1)."""
    h, low = _met(higher), _met(lower)
    if h is None or low is None:
        return 0.0 if (higher.slo_attainment or 0.0) > (lower.slo_attainment or 0.0) else 1.0
    return fisher_greater(*h, *low)


def _counts(row: StepRow) -> str:
    """A level's requests meeting the SLO as a recommendation quotes them."""
    met = _met(row)
    assert met is not None  # quoted only for a p-value over the bar: a hold against a miss without counts is p 0
    return f"{met[0]} of {met[1]} requests"


def compare_slo(base: RunSummary, spec: RunSummary, slo: Slo,
                threshold: float = CAPACITY_ATTAINMENT) -> SloComparison:
    """Pair both runs' levels and say, in capacity terms, when speculation helps under ``slo``."""
    open_loop = base.open_loop or spec.open_loop
    levels = _paired(base, spec)
    cap_b = capacity([lv.baseline for lv in levels], threshold)
    cap_s = capacity([lv.spec for lv in levels], threshold)
    unit = "req/s" if open_loop else "concurrent requests"
    under = f"under {slo.text()} (at least {threshold:.0%} of requests)"
    caps = (f"speculation serves {cap_s.text(unit)}, the baseline {cap_b.text(unit)}")
    more = _more(cap_s, cap_b)
    winner, loser = (cap_s, cap_b) if more else (cap_b, cap_s)
    shown = None if more is None else _separation(levels, more, winner, loser, threshold)
    verdict = f"{under}, {caps}"
    if not levels:
        verdict = "no level was measured in both runs with an SLO figure"
        advice = "no recommendation under the SLO"
    elif cap_s.value is None and cap_b.value is None:
        verdict = f"{under}, neither server meets the SLO at the lowest tested level"
        advice = "no recommendation: test lower loads or relax the SLO"
    elif more is None:
        advice = "the tested levels do not separate the two capacities; test higher loads to tell"
    elif shown is None:
        advice = (f"the tested levels do not separate the two capacities: both hold at {winner.last_held:g} and "
                  f"miss at {winner.first_missed:g} {unit}; add levels between them (--refine-levels) to tell")
    elif shown.p_value >= SEPARATION_P:
        at = shown.level
        advice = (f"the two capacities are not told apart at 95%: at {at.level:g} {unit} speculation met the "
                  f"SLO on {_counts(at.spec)}, the baseline on {_counts(at.baseline)} (one-sided Fisher "
                  f"p={shown.p_value:.2g} over {shown.tried} level{'s' if shown.tried > 1 else ''}); measure more "
                  f"requests per level "
                  f"(--min-requests) to tell")
    elif more:
        advice = "keep speculation on: it carries more traffic within the SLO"
    elif cap_s.last_held is None:
        advice = "keep speculation off: it misses the SLO at every tested level"
    else:
        advice = f"keep speculation off above {cap_s.last_held:g} {unit}"
    return SloComparison(slo, threshold, open_loop, tuple(levels), cap_b, cap_s, verdict, advice)
