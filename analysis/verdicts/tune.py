"""From measured depths to a server setting: the speculative depth (K) to run at each load, and its schedule.

Input: a many-configuration comparison (``compare_many``) of a baseline (K = 0, speculation off) and the same
speculative server at several fixed depths, all on one ladder. Per level:

* the best is the candidate with the most throughput (a point value, used only to name the reference);
* the chosen depth is the smallest K that is not worse than the best beyond noise AND shown within
  ``TUNE_MARGIN`` of it: the 95% interval of K / best must reach 1 and its low end must be at least
  1 - ``TUNE_MARGIN``. The smallest such K is chosen because a shallower draft costs less compute and energy
  for the same throughput. A level where no candidate has an interval keeps the best point value and says so.

With the energy objective (``objective="energy"``, ``--objective energy``), the chosen depth is the one with the
least energy per output token among those shown to keep at least ``floor`` of the best's throughput (the 95%
interval's low end; the best itself always qualifies); energies within ``ENERGY_TIE`` of the least count as
equal and the smallest depth among them is taken. Energy per token is a window's figure without an interval,
hence the tie margin. A level where no qualifying run has an energy figure is chosen by throughput and says so.

The schedule is keyed on the server's batch size, not on the client's concurrency: each level maps to the
requests the server itself reported running over the chosen run's window (its /metrics). Where a level has no
such figure, the whole schedule is keyed on concurrency and says so. Adjacent levels with the same K merge;
range edges lie halfway between neighbouring levels' batch sizes.

Each level also predicts what its chosen depth delivers, cross-fitted (``tunepredict``): one half of the window
batches chooses, the other measures, and both ways round, so the prediction is free of the winner's curse. The
validation (``validate_schedule``) checks the tuned run against it, and withholds any interval whose windows
finished fewer requests than their level's minimum.

The best single depth (for servers that take one depth per launch) is the K >= 1 with the highest geometric-mean
throughput over the levels, as the switching policy prices a fixed choice (``policy.py``).

A level cannot be chosen from when any candidate failed more than ``max_error_rate`` of its requests there (a
server that died would otherwise hand the level to the depths that survived), when a candidate was not measured
there, or when the server ran more requests than ``upper`` says it can. Such a tune is partial: its result
names every such level in ``problems`` and carries neither a schedule nor a best single depth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from specbench.analysis.records.gaugecheck import MIN_SAMPLES
from specbench.analysis.stats.bootstrap import ratio_interval
from specbench.analysis.verdicts.multi import ConfigLevel, MultiComparison
from specbench.analysis.verdicts.tunepredict import NO_PREDICTION, Prediction, cross_fitted

TUNE_MARGIN = 0.02  # a depth chosen over the best must be shown within 2% of it
OBJECTIVES = ("throughput", "energy")
DEFAULT_FLOOR = 0.95  # the energy objective: the share of the best's throughput a depth must be shown to keep
ENERGY_TIE = 0.02  # energies per token within 2% of the least are one to the energy objective
TUNE_STREAM = 3  # third seed word of the candidate / best bootstrap at a level
DEFAULT_MAX_ERROR_RATE = 0.05  # the load side's --max-error-rate default


@dataclass(frozen=True)
class Interval:
    """A throughput ratio and its 95% interval (None: too few window batches for one; with ``note``: withheld,
    and why, e.g. a window that finished fewer requests than its level's minimum)."""

    ratio: float | None
    low: float | None
    high: float | None
    note: str = ""

    def text(self) -> str:
        if self.ratio is None:
            return self.note or "-"
        band = f" ({self.low:.2f}-{self.high:.2f})" if self.low is not None and self.high is not None else ""
        return f"{self.ratio:.2f}x{band}"


@dataclass(frozen=True)
class DepthAtLevel:
    """One candidate depth at one level; ratios are this candidate over the level's best and the baseline."""

    depth: int
    name: str
    tok_s: float | None
    vs_best: Interval
    vs_baseline: Interval
    running: float | None  # mean requests running in this candidate's window, as the server counted them
    running_max: float | None
    running_reads: int = 0  # the server's gauge reads inside the window
    energy_per_token_j: float | None = None  # the GPUs' joules per output token over the window (--gpu-metrics)
    error_rate: float | None = None  # failed share of the requests in this candidate's step


@dataclass(frozen=True)
class TunedLevel:
    target_c: int
    candidates: tuple[DepthAtLevel, ...]  # by depth, the baseline (0) first
    best: int | None  # depth with the most throughput (point value)
    chosen: int | None
    how: str  # "within_noise", "best" (nothing shallower qualified), "point" (no interval), "none";
    # the energy objective: "energy" (least energy per token above the floor), "no_energy" (by throughput)
    over: tuple[tuple[int, Interval], ...] = ()  # the chosen depth's throughput over each other candidate's
    problem: str = ""  # why nothing could be chosen here ("failed", "unmeasured"): one line naming the candidates
    prediction: Prediction = NO_PREDICTION  # what the chosen depth should deliver, cross-fitted (tunepredict)

    def candidate(self, depth: int | None) -> DepthAtLevel | None:
        return next((c for c in self.candidates if c.depth == depth), None)


@dataclass(frozen=True)
class TuneResult:
    levels: tuple[TunedLevel, ...]
    keyed_on: str  # "batch" (the server's running requests) or "concurrency"
    key_note: str  # why the key is what it is
    schedule: tuple[tuple[int, int, int], ...]  # (lowest, highest, K) over the key, merged, contiguous from 1
    best_single: int | None  # best fixed depth K >= 1 (geometric mean throughput over the levels)
    depths: tuple[int, ...]  # the candidates, 0 first
    objective: str = "throughput"
    floor: float | None = None  # the energy objective's throughput floor
    problems: tuple[str, ...] = ()  # why the tune is partial, one line each; empty: complete

    @property
    def complete(self) -> bool:
        return not self.problems


def tune_depths(multi: MultiComparison, depth_of: Mapping[str, int], *, upper: int, objective: str = "throughput",
                floor: float = DEFAULT_FLOOR, max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
                ladder: Sequence[int] = ()) -> TuneResult:
    """Choose a depth per level from ``multi`` (configurations named in ``depth_of``; the baseline is 0).

    ``upper`` is the highest batch size the schedule must cover (the server's cap on running requests);
    ``objective`` "energy" chooses by energy per token above ``floor`` of the best's throughput. A level of
    ``ladder`` (the levels every run was to measure) that no run reached, or where a candidate failed more than
    ``max_error_rate`` or was not measured, makes the result partial.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    depths = tuple(sorted({0, *depth_of.values()}))
    names = {0: multi.baseline_name, **{k: n for n, k in depth_of.items()}}
    rows = _running_by_level(multi, names)
    energy_floor = floor if objective == "energy" else None
    errors = _errors_by_level(multi)
    by_c = {lv.target_c: lv for lv in multi.levels}
    levels = tuple(tune_level(c, by_c[c].configs, names, rows, multi.seed, multi.n_boot, energy_floor,
                          _failures(c, names, errors, max_error_rate))
                   if c in by_c else TunedLevel(c, (), None, None, "unmeasured", problem=f"C={c}: no run measured it")
                   for c in sorted({*by_c, *ladder}))
    keyed = [lv for lv in levels if lv.chosen is not None]
    keys = [_key(lv) for lv in keyed]
    if keyed and all(k is not None for k in keys):
        keyed_on, note = "batch", "keyed on the server's running requests (its /metrics) over each chosen window"
        points = [(float(k), lv.chosen) for k, lv in zip(keys, keyed, strict=True) if k is not None and
                  lv.chosen is not None]
    else:
        keyed_on = "concurrency"
        note = (f"keyed on the client's concurrency: the server reported no running-request count (from at least "
                f"{MIN_SAMPLES} reads of its /metrics in the window; --server-metrics-interval sets how often) for "
                + ", ".join(f"C={lv.target_c}" for lv, k in zip(keyed, keys, strict=True) if k is None))
        points = [(float(lv.target_c), lv.chosen) for lv in keyed if lv.chosen is not None]
    problems = tuple(lv.problem for lv in levels if lv.problem) + tuple(
        f"C={lv.target_c}: the server ran {key:.1f} requests on average, more than max_batch {upper} (the tune "
        "file's cap on running requests): give the server's own cap (vLLM --max-num-seqs)"
        for lv, key in zip(keyed, keys, strict=True) if keyed_on == "batch" and key is not None and round(key) > upper)
    if problems:
        return TuneResult(levels, keyed_on, note, (), None, depths, objective, energy_floor, problems)
    return TuneResult(levels, keyed_on, note, build_schedule(points, upper), _best_single(levels, depths), depths,
                      objective, energy_floor)


def build_schedule(points: Sequence[tuple[float, int]], upper: int) -> tuple[tuple[int, int, int], ...]:
    """Contiguous (lowest, highest, K) ranges from 1 to ``upper`` from (batch size, K) points.

    Each edge lies halfway between two neighbouring points; points that round to the same batch size are one
    batch size to the server, and the later (higher level) one is kept. Adjacent ranges with one K merge. No
    range runs past ``upper`` (a level above it, by concurrency, is the server at its cap).
    """
    by_key: dict[int, int] = {}
    for key, depth in sorted(points, key=lambda p: p[0]):
        by_key[min(upper, max(1, round(key)))] = depth
    keys = sorted(by_key)
    if not keys:
        return ()
    ranges: list[list[int]] = []
    for i, key in enumerate(keys):
        low = 1 if i == 0 else ranges[-1][1] + 1
        high = upper if i == len(keys) - 1 else max(low, (key + keys[i + 1]) // 2)
        if ranges and ranges[-1][2] == by_key[key]:
            ranges[-1][1] = high
        else:
            ranges.append([low, high, by_key[key]])
    return tuple((lo, hi, k) for lo, hi, k in ranges if lo <= hi)


def schedule_depth(schedule: Sequence[tuple[int, int, int]], key: float) -> int | None:
    """The depth a schedule gives a batch size (None: outside every range)."""
    size = max(1, round(key))
    return next((k for lo, hi, k in schedule if lo <= size <= hi), None)


Running = tuple[float | None, float | None, int, float | None]  # mean, max, reads; energy per token


def _running_by_level(multi: MultiComparison, names: Mapping[int, str]) -> dict[tuple[str, int], Running]:
    """(configuration, level) -> (mean, max, reads) of the requests running as the server reported them, and the
    GPUs' energy per output token over the window."""
    out: dict[tuple[str, int], Running] = {}
    by_name = {multi.baseline_name: multi.baseline}
    for name, pair in zip(multi.names, multi.pairs, strict=True):
        by_name[name] = pair.spec
    for name in names.values():
        summary = by_name.get(name)
        if summary is None:
            continue
        for row in summary.rows:
            if row.window_s:
                out[(name, row.target_c)] = (row.server_running, row.server_running_max, row.server_samples,
                                             row.energy_per_token_j)
    return out


Errors = dict[tuple[str, int], tuple[float, int]]  # (configuration, level) -> (failed share, requests)


def _errors_by_level(multi: MultiComparison) -> Errors:
    """Each run's failed share of requests per level, every step counted (a dead server's step has no window)."""
    out: Errors = {}
    summaries = [(multi.baseline_name, multi.baseline),
                 *((name, pair.spec) for name, pair in zip(multi.names, multi.pairs, strict=True))]
    for name, summary in summaries:
        for row in summary.rows:
            if row.error_rate is not None and row.error_rate > out.get((name, row.target_c), (-1.0, 0))[0]:
                out[(name, row.target_c)] = (row.error_rate, row.requests_total)
    return out


def _failures(c: int, names: Mapping[int, str], errors: Errors, limit: float) -> str:
    """The candidates at level ``c`` that failed more than ``limit`` of their requests, as one clause ('' none)."""
    failed = []
    for name in names.values():
        share, total = errors.get((name, c), (0.0, 0))
        if share > limit:
            failed.append(f"{name} {round(share * total)} of {total} ({share:.0%})")
    return f"more than --max-error-rate {limit:.0%} of requests failed: {', '.join(failed)}" if failed else ""


def tune_level(c: int, configs: Sequence[ConfigLevel], names: Mapping[int, str],
               running: Mapping[tuple[str, int], Running], seed: int,
               n_boot: int, energy_floor: float | None = None, failed: str = "") -> TunedLevel:
    """One level's choice from its candidates (``names``: depth -> configuration name), and the chosen depth's
    cross-fitted prediction; ``failed`` (one clause) makes the level a problem instead."""
    by_name = {cl.name: cl for cl in configs}
    present = [(k, by_name[n]) for k, n in sorted(names.items()) if n in by_name]
    missing = [n for k, n in sorted(names.items()) if k not in {k for k, cl in present if cl.tok_s}]
    if failed:
        return TunedLevel(c, (), None, None, "failed", problem=f"C={c}: {failed}")
    if missing:
        return TunedLevel(c, (), None, None, "unmeasured",
                          problem=f"C={c}: no throughput measured for {', '.join(missing)}")
    rng = np.random.default_rng([seed, c, TUNE_STREAM])
    best_depth, candidates = _candidates(c, present, running, rng, n_boot)
    chosen, how = _choose(candidates, best_depth, energy_floor)
    mine = dict(present)[chosen]
    over = tuple((k, _interval(cl, mine, rng, n_boot)) for k, cl in present if k != chosen)

    def by_half(half: Mapping[int, tuple[float, ...]]) -> int | None:
        """The same rule over one half of every candidate's batches (energy is the window's, kept whole)."""
        parts = [(k, replace(cl, tok_s=sum(half[k]) / len(half[k]), batches=half[k])) for k, cl in present]
        top, cands = _candidates(c, parts, running, rng, n_boot)
        return _choose(cands, top, energy_floor)[0]

    prediction = cross_fitted({k: cl.batches for k, cl in present}, by_half)
    return TunedLevel(c, tuple(candidates), best_depth, chosen, how, over, prediction=prediction)


def _candidates(c: int, present: Sequence[tuple[int, ConfigLevel]], running: Mapping[tuple[str, int], Running],
                rng: np.random.Generator, n_boot: int) -> tuple[int, list[DepthAtLevel]]:
    """The best depth by point value, and every candidate with its ratio to it."""
    best_depth, best = max(present, key=lambda kc: kc[1].tok_s or 0.0)
    candidates = []
    for k, cl in present:
        vs_best = Interval(1.0, 1.0, 1.0) if k == best_depth else _interval(best, cl, rng, n_boot)
        vs_base = Interval(1.0, None, None) if k == 0 else Interval(cl.ratio, cl.ratio_low, cl.ratio_high)
        mean, most, reads, energy = running.get((cl.name, c), (None, None, 0, None))
        candidates.append(DepthAtLevel(k, cl.name, cl.tok_s, vs_best, vs_base, mean, most, reads, energy))
    return best_depth, candidates


def _choose(candidates: Sequence[DepthAtLevel], best_depth: int, energy_floor: float | None) -> tuple[int, str]:
    if energy_floor is None:
        return choose_depth(candidates, best_depth)
    return choose_by_energy(candidates, best_depth, energy_floor)


def _interval(best: ConfigLevel, other: ConfigLevel, rng: np.random.Generator, n_boot: int) -> Interval:
    ratio = (other.tok_s / best.tok_s) if other.tok_s and best.tok_s else None
    band = ratio_interval(np.asarray(best.batches, dtype=float), np.asarray(other.batches, dtype=float),
                          rng=rng, n_boot=n_boot)
    return Interval(ratio, band[0] if band else None, band[1] if band else None)


def choose_depth(candidates: Sequence[DepthAtLevel], best_depth: int) -> tuple[int, str]:
    """The smallest depth within noise of the best and shown within the margin; else the best."""
    has_interval = any(c.vs_best.low is not None for c in candidates if c.depth != best_depth)
    if not has_interval and len(candidates) > 1:
        return best_depth, "point"
    for cand in sorted(candidates, key=lambda c: c.depth):
        if cand.depth == best_depth:
            return best_depth, "best"
        low, high = cand.vs_best.low, cand.vs_best.high
        if low is not None and high is not None and high >= 1.0 and low >= 1.0 - TUNE_MARGIN:
            return cand.depth, "within_noise"
    return best_depth, "best"


def choose_by_energy(candidates: Sequence[DepthAtLevel], best_depth: int, floor: float) -> tuple[int, str]:
    """The least energy per token among the depths shown to keep ``floor`` of the best's throughput (the best
    always qualifies); within ``ENERGY_TIE`` of the least, the smallest depth. Without energy figures for any of
    them: the throughput choice, as "no_energy"."""
    kept = [c for c in candidates if c.depth == best_depth or (c.vs_best.low is not None and c.vs_best.low >= floor)]
    measured = [c for c in kept if c.energy_per_token_j]
    if not measured:
        return choose_depth(candidates, best_depth)[0], "no_energy"
    least = min(c.energy_per_token_j or 0.0 for c in measured)
    tied = [c for c in measured if (c.energy_per_token_j or 0.0) <= least * (1 + ENERGY_TIE)]
    return min(tied, key=lambda c: c.depth).depth, "energy"


def _key(level: TunedLevel) -> float | None:
    """The server's mean running requests in the chosen run's window; None from fewer than MIN_SAMPLES reads (a
    gauge read once or twice in a short window may be the idle moment between two requests)."""
    chosen = level.candidate(level.chosen)
    if chosen is None or chosen.running_reads < MIN_SAMPLES:
        return None
    return chosen.running


def _best_single(levels: Sequence[TunedLevel], depths: Sequence[int]) -> int | None:
    """The depth >= 1 with the highest geometric-mean throughput over the levels where every depth was measured."""
    speculative = [k for k in depths if k >= 1]
    complete = [lv for lv in levels
                if all((cand := lv.candidate(k)) is not None and cand.tok_s for k in speculative)]
    if not speculative or not complete:
        return None

    def score(depth: int) -> float:
        total = 0.0
        for lv in complete:
            cand = lv.candidate(depth)
            total += math.log(cand.tok_s or 1.0) if cand is not None else 0.0
        return total

    return max(speculative, key=score)


@dataclass(frozen=True)
class ValidatedLevel:
    """The tuned server at one level of a validation run: what it delivered against what the tune predicted (the
    cross-fitted prediction, ``tunepredict``), and against the baseline and the best fixed depth measured beside
    it. An interval whose window finished fewer requests than its level's minimum is withheld (its ``note``)."""

    target_c: int
    depth: int | None  # what the schedule gives this level's batch
    predicted_tok_s: float | None
    delivered_tok_s: float | None
    vs_predicted: Interval
    vs_baseline: Interval
    vs_fixed: Interval
    predicted_low: float | None = None  # the prediction's own 95% interval
    predicted_high: float | None = None

    @property
    def outcome(self) -> str:
        """"as_predicted" (the interval holds 1), "short", "above", "too_few" (a window finished fewer requests
        than the level's minimum), or "unknown" (no interval)."""
        iv = self.vs_predicted
        if iv.low is None or iv.high is None:
            return "too_few" if iv.note.startswith(TOO_FEW) else "unknown"
        return "short" if iv.high < 1.0 else "above" if iv.low > 1.0 else "as_predicted"


TOO_FEW = "too few requests"


def too_few_requests(multi: MultiComparison, name: str, c: int) -> str:
    """'too few requests (N of M)' where ``name``'s window at level ``c`` finished fewer requests than the level's
    minimum (its steps' ``min_requests``); '' where it finished enough."""
    summary = multi.baseline if name == multi.baseline_name else next(
        (pair.spec for n, pair in zip(multi.names, multi.pairs, strict=True) if n == name), None)
    rows = [row for row in summary.rows if row.target_c == c] if summary is not None else []
    done = max((row.requests_ok for row in rows), default=0)
    need = max((row.min_requests for row in rows), default=1)
    return f"{TOO_FEW} ({done} of {need})" if done < need else ""


def _withheld(why: str) -> Interval:
    return Interval(None, None, None, why)


def validate_schedule(result: TuneResult, tuning: MultiComparison, check: MultiComparison, tuned: str,
                      fixed: str) -> tuple[ValidatedLevel, ...]:
    """Level by level: the tuned run of ``check`` against the tune's prediction, the baseline and ``fixed``; an
    interval only where both windows behind it finished their level's minimum of requests."""
    out = []
    for lv in check.levels:
        mine = lv.config(tuned)
        if mine is None:
            continue
        c = lv.target_c
        tuned_level = next((t for t in result.levels if t.target_c == c), None)
        chosen = tuned_level.candidate(tuned_level.chosen) if tuned_level is not None else None
        prediction = tuned_level.prediction if tuned_level is not None else NO_PREDICTION
        rng = np.random.default_rng([check.seed, c, TUNE_STREAM])
        short = too_few_requests(check, tuned, c)
        if why := short or (too_few_requests(tuning, chosen.name, c) if chosen is not None else ""):
            vs_predicted = _withheld(why)
        elif prediction.tok_s is None:
            vs_predicted = _withheld("no prediction: too few window batches to predict apart from the choice")
        else:
            predicted = ConfigLevel("predicted", prediction.tok_s, None, None, None, batches=prediction.batches)
            vs_predicted = _interval(predicted, mine, rng, check.n_boot)
        other = lv.config(fixed)
        if other is None:
            vs_fixed = Interval(None, None, None)
        elif why := short or too_few_requests(check, fixed, c):
            vs_fixed = _withheld(why)
        else:
            vs_fixed = _interval(other, mine, rng, check.n_boot)
        why = short or too_few_requests(check, check.baseline_name, c)
        vs_baseline = _withheld(why) if why else Interval(mine.ratio, mine.ratio_low, mine.ratio_high)
        out.append(ValidatedLevel(c, tuned_level.chosen if tuned_level is not None else None, prediction.tok_s,
                                  mine.tok_s, vs_predicted, vs_baseline, vs_fixed, prediction.low, prediction.high))
    return tuple(out)


__all__ = [
    "DEFAULT_FLOOR",
    "DEFAULT_MAX_ERROR_RATE",
    "ENERGY_TIE",
    "OBJECTIVES",
    "TOO_FEW",
    "TUNE_MARGIN",
    "DepthAtLevel",
    "Interval",
    "TuneResult",
    "TunedLevel",
    "ValidatedLevel",
    "build_schedule",
    "choose_by_energy",
    "choose_depth",
    "schedule_depth",
    "too_few_requests",
    "tune_depths",
    "tune_level",
    "validate_schedule",
]
