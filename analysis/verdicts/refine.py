"""Pinning a crossover: which extra levels to measure, when its interval is tight enough, how to state it.

A ladder's levels can be far apart (10 -> 30 -> 70), and a crossover interpolated between two of them carries
an interval as wide as the bracket allows. Measuring more levels inside the bracket narrows it: the next level
is the bracket's geometric midpoint (bisection on log C, the axis the interpolation works on), repeated until
the 95% interval is within ``TOLERANCE`` of the crossover's value or the caller's level/time budget is spent.
Pure functions: the load side (``specbench.refine``) runs what these ask for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from specbench.analysis.verdicts.crossover import FIT_SPAN
from specbench.analysis.verdicts.slo_compare import Capacity

TOLERANCE = 0.15  # the interval must lie within +-15% of the crossover's value
DEFAULT_REFINE_LEVELS = 3  # extra levels per crossing at most
#: The bracketing levels may be at most this factor apart: the interval comes from a straight line in log C
#: between them, which says nothing about the curve's bend over a wider span (10 -> 30 -> 70 ladders).
MAX_BRACKET = 2.0


class Crossing(Protocol):
    """What a crossover and a policy switch point share (read-only: both are frozen dataclasses)."""

    @property
    def c(self) -> float: ...
    @property
    def c_low(self) -> float | None: ...
    @property
    def c_high(self) -> float | None: ...
    @property
    def below_c(self) -> int: ...
    @property
    def above_c(self) -> int: ...
    @property
    def fitted(self) -> int: ...


def is_tight(x: Crossing, tolerance: float = TOLERANCE) -> bool:
    """Both ends of the 95% interval known and within ``tolerance`` of the crossing's value, from levels at
    most ``MAX_BRACKET`` apart (or with no whole level left between them)."""
    if x.c_low is None or x.c_high is None or x.c <= 0:
        return False
    if x.above_c > MAX_BRACKET * x.below_c and x.above_c - x.below_c >= 2:
        return False
    return within(x.c, x.c_low, x.c_high, tolerance)


def within(value: float, low: float, high: float, tolerance: float) -> bool:
    """Both ends of an interval within ``tolerance`` of its (positive) value."""
    return (value - low) / value <= tolerance + 1e-9 and (high - value) / value <= tolerance + 1e-9


def next_level(x: Crossing, tested: Iterable[int]) -> int | None:
    """The bracket's geometric midpoint as a whole concurrency; when no untested level lies inside the bracket
    (low C: 6 and 7 are neighbours), the untested level nearest the crossing within ``FIT_SPAN`` of it, one
    more point for its local fit (``crossover.local_fit``); None when neither exists."""
    lo, hi = x.below_c, x.above_c
    taken = set(tested)
    if hi - lo >= 2:
        mid = math.sqrt(lo * hi)
        # Nearest whole levels to the log-midpoint, closest first; ties go to the lower one.
        candidates = sorted(range(lo + 1, hi), key=lambda c: (abs(math.log(c) - math.log(mid)), c))
        inside = next((c for c in candidates if c not in taken), None)
        if inside is not None:
            return inside
    beside = [c for c in range(max(1, math.ceil(x.c / FIT_SPAN)), math.floor(x.c * FIT_SPAN) + 1)
              if c not in taken]
    return min(beside, key=lambda c: (abs(math.log(c / x.c)), c), default=None)


@dataclass(frozen=True)
class RefinePlan:
    """The levels one refinement round adds, and why the others need none."""

    levels: tuple[float, ...]  # concurrencies (whole) or, in rate mode, request rates
    done: tuple[str, ...]  # one line per crossing that needs no more levels, with the reason


@dataclass(frozen=True)
class Target:
    """One figure to pin (a crossing, or a server's capacity under the SLO), as the planner sees it."""

    name: str  # how the stop reasons name it: "C≈14.6", "spec"
    pinned: str | None  # why it needs no more levels (its interval is tight), or None
    used: int  # levels already added for it
    propose: Callable[[set[float]], float | None]  # its next level given the tested ones; None: no room
    no_room: str  # the reason when ``propose`` finds none


def _plan(targets: Iterable[Target], tested: Iterable[float], max_added: int, unit: str) -> RefinePlan:
    """One new level per target that is not pinned, has room in its bracket and levels left to add."""
    taken = set(tested)
    levels: list[float] = []
    done: list[str] = []
    for t in targets:
        if t.pinned is not None:
            done.append(f"{t.name}: {t.pinned}")
        elif t.used >= max_added:
            done.append(f"{t.name}: {t.used} {unit} added, the most --refine-levels allows")
        else:
            level = t.propose(taken | set(levels))
            if level is None:
                done.append(f"{t.name}: {t.no_room}")
            else:
                levels.append(level)
    return RefinePlan(tuple(sorted(set(levels))), tuple(done))


def plan_round(crossings: Sequence[Crossing], tested: Iterable[int], added: dict[float, int] | None = None,
               *, max_added: int = DEFAULT_REFINE_LEVELS, tolerance: float = TOLERANCE) -> RefinePlan:
    """One new level per crossing that is not yet tight, has room in its bracket and levels left to add.

    ``added``: levels already added near each crossing (keyed by its C; a crossing counts the added levels
    that lie between the ladder levels around it), so ``max_added`` is per crossing.
    """
    def target(x: Crossing) -> Target:
        return Target(f"C≈{x.c:.3g}", f"interval within ±{tolerance:.0%}" if is_tight(x, tolerance) else None,
                      (added or {}).get(x.c, 0), lambda taken: next_level(x, {int(c) for c in taken}),
                      f"no untested level between C={x.below_c} and C={x.above_c} or within {FIT_SPAN:g}x of it")

    return _plan([target(x) for x in crossings], tested, max_added, "levels")


def added_near(x: Crossing, levels: Sequence[int], refined: Iterable[int]) -> int:
    """Refined levels between the nearest ladder (non-refined) levels around the crossing."""
    extra = set(refined)
    ladder = sorted(c for c in levels if c not in extra)
    below = max((c for c in ladder if c <= x.c), default=0)
    above = min((c for c in ladder if c >= x.c), default=math.inf)
    return sum(1 for c in extra if below < c < above)


def crossing_statement(x: Crossing, added: int) -> str:
    """'C = 6.1 (5.5-6.8), from 3 added levels (fitted over 5 levels)': the value, its 95% interval and how it
    was found."""
    low = f"{x.c_low:.3g}" if x.c_low is not None else "below the tested levels"
    high = f"{x.c_high:.3g}" if x.c_high is not None else "above the tested levels"
    how = (f"from {added} added level{'s' if added != 1 else ''}" if added
           else f"interpolated between C={x.below_c} and C={x.above_c}")
    if x.fitted:
        how += f" (fitted over {x.fitted} levels)"
    return f"C = {x.c:.3g} ({low}-{high}), {how}"


def capacity_is_tight(cap: Capacity, tolerance: float = TOLERANCE) -> bool:
    """A capacity under the SLO whose 95% interval lies within ``tolerance`` of its value."""
    if cap.value is None or cap.at_least or cap.low is None or cap.high is None or cap.value <= 0:
        return False
    return within(cap.value, cap.low, cap.high, tolerance)


def next_rate(cap: Capacity, tested: Iterable[float]) -> float | None:
    """The geometric midpoint of the rates around an interpolated capacity, to 3 significant digits; None when
    there is no bracket (capacity unknown or above every tested rate) or the midpoint is already tested."""
    if cap.value is None or cap.at_least or not cap.last_held or not cap.first_missed:
        return None
    mid = float(f"{math.sqrt(cap.last_held * cap.first_missed):.3g}")
    if any(abs(mid - r) <= 0.01 * mid for r in (*tested, cap.last_held, cap.first_missed)):
        return None
    return mid


def plan_rate_round(capacities: dict[str, Capacity], tested: Iterable[float], added: dict[str, int], *,
                    max_added: int = DEFAULT_REFINE_LEVELS, tolerance: float = TOLERANCE) -> RefinePlan:
    """Rate mode: one new rate per server whose capacity under the SLO is bracketed but not yet tight.

    ``added``: rates already added inside each server's bracket, so ``max_added`` is per server."""
    def target(name: str, cap: Capacity) -> Target:
        if cap.value is None or cap.at_least or cap.last_held is None or cap.first_missed is None:
            return Target(name, "capacity not bracketed by the tested rates", 0, lambda _taken: None, "")
        pinned = (f"capacity {cap.value:.3g} req/s, interval within ±{tolerance:.0%}"
                  if capacity_is_tight(cap, tolerance) else None)
        return Target(name, pinned, added.get(name, 0), lambda taken: next_rate(cap, taken),
                      f"no untested rate between {cap.last_held:g} and {cap.first_missed:g} req/s")

    return _plan([target(name, cap) for name, cap in capacities.items()], tested, max_added, "rates")


def added_in_bracket(cap: Capacity, tested: Iterable[float], refined: Iterable[float]) -> int:
    """Refined rates between the ladder's own (non-refined) rates around the capacity: an added rate that became
    an end of the bracket still counts against ``--refine-levels``."""
    if cap.value is None or cap.at_least or cap.last_held is None or cap.first_missed is None:
        return 0
    extra = set(refined)
    ladder = [r for r in tested if r not in extra]
    below = max((r for r in ladder if r <= cap.last_held), default=0.0)
    above = min((r for r in ladder if r >= cap.first_missed), default=math.inf)
    return sum(1 for r in extra if below < r < above)
