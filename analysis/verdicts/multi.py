"""Many configurations against one baseline: per level every configuration's ratio, the best, and a policy.

Each configuration is compared with the baseline by ``compare_runs`` (so its ratios and intervals are exactly
the two-run report's), and the per-level view is built from those comparisons: which configuration gives the
most throughput, whether it is significantly better than the runner-up (95% interval of best / runner-up by
the same batch bootstrap, from the same window batches), and the switching policy across all of them
(``policy.py``). A single configuration is the two-run comparison itself, and its outputs are the two-run
files unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.records.checks import ValidityWarning
from specbench.analysis.records.energy import Prices
from specbench.analysis.records.summary import RunSummary
from specbench.analysis.stats.bootstrap import ratio_interval
from specbench.analysis.verdicts.compare import DEFAULT_N_BOOT, DEFAULT_SEED, Comparison, compare_runs
from specbench.analysis.verdicts.equivalence import Equivalence
from specbench.analysis.verdicts.policy import Candidate, Policy, switching_policy
from specbench.contract.schema import RunData
from specbench.contract.slo import Slo

BEST_STREAM = 1  # third seed word of the best / runner-up bootstrap at a level


@dataclass(frozen=True)
class ConfigLevel:
    """One configuration (or the baseline) at one level. Ratios are configuration / baseline."""

    name: str
    tok_s: float | None
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    is_baseline: bool = False
    batches: tuple[float, ...] = ()


@dataclass(frozen=True)
class MultiLevel:
    """Every configuration at one target concurrency, the best one and its margin over the runner-up."""

    target_c: int
    configs: tuple[ConfigLevel, ...]  # the baseline first, then the configurations in the order given
    best: str | None
    runner_up: str | None
    best_ratio: float | None  # best / runner-up throughput
    best_low: float | None  # its 95% interval; None when a window has too few batches
    best_high: float | None

    @property
    def significant(self) -> bool | None:
        """True when the best is significantly better than the runner-up; None without an interval."""
        return None if self.best_low is None else self.best_low > 1.0

    def config(self, name: str) -> ConfigLevel | None:
        return next((cl for cl in self.configs if cl.name == name), None)


@dataclass(frozen=True)
class MultiComparison:
    """Everything a many-configuration report shows; renderers and writers only format it."""

    baseline_name: str
    baseline: RunSummary
    names: tuple[str, ...]  # the configurations, baseline excluded, in the order given
    pairs: tuple[Comparison, ...]  # each configuration against the baseline, same order
    levels: tuple[MultiLevel, ...]
    policy: Policy
    warnings: tuple[ValidityWarning, ...]
    seed: int
    n_boot: int

    @property
    def all_names(self) -> tuple[str, ...]:
        return (self.baseline_name, *self.names)


def compare_many(
    base: RunData,
    configs: Sequence[tuple[str, RunData]],
    *,
    baseline_name: str = "baseline",
    seed: int = DEFAULT_SEED,
    n_boot: int = DEFAULT_N_BOOT,
    slo: Slo | None = None,
    prices: Prices | None = None,
    schedules: Collection[str] = (),
) -> MultiComparison:
    """Compare every named configuration with the baseline and across each other, level by level.

    ``slo``: judge every pair by it (default: the SLO the baseline run was started with, if any). ``prices``:
    cost every run at these prices instead of its own. ``schedules``: configurations that change their setting
    with the load (a tuned depth schedule), never the policy's fixed choice.
    """
    names = [name for name, _ in configs]
    if len(set(names)) != len(names) or baseline_name in names:
        raise ValueError(f"configuration names must be unique and differ from the baseline's: {names}")
    pairs = tuple(compare_runs(base, run, seed=seed, n_boot=n_boot, slo=slo, prices=prices)
                  for _, run in configs)
    levels = tuple(_level(c, baseline_name, names, pairs, seed, n_boot) for c in _levels(pairs))
    candidates = {lv.target_c: [Candidate(cl.name, cl.tok_s, cl.batches) for cl in lv.configs if cl.tok_s]
                  for lv in levels}
    policy = switching_policy(candidates, seed=seed, n_boot=n_boot, schedules=schedules)
    return MultiComparison(
        baseline_name=baseline_name, baseline=pairs[0].baseline if pairs else _summary(base),
        names=tuple(names), pairs=pairs, levels=levels, policy=policy, warnings=_warnings(pairs, names),
        seed=seed, n_boot=n_boot,
    )


def multi_equivalences(m: MultiComparison) -> list[tuple[str, Equivalence]]:
    """Each configuration's output-equivalence check against the baseline, in order."""
    return [(name, pair.equivalence) for name, pair in zip(m.names, m.pairs, strict=True)
            if pair.equivalence is not None]


def _summary(base: RunData) -> RunSummary:
    from specbench.analysis.records.summary import summarize_run

    return summarize_run(base, name="baseline")


def _levels(pairs: Sequence[Comparison]) -> list[int]:
    return sorted({lv.target_c for pair in pairs for lv in pair.levels})


def _level(c: int, baseline_name: str, names: Sequence[str], pairs: Sequence[Comparison], seed: int,
           n_boot: int) -> MultiLevel:
    configs: list[ConfigLevel] = []
    for name, pair in zip(names, pairs, strict=True):
        lv = next((x for x in pair.levels if x.target_c == c), None)
        if lv is None:
            continue
        if not configs:
            configs.append(ConfigLevel(baseline_name, lv.baseline.throughput_tok_s, 1.0, None, None, True,
                                       lv.baseline_batches))
        configs.append(ConfigLevel(name, lv.spec.throughput_tok_s, lv.ratio, lv.ratio_low, lv.ratio_high, False,
                                   lv.spec_batches))
    ranked = sorted((cl for cl in configs if cl.tok_s), key=lambda cl: cl.tok_s or 0.0, reverse=True)
    if not ranked:
        return MultiLevel(c, tuple(configs), None, None, None, None, None)
    best = ranked[0]
    if len(ranked) == 1:
        return MultiLevel(c, tuple(configs), best.name, None, None, None, None)
    second = ranked[1]
    interval = ratio_interval(np.asarray(second.batches, dtype=float), np.asarray(best.batches, dtype=float),
                              rng=np.random.default_rng([seed, c, BEST_STREAM]), n_boot=n_boot)
    low, high = interval if interval else (None, None)
    return MultiLevel(c, tuple(configs), best.name, second.name, (best.tok_s or 0.0) / (second.tok_s or 1.0),
                      low, high)


def _warnings(pairs: Sequence[Comparison], names: Sequence[str]) -> tuple[ValidityWarning, ...]:
    """The baseline's warnings once, then each pairing's own, named by configuration; duplicates dropped."""
    seen: dict[tuple[str, str | None, int | None, str], ValidityWarning] = {}
    for name, pair in zip(names, pairs, strict=True):
        for w in pair.warnings:
            own = w.run == pair.baseline.name
            message = w.message if own else f"{name}: {w.message}"
            key = (w.code, w.run, w.target_c, message)
            seen.setdefault(key, ValidityWarning(w.code, message, w.run, w.target_c))
    return tuple(seen.values())
