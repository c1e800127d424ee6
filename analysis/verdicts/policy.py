"""A switching policy across many configurations, priced against the best single fixed choice.

Per tested level the policy runs the configuration with the most throughput; consecutive levels with the same
winner form a segment. Between two segments the switch point is where the two winners' throughput ratio
crosses 1, interpolated in log C between the bracketing levels exactly as the two-run crossover is
(``crossover.find_crossovers``); its 95% band comes from that ratio's bootstrap interval at every level
(``bootstrap.ratio_interval`` over the same window batches the per-level intervals use).

The best single fixed choice is the configuration with the highest geometric-mean throughput over the tested
levels (every level weighs the same, whatever its absolute tok/s), so the price of the policy is its gain
over what a team would run if it had to pick one setting. A configuration named in ``schedules`` (a tuned depth
schedule, which changes its depth with the load) is no fixed setting, so it is never the fixed choice.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.stats.bootstrap import ratio_interval
from specbench.analysis.table import fmt_ratio
from specbench.analysis.verdicts.crossover import FIT_SPAN, Crossover, RatioPoint, band_text, find_crossovers

PAIR_STREAM = 2  # third seed word of a policy pair's bootstrap (per-level intervals use [seed, C])


@dataclass(frozen=True)
class Candidate:
    """One configuration's throughput at one level, and the window batches behind it."""

    name: str
    tok_s: float
    batches: tuple[float, ...] = ()


@dataclass(frozen=True)
class Switch:
    """Where the policy moves from one configuration to the next as C rises."""

    from_name: str
    to_name: str
    c: float  # interpolated C where the two have equal throughput
    c_low: float | None  # 95% band; None = beyond the tested levels
    c_high: float | None
    below_c: int  # last tested level of ``from_name``'s segment
    above_c: int  # first tested level of ``to_name``'s segment
    fitted: int = 0  # levels its value and band were fitted over (``crossover.local_fit``); 0: interpolated


@dataclass(frozen=True)
class PolicyLevel:
    """What the policy runs at one level, against the best single fixed choice."""

    target_c: int
    uses: str
    policy_tok_s: float
    fixed_tok_s: float

    @property
    def vs_fixed(self) -> float | None:
        return self.policy_tok_s / self.fixed_tok_s if self.fixed_tok_s > 0 else None


@dataclass(frozen=True)
class Policy:
    kind: str  # "none", "single" (one configuration wins everywhere), "switch", "mixed" (a winner returns)
    text: str
    segments: tuple[tuple[str, int, int], ...] = ()  # (configuration, first level, last level)
    switches: tuple[Switch, ...] = ()
    fixed: str | None = None  # best single fixed choice
    levels: tuple[PolicyLevel, ...] = ()
    mean_gain: float | None = None  # geometric mean of policy / fixed over the levels


def switching_policy(levels: Mapping[int, Sequence[Candidate]], *, seed: int = 0, n_boot: int = 2000,
                     schedules: Collection[str] = ()) -> Policy:
    """The best configuration per level, its switch points with bands, and its price against a fixed choice.

    Only levels where every configuration has a throughput are used, so each choice is priced on the same
    levels; a configuration with no positive throughput anywhere cannot be the fixed choice.
    """
    names = _common_names(levels)
    table = {c: {cand.name: cand for cand in cands} for c, cands in levels.items()}
    cs = sorted(c for c, row in table.items() if all(n in row and row[n].tok_s > 0 for n in names))
    if not cs or not names:
        return Policy("none", "no policy: no level has a throughput for every configuration")
    winners = [max(names, key=lambda n: table[c][n].tok_s) for c in cs]
    segments: list[tuple[str, int, int]] = []
    for c, w in zip(cs, winners, strict=True):
        if segments and segments[-1][0] == w:
            segments[-1] = (w, segments[-1][1], c)
        else:
            segments.append((w, c, c))
    switches = tuple(_switch(table, cs, a, b, seed, n_boot) for a, b in itertools.pairwise(segments))
    fixed_names = [n for n in names if n not in schedules] or names
    fixed = max(fixed_names, key=lambda n: sum(math.log(table[c][n].tok_s) for c in cs))
    priced = tuple(PolicyLevel(c, w, table[c][w].tok_s, table[c][fixed].tok_s)
                   for c, w in zip(cs, winners, strict=True))
    gains = [p.vs_fixed for p in priced if p.vs_fixed]
    mean_gain = math.exp(sum(math.log(g) for g in gains) / len(gains)) if gains else None
    returns = len({s[0] for s in segments}) < len(segments)
    kind = "single" if len(segments) == 1 else "mixed" if returns else "switch"
    text = _text(kind, segments, switches, fixed, priced, mean_gain)
    return Policy(kind, text, tuple(segments), switches, fixed, priced, mean_gain)


def _common_names(levels: Mapping[int, Sequence[Candidate]]) -> list[str]:
    """Every configuration named at any level, in first-seen order."""
    seen: dict[str, None] = {}
    for c in sorted(levels):
        for cand in levels[c]:
            seen.setdefault(cand.name, None)
    return list(seen)


def _switch(table: Mapping[int, Mapping[str, Candidate]], cs: Sequence[int], left: tuple[str, int, int],
            right: tuple[str, int, int], seed: int, n_boot: int) -> Switch:
    """The crossing of left/right throughput between the two segments, with its band."""
    a, b = left[0], right[0]
    points = []
    for c in cs:
        ca, cb = table[c][a], table[c][b]
        interval = ratio_interval(np.asarray(cb.batches, dtype=float), np.asarray(ca.batches, dtype=float),
                                  rng=np.random.default_rng([seed, c, PAIR_STREAM]), n_boot=n_boot)
        low, high = interval if interval else (None, None)
        points.append(RatioPoint(c, ca.tok_s / cb.tok_s, low, high))
    # a wins at left[2] and b at right[1], so a falling crossing lies between them; a line fitted over dense
    # noisy levels may put it one level-gap beside them (within FIT_SPAN): the one nearest the boundary.
    mid = math.sqrt(left[2] * right[1])
    near = [x for x in find_crossovers(points)
            if x.spec_wins_below and left[2] / FIT_SPAN <= x.c <= right[1] * FIT_SPAN]
    if near:
        x = min(near, key=lambda x: abs(math.log(x.c / mid)))
        return Switch(a, b, x.c, x.c_low, x.c_high, left[2], right[1], x.fitted)
    return Switch(a, b, mid, None, None, left[2], right[1])  # unreachable, kept total for safety


def switch_band(s: Switch) -> str:
    """The switch point's 95% band in words (same wording as a crossover's)."""
    return band_text(Crossover(s.c, s.c_low, s.c_high, s.below_c, s.above_c, True))


def _text(kind: str, segments: Sequence[tuple[str, int, int]], switches: Sequence[Switch], fixed: str,
          priced: Sequence[PolicyLevel], mean_gain: float | None) -> str:
    span = f"C={priced[0].target_c} to C={priced[-1].target_c}"
    if kind == "single":
        return (f"run {segments[0][0]} at every tested level ({span}): it gives the most throughput everywhere, "
                "so no switching is needed")
    parts = [f"{switches[0].from_name} below C≈{switches[0].c:.3g} ({switch_band(switches[0])})"]
    parts += [f"{s.to_name} to C≈{n.c:.3g} ({switch_band(n)})" for s, n in itertools.pairwise(switches)]
    parts.append(f"{switches[-1].to_name} above")
    best = max(priced, key=lambda p: p.vs_fixed or 0.0)
    text = (", ".join(parts) + f"; against the best single fixed choice ({fixed}) the policy gives "
            f"{fmt_ratio(mean_gain)} its throughput on average over {span} and up to {fmt_ratio(best.vs_fixed)} "
            f"(at C={best.target_c})")
    if kind == "mixed":
        text += ("; a configuration wins again after losing, so the curves are noisy or not monotone: repeat the "
                 "runs before trusting the switch points")
    return text
