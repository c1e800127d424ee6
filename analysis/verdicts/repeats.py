"""A comparison measured in interleaved repeats: per level, one ratio over the repeats, drift, and the verdict.

Input: for each repeat, in the order they ran, the comparisons of each configuration with the baseline (one
``MultiComparison`` per repeat, from ``compare_many``). Per configuration and level:

- the repeats' ratios combined (``analysis.stats.repeats.combine_ratios``), balanced over the order: which side
  each repeat measured second is read from the windows' own moments, so an odd number of repeats in alternating
  order leaves no share of a drift in the ratio (#76); its t interval holds the variation between repeats as well
  as the noise in each window, and which of the two dominated;
- drift: each side's throughput at that level against the moments its repeats were measured (``drift_trend``);
  a side whose slope is beyond noise and whose fitted change is material is flagged ``drift``, with its size per
  minute and its direction;
- whether the order could have made the difference: where the first repeat alone (measured in one order)
  named a winner that the repeats do not confirm and a side drifted, the sentence says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specbench.analysis.records.steprow import StepRow
from specbench.analysis.stats.repeats import (
    CombinedRatio,
    DriftTrend,
    Measure,
    combine_ratios,
    drift_trend,
    from_interval,
    from_relative,
)
from specbench.analysis.verdicts.compare import LevelComparison
from specbench.analysis.verdicts.multi import MultiComparison

DRIFT = "drift"


@dataclass(frozen=True)
class SideDrift:
    side: str  # the configuration's name (the baseline's included)
    check: DriftTrend


@dataclass(frozen=True)
class RepeatedLevel:
    """One configuration against the baseline at one level, over the repeats."""

    name: str
    target_c: int
    ratios: tuple[float | None, ...]  # each repeat's ratio, in the order they ran (None: no ratio that repeat)
    combined: CombinedRatio | None
    drifts: tuple[SideDrift, ...]  # sides whose repeats were tested (flagged or not)
    first_winner: str | None  # what the first repeat alone said: spec, baseline, unclear (None: no ratio)

    @property
    def winner(self) -> str | None:
        """spec or baseline where the combined interval excludes 1, unclear where it holds it."""
        c = self.combined
        if c is None or c.low is None or c.high is None:
            return None
        return "spec" if c.low > 1 else "baseline" if c.high < 1 else "unclear"

    @property
    def drifted(self) -> tuple[SideDrift, ...]:
        return tuple(d for d in self.drifts if d.check.flagged)

    @property
    def flags(self) -> tuple[str, ...]:
        return (DRIFT,) if self.drifted else ()

    @property
    def order_made_it(self) -> bool:
        """The first repeat named a winner the repeats do not, while a side drifted: the order could explain it."""
        return bool(self.drifted) and self.first_winner in ("spec", "baseline") and self.winner != self.first_winner


@dataclass(frozen=True)
class RepeatsComparison:
    baseline_name: str
    repeats: int
    levels: tuple[RepeatedLevel, ...]  # per configuration, per level, in the first repeat's order


def _level_maps(multi: MultiComparison) -> dict[str, dict[int, LevelComparison]]:
    return {name: {lv.target_c: lv for lv in pair.levels} for name, pair in zip(multi.names, multi.pairs, strict=True)}


def _moment(row: StepRow | None) -> float | None:
    """The middle of a step's window (epoch seconds), when it has one."""
    if row is None or row.window_start_s is None or row.window_end_s is None:
        return None
    return (row.window_start_s + row.window_end_s) / 2


def _side(rows: Sequence[LevelComparison | None], spec: bool) -> list[tuple[float, Measure]]:
    found = []
    for lv in rows:
        row = None if lv is None else (lv.spec if spec else lv.baseline)
        at = _moment(row)
        if row is not None and row.throughput_tok_s and at is not None:
            found.append((at, from_relative(row.throughput_tok_s, row.throughput_ci_rel)))
    return found


def _spec_second(lv: LevelComparison) -> bool | None:
    """Whether the spec's window came after the baseline's in this repeat (None: a window without its moments)."""
    spec, base = _moment(lv.spec), _moment(lv.baseline)
    return None if spec is None or base is None else spec > base


def compare_repeats(per_repeat: Sequence[MultiComparison]) -> RepeatsComparison:
    """Combine the repeats (``per_repeat`` in the order they ran; the first names the levels and configurations)."""
    first = per_repeat[0]
    maps = [_level_maps(m) for m in per_repeat]
    levels: list[RepeatedLevel] = []
    base_checked: dict[int, DriftTrend | None] = {}
    for name, pair in zip(first.names, first.pairs, strict=True):
        for lv in pair.levels:
            c = lv.target_c
            rows = [m.get(name, {}).get(c) for m in maps]
            ratios = tuple(None if r is None else r.ratio for r in rows)
            measured = [r for r in rows if r is not None and r.ratio]
            combined = combine_ratios([from_interval(r.ratio or 0.0, r.ratio_low, r.ratio_high) for r in measured],
                                      [_spec_second(r) for r in measured])
            if c not in base_checked:
                base_checked[c] = drift_trend(_side(rows, spec=False))
            drifts = [SideDrift(first.baseline_name, chk) for chk in (base_checked[c],) if chk is not None]
            spec_check = drift_trend(_side(rows, spec=True))
            if spec_check is not None:
                drifts.append(SideDrift(name, spec_check))
            first_winner = lv.winner if lv.ratio is not None else None
            levels.append(RepeatedLevel(name, c, ratios, combined, tuple(drifts), first_winner))
    return RepeatsComparison(first.baseline_name, len(per_repeat), tuple(levels))


def _fmt_levels(levels: Sequence[int]) -> str:
    return ",".join(str(c) for c in levels)


def _with_interval(lv: RepeatedLevel) -> str:
    """C=4 (0.97x, 95% CI 0.74-1.28): a level with its combined ratio and interval."""
    c = lv.combined
    assert c is not None and c.low is not None and c.high is not None
    return f"C={lv.target_c} ({c.ratio:.2f}x, 95% CI {c.low:.2f}-{c.high:.2f})"


def verdict_lines(rc: RepeatsComparison) -> list[str]:
    """The answer over the repeats, one line per configuration, then a line per drift and per order effect."""
    lines: list[str] = []
    names = list(dict.fromkeys(lv.name for lv in rc.levels))
    for name in names:
        mine = [lv for lv in rc.levels if lv.name == name]
        parts = []
        for winner, words in (("spec", f"{name} wins"), ("baseline", f"{rc.baseline_name} wins"),
                              ("unclear", "no clear difference")):
            at = [_with_interval(lv) for lv in mine if lv.winner == winner]
            if at:
                parts.append(f"{words} at " + ", ".join(at))
        without = [lv.target_c for lv in mine if lv.winner is None]
        if without:
            parts.append(f"no interval at C={_fmt_levels(without)}")
        lines.append(f"Over {rc.repeats} interleaved repeats, {name} against {rc.baseline_name}: "
                     + "; ".join(parts) + ".")
    balance = balance_line(rc)
    if balance:
        lines.append(balance)
    seen: set[tuple[str, int]] = set()
    for lv in rc.levels:
        for d in lv.drifted:
            if (d.side, lv.target_c) in seen:
                continue
            seen.add((d.side, lv.target_c))
            lines.append(drift_line(d, lv.target_c))
        if lv.order_made_it:
            said = _winner_words(lv.first_winner, lv, rc)
            lines.append(f"order: at C={lv.target_c} the first repeat alone said {said}; the repeats do not, and "
                         "the drift over the run can produce that from the order of the runs alone")
    return lines


def drift_line(d: SideDrift, level: int) -> str:
    """drift: spec at C=4 fell 24%/min over its repeats (...): one flagged side at one level."""
    chk = d.check
    noise = "its windows' intervals" if chk.method == "windows" else "its repeats' scatter about the trend"
    return (f"drift: {d.side} at C={level} {chk.direction} {abs(chk.per_min):.0%}/min over its repeats "
            f"({chk.change:+.0%} from its first window to its last, {chk.span_min:.1f} min apart; the slope is beyond "
            f"{noise}, p={chk.p_value:.1g})")


def balance_line(rc: RepeatsComparison) -> str | None:
    """Where an odd number of repeats ran one order more often, how the combined ratio weighs the orders."""
    done = [lv.combined for lv in rc.levels if lv.combined is not None and lv.combined.balanced]
    uneven = [c for c in done if c.orders[0] != c.orders[1]]
    if not uneven:
        return None
    second, first = uneven[0].orders
    return (f"balanced: each combined ratio is the mean of the two orders' means (the spec measured second in "
            f"{second} repeat(s), first in {first}), so a steady drift's pull on the side measured second cancels")


def _winner_words(winner: str | None, lv: RepeatedLevel, rc: RepeatsComparison) -> str:
    ratio = lv.ratios[0]
    who = lv.name if winner == "spec" else rc.baseline_name
    return f"{who} wins ({ratio:.2f}x)" if ratio is not None else f"{who} wins"


def table_lines(rc: RepeatsComparison) -> list[str]:
    """A markdown table: per configuration and level, each repeat's ratio, the combined ratio and its interval,
    what dominated its spread, and the flags."""
    head = ["config", "C", *(f"r{i + 1}" for i in range(rc.repeats)), "combined", "95% CI (t)", "spread from",
            "flags"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lv in rc.levels:
        c = lv.combined
        ci = f"{c.low:.3f}-{c.high:.3f}" if c is not None and c.low is not None and c.high is not None else "-"
        cells = [lv.name, str(lv.target_c), *(f"{r:.3f}" if r is not None else "-" for r in lv.ratios),
                 f"{c.ratio:.3f}" if c is not None else "-", ci, (c.dominated_by if c is not None else None) or "-",
                 ", ".join(lv.flags) or "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def to_json(rc: RepeatsComparison) -> dict[str, Any]:
    def level(lv: RepeatedLevel) -> dict[str, Any]:
        c = lv.combined
        return {
            "config": lv.name, "target_c": lv.target_c, "ratios": list(lv.ratios),
            "ratio": None if c is None else c.ratio, "ratio_low": None if c is None else c.low,
            "ratio_high": None if c is None else c.high, "repeats": 0 if c is None else c.n,
            "spread_var": None if c is None else c.spread_var, "within_var": None if c is None else c.within_var,
            "dominated_by": None if c is None else c.dominated_by, "winner": lv.winner,
            "method": None if c is None else ("order-balanced" if c.balanced else "paired"),
            "second_factor": None if c is None else c.second_factor,
            "orders": None if c is None else {"spec_second": c.orders[0], "spec_first": c.orders[1]},
            "first_repeat_winner": lv.first_winner, "order_could_explain": lv.order_made_it,
            "flags": list(lv.flags),
            "drift": [{"side": d.side, "per_min": d.check.per_min, "change": d.check.change,
                       "span_min": d.check.span_min, "p_value": d.check.p_value, "method": d.check.method,
                       "flagged": d.check.flagged} for d in lv.drifts],
        }
    return {"baseline": rc.baseline_name, "repeats": rc.repeats, "levels": [level(lv) for lv in rc.levels]}
