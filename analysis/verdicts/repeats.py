"""A comparison measured in interleaved repeats: per level, one ratio over the repeats, drift, and the verdict.

Input: for each repeat, in the order they ran, the comparisons of each configuration with the baseline (one
``MultiComparison`` per repeat, from ``compare_many``). Per configuration and level:

- the repeats' ratios combined (``analysis.stats.repeats.combine_ratios``): the geometric mean and its exact t
  interval over the repeats, which holds the variation between repeats as well as the noise in each window,
  and which of the two dominated;
- drift: each side's throughput at that level over its repeats, in time order (``drift_check``); a side whose
  repeats disagree beyond their windows' intervals is flagged ``drift`` with its size and direction;
- whether the order could have made the difference: where the first repeat alone (measured in one order)
  named a winner that the repeats do not confirm and a side drifted, the sentence says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specbench.analysis.stats.repeats import (
    CombinedRatio,
    DriftCheck,
    Measure,
    combine_ratios,
    drift_check,
    from_interval,
    from_relative,
)
from specbench.analysis.verdicts.compare import LevelComparison
from specbench.analysis.verdicts.multi import MultiComparison

DRIFT = "drift"


@dataclass(frozen=True)
class SideDrift:
    side: str  # the configuration's name (the baseline's included)
    check: DriftCheck


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


def _side(rows: Sequence[LevelComparison | None], spec: bool) -> list[Measure]:
    found = []
    for lv in rows:
        row = None if lv is None else (lv.spec if spec else lv.baseline)
        if row is not None and row.throughput_tok_s:
            found.append(from_relative(row.throughput_tok_s, row.throughput_ci_rel))
    return found


def compare_repeats(per_repeat: Sequence[MultiComparison]) -> RepeatsComparison:
    """Combine the repeats (``per_repeat`` in the order they ran; the first names the levels and configurations)."""
    first = per_repeat[0]
    maps = [_level_maps(m) for m in per_repeat]
    levels: list[RepeatedLevel] = []
    base_checked: dict[int, DriftCheck | None] = {}
    for name, pair in zip(first.names, first.pairs, strict=True):
        for lv in pair.levels:
            c = lv.target_c
            rows = [m.get(name, {}).get(c) for m in maps]
            ratios = tuple(None if r is None else r.ratio for r in rows)
            combined = combine_ratios([from_interval(r.ratio, r.ratio_low, r.ratio_high)
                                       for r in rows if r is not None and r.ratio])
            if c not in base_checked:
                base_checked[c] = drift_check(_side(rows, spec=False))
            drifts = [SideDrift(first.baseline_name, chk) for chk in (base_checked[c],) if chk is not None]
            spec_check = drift_check(_side(rows, spec=True))
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
    seen: set[tuple[str, int]] = set()
    for lv in rc.levels:
        for d in lv.drifted:
            if (d.side, lv.target_c) in seen:
                continue
            seen.add((d.side, lv.target_c))
            lines.append(f"drift: {d.side} at C={lv.target_c} {d.check.direction} {abs(d.check.change):.0%} from its "
                         f"first repeat to its last (its repeats differ beyond their windows' intervals, "
                         f"p={d.check.p_value:.1g})")
        if lv.order_made_it:
            said = _winner_words(lv.first_winner, lv, rc)
            lines.append(f"order: at C={lv.target_c} the first repeat alone said {said}; the repeats do not, and "
                         "the drift over the run can produce that from the order of the runs alone")
    return lines


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
            "first_repeat_winner": lv.first_winner, "order_could_explain": lv.order_made_it,
            "flags": list(lv.flags),
            "drift": [{"side": d.side, "change": d.check.change, "spread": d.check.spread,
                       "p_value": d.check.p_value, "flagged": d.check.flagged} for d in lv.drifts],
        }
    return {"baseline": rc.baseline_name, "repeats": rc.repeats, "levels": [level(lv) for lv in rc.levels]}
