"""Two servers under one SLO: goodput per level, each server's capacity under the SLO, and what to do.

A server's capacity under the SLO is the highest load (request rate in open loop, concurrency in closed loop)
at which its SLO attainment stays at or above ``contract.slo.CAPACITY_ATTAINMENT`` (90%) at that level and
every lower tested one. Between the last level that holds and the first that does not, it is interpolated
linearly in attainment; a server that holds at every tested level has a capacity of "at least" the highest.
Its 95% interval repeats the interpolation with both levels' attainment at the low, then the high end of
their Wilson intervals (each a share of the window's requests), kept within the two levels: the sampling
error of the attainment, not the curve's shape between the levels, which only added levels narrow (#27).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analysis.records.summary import RunSummary, StepRow
from analysis.stats.proportion import wilson
from contract.slo import CAPACITY_ATTAINMENT, Slo


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
    low: float | None = None  # 95% interval of an interpolated value (between last_held and first_missed)
    high: float | None = None

    def text(self, unit: str) -> str:
        if self.value is None:
            return f"none (misses the SLO at the lowest tested level, {self.first_missed:g} {unit})"
        if self.at_least:
            return f"at least {self.value:.3g} {unit} (holds at every tested level)"
        interval = f" (95% {self.low:.3g}-{self.high:.3g})" if self.low is not None and self.high is not None else ""
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
    held: StepRow | None = None
    for row in sorted((r for r in rows if r.slo_attainment is not None), key=lambda r: r.level):
        assert row.slo_attainment is not None
        if row.slo_attainment < threshold:
            if held is None:
                return Capacity(None, False, None, row.level)
            assert held.slo_attainment is not None
            value = _crossing(held.level, held.slo_attainment, row.level, row.slo_attainment, threshold)
            ends = [_crossing(held.level, a0, row.level, a1, threshold)
                    for a0, a1 in zip(_attainment_bounds(held), _attainment_bounds(row), strict=True)]
            return Capacity(value, False, held.level, row.level, min(ends), max(ends))
        held = row
    if held is None:
        return Capacity(None, False, None, None)
    return Capacity(held.level, True, held.level, None)


def _crossing(l0: float, a0: float, l1: float, a1: float, threshold: float) -> float:
    """Where attainment falls through ``threshold`` on the straight line from (l0, a0) to (l1, a1), kept in
    [l0, l1]: an end whose bound is already on the other side of the threshold pins that end."""
    if a0 < threshold:
        return l0
    if a1 >= threshold:
        return l1
    return l0 + (a0 - threshold) / (a0 - a1) * (l1 - l0)


def _attainment_bounds(row: StepRow) -> tuple[float, float]:
    """The 95% Wilson interval of a level's attainment, from its count of requests."""
    assert row.slo_attainment is not None
    n = row.slo_requests or 0
    if n == 0:
        return row.slo_attainment, row.slo_attainment
    return wilson(round(row.slo_attainment * n), n)


def _paired(base: RunSummary, spec: RunSummary) -> list[SloLevel]:
    def by_level(summary: RunSummary) -> dict[float, StepRow]:
        return {r.level: r for r in summary.rows if r.window_s and r.slo_attainment is not None}

    b, s = by_level(base), by_level(spec)
    return [SloLevel(level, b[level], s[level]) for level in sorted(set(b) & set(s))]


def _more(a: Capacity, b: Capacity) -> bool | None:
    """Whether capacity ``a`` is larger than ``b``; None when the tested levels cannot tell."""
    if a.value is None or b.value is None:
        return None if a.value is None and b.value is None else a.value is not None
    if a.at_least and b.at_least:
        return None
    if a.at_least:
        return True if a.value >= b.value else None
    if b.at_least:
        return False if b.value >= a.value else None
    return a.value > b.value if a.value != b.value else None


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
    if not levels:
        verdict = "no level was measured in both runs with an SLO figure"
        advice = "no recommendation under the SLO"
    elif cap_s.value is None and cap_b.value is None:
        verdict = f"{under}, neither server meets the SLO at the lowest tested level"
        advice = "no recommendation: test lower loads or relax the SLO"
    elif more is True:
        verdict = f"{under}, {caps}"
        advice = "keep speculation on: it carries more traffic within the SLO"
    elif more is False:
        verdict = f"{under}, {caps}"
        if cap_s.last_held is None:
            advice = "keep speculation off: it misses the SLO at every tested level"
        else:
            advice = f"keep speculation off above {cap_s.last_held:g} {unit}"
    else:
        verdict = f"{under}, {caps}"
        advice = "the tested levels do not separate the two capacities; test higher loads to tell"
    return SloComparison(slo, threshold, open_loop, tuple(levels), cap_b, cap_s, verdict, advice)
