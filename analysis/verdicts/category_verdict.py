"""Per category and level: where speculation pays, with intervals that hold for the whole table.

How many drafts a server accepts depends on the text, so "does speculation pay" is an answer about a workload.
A mixed run cannot give each category its own throughput share (in a closed loop every request picks its
category by the same odds, so each category's share of completions moves with the whole run's rate), but it does
give each category's own token rate while it runs beside the others: a category's figure is

    achieved concurrency x (its requests' output tokens / their summed lifetimes)

in each run's measured window (the requests the per-request statistics use: ok, started and finished inside).
By Little's law that is the throughput the server would give at this concurrency if every running request went
as this category's requests go in this mix; the spec/baseline ratio of it is the category's throughput ratio,
from the same windows as the level's ratio (no extra run). Where a server queues (it is at its cap), the shared
wait is part of every category's lifetime, so categories move toward the level's own ratio: that is what this
mix gets there.

Interval: each window is cut into time batches of at least one median request (as the level's fallback
interval is) and each request goes to the batch it started in; the ratio of sums is linearised per batch (each
batch's tokens minus the estimate times its lifetimes), with neighbouring batches' covariance added where it is
positive (they share the server's pace), giving the log ratio's variance a side, and Welch's t on the log
ratio. Simulated with a server pace drifting 6% over about 3 s, the table covered the truth in 295 of 300
tables; a drift correlated over longer than the batches (9 s) lowers that (271 of 300): run longer steps there.
The table makes many claims at once, so each interval is at 1 - 0.05/m for the m cells with enough requests for one
(Bonferroni): the whole table holds at 95%, and so does the sentence built from it. A cell with fewer than
``MIN_REQUESTS`` requests or ``MIN_BATCHES`` non-empty batches a side gets no interval and says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.records.request_metrics import acceptance_length
from specbench.analysis.stats.bootstrap import MIN_BATCHES, batch_count
from specbench.contract.schema import RequestRecord
from specbench.contract.student_t import t_quantile

MIN_REQUESTS = 10
MAX_LISTED_GAPS = 4  # categories whose missing cells the sentence lists one by one; more: counted
FAMILY_CONFIDENCE = 0.95
UNCATEGORISED = "uncategorised"


@dataclass(frozen=True)
class SideWindow:
    """One run's measured requests at a level, with its window and the concurrency it achieved there."""

    records: Sequence[RequestRecord]
    t0: float
    t1: float
    achieved_c: float | None


@dataclass(frozen=True)
class LevelSides:
    target_c: int
    baseline: SideWindow
    spec: SideWindow


@dataclass(frozen=True)
class CategoryCell:
    """One category at one level. ``ratio`` is spec / baseline; the interval is the table's (Bonferroni)."""

    target_c: int
    category: str
    baseline_requests: int
    spec_requests: int
    ratio: float | None
    low: float | None
    high: float | None
    tokens_per_pass: float | None  # spec run: output tokens / verify passes of this category's requests
    note: str | None = None  # why there is no interval

    @property
    def winner(self) -> str | None:
        """'spec' or 'baseline' when the interval excludes 1, 'unclear' when it holds 1, None without one."""
        if self.low is None or self.high is None:
            return None
        return "spec" if self.low > 1 else "baseline" if self.high < 1 else "unclear"


@dataclass(frozen=True)
class CategoryOutcome:
    """What one category's row says along the ladder.

    ``kind``: "crosses" (pays at every level up to ``last_pays``, loses at every level from ``first_loses``, as
    far as the intervals tell), "never" (loses at every level with an interval), "loses_some" (loses at some, is
    undecided at the others, pays at none), "always" and "pays_some" alike for paying, "mixed" (pays and loses,
    not in that order), "unclear" (neither anywhere)."""

    category: str
    kind: str
    pays: tuple[int, ...]  # levels where the interval is above 1
    loses: tuple[int, ...]  # levels where it is below 1
    missing: tuple[int, ...]  # levels without an interval
    levels: int = 0  # cells in the row
    undecided: tuple[int, ...] = ()  # levels whose interval holds 1

    @property
    def last_pays(self) -> int | None:
        return max(self.pays, default=None)

    @property
    def first_loses(self) -> int | None:
        return min(self.loses, default=None)


@dataclass(frozen=True)
class CategoryVerdict:
    cells: tuple[CategoryCell, ...]  # by level, then category
    outcomes: tuple[CategoryOutcome, ...]
    sentence: str | None  # None with fewer than two categories
    confidence: float  # each interval's own level (the table holds at FAMILY_CONFIDENCE)
    family_cells: int = 0  # the cells with an interval: the Bonferroni divisor


def category_verdict(levels: Sequence[LevelSides]) -> CategoryVerdict:
    """Every category's ratio with its interval at every level both runs measured, and the sentence."""
    raw: list[tuple[int, str, _Side | None, _Side | None, SideWindow, SideWindow]] = []
    for level in sorted(levels, key=lambda lv: lv.target_c):
        names = sorted({_category(r) for r in [*level.baseline.records, *level.spec.records]})
        for name in names:
            raw.append((level.target_c, name, _side(level.baseline, name), _side(level.spec, name),
                        level.baseline, level.spec))
    measurable = sum(1 for _, _, b, s, bw, sw in raw if _eligible(b, s, bw, sw))  # the cells that get an interval
    confidence = 1 - (1 - FAMILY_CONFIDENCE) / max(1, measurable)
    cells = tuple(_cell(c, name, b, s, bw, sw, confidence) for c, name, b, s, bw, sw in raw)
    names = sorted({cell.category for cell in cells})
    outcomes = tuple(outcome_of(name, [cell for cell in cells if cell.category == name]) for name in names)
    sentence = category_sentence(outcomes) if len(names) >= 2 else None
    return CategoryVerdict(cells, outcomes, sentence, confidence, measurable)


def _category(rec: RequestRecord) -> str:
    return rec.get("category") or UNCATEGORISED


@dataclass(frozen=True)
class _Side:
    """A category's batches in one window: tokens and lifetimes per batch, and its request count."""

    tokens: np.ndarray
    lifetimes: np.ndarray
    requests: int
    filled: int  # batches holding at least one request


def _side(window: SideWindow, name: str) -> _Side | None:
    mine = [r for r in window.records if _category(r) == name and r.get("e2e_s")]
    if not mine or window.t1 <= window.t0:
        return None
    lives = sorted(float(r["e2e_s"]) for r in window.records if r.get("e2e_s"))
    n = max(1, batch_count(window.t1 - window.t0, lives[len(lives) // 2] if lives else None))
    tokens, lifetimes = np.zeros(n), np.zeros(n)
    width = (window.t1 - window.t0) / n
    for rec in mine:
        index = min(n - 1, max(0, int((float(rec["start_s"]) - window.t0) / width)))
        tokens[index] += float(rec["output_tokens"])
        lifetimes[index] += float(rec["e2e_s"])
    return _Side(tokens, lifetimes, len(mine), int(np.count_nonzero(lifetimes)))


def _short(side: _Side) -> bool:
    """Too few of the category in one window for an interval."""
    return side.requests < MIN_REQUESTS or side.filled < MIN_BATCHES


def _eligible(base: _Side | None, spec: _Side | None, base_window: SideWindow, spec_window: SideWindow) -> bool:
    """Enough of the category on both sides for an interval (the cells the table's confidence is shared by)."""
    return (base is not None and spec is not None and bool(base_window.achieved_c) and bool(spec_window.achieved_c)
            and not any(_short(side) or side.tokens.sum() <= 0 or side.lifetimes.sum() <= 0 for side in (base, spec)))


def _log_rate_and_variance(side: _Side, achieved_c: float) -> tuple[float, float] | None:
    """log(achieved_c x tokens / lifetimes) and its variance by linearising the ratio of sums per batch."""
    total_tokens, total_life = float(side.tokens.sum()), float(side.lifetimes.sum())
    if total_tokens <= 0 or total_life <= 0:
        return None
    rate = total_tokens / total_life
    n = len(side.tokens)
    residuals = side.tokens - rate * side.lifetimes
    # Neighbouring batches share the server's pace (a request started in one runs on into the next, and a slow
    # drift spans both): their covariance is added, never subtracted (lag one, full weight).
    spread = float((residuals**2).sum())
    spread = max(spread, spread + 2 * float(residuals[:-1] @ residuals[1:]))
    variance = n / (n - 1) * spread / total_tokens**2 if n > 1 else math.inf
    return math.log(achieved_c * rate), variance


def _cell(c: int, name: str, base: _Side | None, spec: _Side | None, base_window: SideWindow,
          spec_window: SideWindow, confidence: float) -> CategoryCell:
    counts = (base.requests if base else 0, spec.requests if spec else 0)
    passes = acceptance_length([r for r in spec_window.records if _category(r) == name])
    if base is None or spec is None or not base_window.achieved_c or not spec_window.achieved_c:
        return CategoryCell(c, name, *counts, None, None, None, passes, "not measured in both runs")
    found_b = _log_rate_and_variance(base, base_window.achieved_c)
    found_s = _log_rate_and_variance(spec, spec_window.achieved_c)
    if found_b is None or found_s is None:
        return CategoryCell(c, name, *counts, None, None, None, passes, "no tokens in a window")
    (log_b, var_b), (log_s, var_s) = found_b, found_s
    ratio = math.exp(log_s - log_b)
    short = [f"{role} {side.requests} requests in {side.filled} batches" for role, side in
             (("baseline", base), ("spec", spec)) if _short(side)]
    if short:
        return CategoryCell(c, name, *counts, ratio, None, None, passes,
                            f"too few requests for an interval ({', '.join(short)}; need {MIN_REQUESTS} in "
                            f"{MIN_BATCHES} batches a side)")
    spread = math.sqrt(var_b + var_s)
    df = _welch_df(var_b, base.filled, var_s, spec.filled)
    half = t_quantile(1 - (1 - confidence) / 2, df) * spread
    return CategoryCell(c, name, *counts, ratio, math.exp(log_s - log_b - half), math.exp(log_s - log_b + half),
                        passes)


def _welch_df(var_b: float, n_b: int, var_s: float, n_s: int) -> float:
    """Welch-Satterthwaite degrees of freedom, each side's counted in its non-empty batches."""
    den = (var_b**2 / max(1, n_b - 1)) + (var_s**2 / max(1, n_s - 1))
    return (var_b + var_s) ** 2 / den if den > 0 else float(max(1, min(n_b, n_s) - 1))


def outcome_of(name: str, cells: Sequence[CategoryCell]) -> CategoryOutcome:
    """The category's row read along the ladder (cells of one category, any order)."""
    ordered = sorted(cells, key=lambda cell: cell.target_c)
    pays = [cell.target_c for cell in ordered if cell.winner == "spec"]
    loses = [cell.target_c for cell in ordered if cell.winner == "baseline"]
    missing = tuple(cell.target_c for cell in ordered if cell.winner is None)
    if pays and loses:
        kind = "crosses" if max(pays) < min(loses) else "mixed"
    elif loses:
        kind = "never" if len(loses) + len(missing) == len(ordered) else "loses_some"
    elif pays:
        kind = "always" if len(pays) + len(missing) == len(ordered) else "pays_some"
    else:
        kind = "unclear"
    undecided = tuple(cell.target_c for cell in ordered if cell.winner == "unclear")
    return CategoryOutcome(name, kind, tuple(pays), tuple(loses), missing, len(ordered), undecided)


def category_sentence(outcomes: Sequence[CategoryOutcome]) -> str:
    """One sentence: where speculation pays per category, then where it never does, then the rest."""
    parts: list[str] = []
    crossing = [o for o in outcomes if o.kind == "crosses"]
    if crossing:
        parts.append("speculation pays for " + _join([f"{o.category} up to C={o.last_pays} (it loses from "
                                                      f"C={o.first_loses})" for o in crossing]))
    parts += _named(outcomes, "always", "pays for {} at every level with an interval")
    parts += _named(outcomes, "never", "never for {}")
    parts += [_some(o) for o in outcomes if o.kind in ("pays_some", "loses_some")]
    parts += _named(outcomes, "mixed", "wins and losses out of order for {} (see the table)")
    parts += _named(outcomes, "unclear", "no level decided for {}")
    gaps = [f"{o.category} at C={_levels(o.missing)}" for o in outcomes if o.missing]
    text = "; ".join(parts) or "no category decided at any level"
    missing = sum(len(o.missing) for o in outcomes)
    if len(gaps) > MAX_LISTED_GAPS:  # a set of many categories in short steps: the count, and what to do
        text += (f"; no interval for {missing} of {sum(o.levels for o in outcomes)} cells (too few requests: "
                 f"each needs {MIN_REQUESTS} a side in {MIN_BATCHES} batches; raise --min-requests or "
                 "--min-step-time)")
    elif gaps:
        text += f"; no interval for {_join(gaps)} (too few requests)"
    return text[0].upper() + text[1:] + "."


def _some(outcome: CategoryOutcome) -> str:
    """Where a category was shown to pay (or lose), and where its interval held 1: only what was shown, so
    never "never" for a row with undecided levels."""
    verb, won = ("pays", outcome.pays) if outcome.kind == "pays_some" else ("loses", outcome.loses)
    text = f"{verb} for {outcome.category} at C={_levels(won)}"
    return text + (f" (undecided at C={_levels(outcome.undecided)})" if outcome.undecided else "")


def _levels(levels: Sequence[int]) -> str:
    return ", ".join(str(c) for c in levels)


def _named(outcomes: Sequence[CategoryOutcome], kind: str, phrase: str) -> list[str]:
    """The phrase naming every category of this kind, or nothing when there is none."""
    names = [o.category for o in outcomes if o.kind == kind]
    return [phrase.format(_join(names))] if names else []


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
