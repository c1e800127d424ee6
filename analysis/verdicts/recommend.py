"""What to do with the verdict: keep speculation on, off, or switch it at a concurrency threshold.

For every tested level the recommendation also shows the throughput the recommended policy gives next to
always-on (the spec run) and always-off (the baseline run), so the gain of a switch is a number, not a hope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specbench.analysis.table import fmt_ratio
from specbench.analysis.verdicts.crossover import Verdict, band_text


@dataclass(frozen=True)
class LevelThroughput:
    """Both runs' window throughput at one tested level."""

    target_c: int
    spec_tok_s: float
    baseline_tok_s: float


@dataclass(frozen=True)
class SwitchLevel:
    """What the recommended policy runs at one level and the throughput that gives."""

    target_c: int
    uses: str  # "spec" or "baseline"
    switch_tok_s: float
    always_on_tok_s: float  # speculation everywhere (the spec run)
    always_off_tok_s: float  # speculation nowhere (the baseline run)

    @property
    def vs_always_on(self) -> float | None:
        return self.switch_tok_s / self.always_on_tok_s if self.always_on_tok_s > 0 else None

    @property
    def vs_always_off(self) -> float | None:
        return self.switch_tok_s / self.always_off_tok_s if self.always_off_tok_s > 0 else None


@dataclass(frozen=True)
class Recommendation:
    kind: str  # "keep_off", "keep_on", "spec_below", "spec_above", "per_level", "none"
    threshold_c: float | None  # the switch point for "spec_below"/"spec_above"
    text: str
    levels: tuple[SwitchLevel, ...] = ()


def recommend(verdict: Verdict, levels: Sequence[LevelThroughput]) -> Recommendation:
    """Turn the verdict into a policy and price it at every tested level."""
    levels = sorted(levels, key=lambda lv: lv.target_c)
    if not levels:
        return Recommendation("none", None, "no recommendation: no level was measured in both runs")
    if verdict.kind == "crossover":
        x = verdict.crossovers[0]
        below = x.spec_wins_below
        table = _price(levels, lambda c: (c < x.c) == below)
        kind = "spec_below" if below else "spec_above"
        text = (f"enable speculation only {'below' if below else 'above'} C = {x.c:.3g} ({band_text(x)}); "
                f"{_gain(table)}")
        return Recommendation(kind, x.c, text, table)
    if verdict.kind == "mixed":
        winners = {lv.target_c: lv.spec_tok_s > lv.baseline_tok_s for lv in levels}
        table = _price(levels, lambda c: winners[c])
        text = ("no single switch point: the ratio crosses 1.0 more than once; repeat both runs before "
                "choosing (the table shows the better server per level)")
        return Recommendation("per_level", None, text, table)
    on = verdict.kind == "spec_wins_all"
    table = _price(levels, lambda c: on)
    span = f"C={levels[0].target_c} to C={levels[-1].target_c}"
    if on:
        text = f"keep speculation on: it gives more throughput at every tested level ({span})"
    else:
        text = f"keep speculation off: the baseline gives more throughput at every tested level ({span})"
    if verdict.unclear_levels:
        text += "; at " + ", ".join(f"C={c}" for c in verdict.unclear_levels) + " the difference is within noise"
    return Recommendation("keep_on" if on else "keep_off", None, text, table)


def _price(levels: Sequence[LevelThroughput], use_spec: Callable[[int], bool]) -> tuple[SwitchLevel, ...]:
    return tuple(
        SwitchLevel(
            target_c=lv.target_c,
            uses="spec" if use_spec(lv.target_c) else "baseline",
            switch_tok_s=lv.spec_tok_s if use_spec(lv.target_c) else lv.baseline_tok_s,
            always_on_tok_s=lv.spec_tok_s,
            always_off_tok_s=lv.baseline_tok_s,
        )
        for lv in levels
    )


def _gain(table: Sequence[SwitchLevel]) -> str:
    """The switch's best gain over each fixed policy, with the level where it happens."""
    best_on = max(table, key=lambda s: s.vs_always_on or 0.0)
    best_off = max(table, key=lambda s: s.vs_always_off or 0.0)
    return (f"the switch gives up to {fmt_ratio(best_on.vs_always_on)} the always-on throughput "
            f"(at C={best_on.target_c}) and up to {fmt_ratio(best_off.vs_always_off)} the always-off throughput "
            f"(at C={best_off.target_c})")
