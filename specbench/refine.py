"""After the ladders: measure extra levels around each crossover until its 95% interval is pinned (#27).

Each round asks ``analysis.verdicts.refine.plan_round`` for one new level per crossing that is not yet pinned (the
bracket's geometric midpoint), runs those levels on every server with the ladder's own settings and prompt
order (a short ladder of just those levels, into ``RUN/refined/round-N``), and appends its steps, records,
answers and server samples to the server's run directory (``contract.rundir.RunDir.merge``), steps marked
``refined`` and renumbered after the ladder's, request ids prefixed so they stay unique. The analysis then reads
one run per server as before.
It stops when every crossing is pinned, has had ``--refine-levels`` levels, has no whole level left in its
bracket, or when the next round would not fit in what is left of the time budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from specbench.analysis.verdicts.refine import (
    DEFAULT_REFINE_LEVELS,
    Crossing,
    RefinePlan,
    added_in_bracket,
    added_near,
    plan_rate_round,
    plan_round,
)
from specbench.analysis.verdicts.slo_compare import Capacity, capacity
from specbench.contract.rundir import RunDir
from specbench.contract.settings import duration_arg
from specbench.shapes.budget import fmt_duration

REFINE_SHARE = 0.25  # of a --time-budget kept for refinement when it is on (the ladders share the rest)
ROUND_OVERHEAD_S = 6.0  # starting Locust and closing a one-level ladder, on top of the step itself

#: Runs one short ladder of ``levels`` (concurrencies, or request rates in rate mode) on the named server into
#: ``run_dir`` with ``budget_s`` (None: no budget); returns the Locust exit code (0, 3 for too many errors, 130
#: when interrupted, else failed).
LevelRunner = Callable[[str, Sequence[float], Path, float | None], int]


@dataclass(frozen=True)
class RefineResult:
    rounds: int
    levels: tuple[float, ...]  # every level (or rate) added, in order
    reason: str  # why it stopped, in words
    returncode: int = 0  # a failed or interrupted refinement run's code; 0 otherwise


@dataclass(frozen=True)
class RoundStop:
    """Why refinement stops inside a round: the budget cannot hold it (returncode 0, nothing ran), or one of
    its runs failed or was interrupted (that run's code, and the round counts as run)."""
    reason: str
    returncode: int = 0


def crossings_of(out: Path, baseline: tuple[str, Path], configs: Sequence[tuple[str, Path]]
                 ) -> tuple[list[Crossing], list[int], list[int]]:
    """The crossings to pin (the crossover, or each switch point of the policy), the levels every run measured,
    and which of those were added."""
    from specbench.analysis import compare_many, load_run

    recorded = [(name, path) for name, path in configs if RunDir(path).has_records()]
    if not recorded or not RunDir(baseline[1]).has_records():
        return [], [], []
    multi = compare_many(load_run(baseline[1]), [(name, load_run(path)) for name, path in recorded],
                         baseline_name=baseline[0], n_boot=500)
    if len(recorded) == 1:
        pair = multi.pairs[0]
        crossings: list[Crossing] = list(pair.verdict.crossovers)
        levels = [lv.target_c for lv in pair.levels]
        refined = [lv.target_c for lv in pair.levels if lv.refined]
    else:
        crossings = list(multi.policy.switches)
        levels = [p.target_c for p in multi.policy.levels]
        refined = [c for c in levels if any(lv.refined for pair in multi.pairs for lv in pair.levels
                                            if lv.target_c == c)]
    return crossings, levels, refined


def refine(out: Path, order: Sequence[str], dirs: dict[str, Path], run_levels: LevelRunner, *,
           max_levels: int = DEFAULT_REFINE_LEVELS, time_left: Callable[[], float | None] = lambda: None
           ) -> RefineResult:
    """Rounds of added levels on every server in ``order`` (the baseline first) until the crossings are pinned."""
    def plan(rounds: int) -> RefinePlan | str:
        crossings, levels, refined = crossings_of(out, (order[0], dirs[order[0]]), [(n, dirs[n]) for n in order[1:]])
        if not crossings:
            return "no crossover between tested levels" if not rounds else "the added levels removed the crossing"
        return plan_round(crossings, levels, {x.c: added_near(x, levels, refined) for x in crossings},
                          max_added=max_levels)

    return _rounds(order, dirs, run_levels, plan, time_left, "the crossover", lambda c: f"C={c:g}")


def refine_by_mode(out: Path, order: Sequence[str], dirs: dict[str, Path], run_levels: LevelRunner, *,
                   rate_mode: bool, max_levels: int = DEFAULT_REFINE_LEVELS,
                   time_left: Callable[[], float | None] = lambda: None) -> int:
    """Refinement as compare and sweep run it: each crossing of concurrency ladders, or in rate mode each
    capacity under the SLO; prints what it added and why it stopped, and returns a failed run's code (else 0)."""
    if rate_mode:
        result = refine_rates(order, dirs, run_levels, max_levels=max_levels, time_left=time_left)
    else:
        result = refine(out, order, dirs, run_levels, max_levels=max_levels, time_left=time_left)
    print(refine_summary(result.levels, result.reason, rates=rate_mode), flush=True)
    return result.returncode


def refine_summary(levels: tuple[float, ...], reason: str, *, rates: bool = False) -> str:
    """One line on what refinement added and why it stopped."""
    if rates:
        added = ", ".join(f"{r:g} req/s" for r in levels) if levels else "no rate"
        return f"capacity refinement: added {added}; stopped: {reason}"
    added = ", ".join(f"C={c:g}" for c in levels) if levels else "no level"
    return f"crossover refinement: added {added}; stopped: {reason}"


def added_level_options(levels: Sequence[float], share: float | None, *, rate_mode: bool, extra: list[str]
                        ) -> list[str]:
    """Options of a short run of just ``levels`` (request rates in rate mode): its share of the time budget, the
    job's own options, and no skipping after saturation (an added level is measured on every server)."""
    budget = ["--time-budget", duration_arg(share)] if share else []
    ladder = ["--rate-ladder" if rate_mode else "--ladder", ",".join(f"{level:g}" for level in levels)]
    return [*budget, *extra, *ladder, "--stop-after-saturation", "-1"]


def refine_rates(order: Sequence[str], dirs: dict[str, Path], run_levels: LevelRunner, *,
                 max_levels: int = DEFAULT_REFINE_LEVELS, time_left: Callable[[], float | None] = lambda: None
                 ) -> RefineResult:
    """Rate mode: rounds of added rates on every server until each capacity under the SLO is pinned (#27).

    Each server whose capacity lies between two tested rates gets the bracket's geometric midpoint, run on
    every server so the rates stay paired; until its interval is within +-15%, ``max_levels`` rates were
    added in its bracket, or the time budget is spent."""
    def plan(_rounds: int) -> RefinePlan | str:
        capacities, tested, refined = capacities_of(order, dirs)
        if not capacities:
            return "no SLO to judge a capacity by (give --slo)"
        return plan_rate_round(capacities, tested, {name: added_in_bracket(cap, tested, refined)
                                                    for name, cap in capacities.items()}, max_added=max_levels)

    return _rounds(order, dirs, run_levels, plan, time_left, "the capacity under the SLO", lambda r: f"{r:g} req/s")


def _rounds(order: Sequence[str], dirs: dict[str, Path], run_levels: LevelRunner,
            plan: Callable[[int], RefinePlan | str], time_left: Callable[[], float | None], what: str,
            shown: Callable[[float], str]) -> RefineResult:
    """Plan a round from the runs as they are (a reason in words: nothing to refine), run it, repeat."""
    added: list[float] = []
    rounds = 0
    while True:
        planned = plan(rounds)
        if isinstance(planned, str) or not planned.levels:
            reason = planned if isinstance(planned, str) else "; ".join(planned.done)
            return RefineResult(rounds, tuple(added), reason)
        stop = _run_round(order, dirs, run_levels, planned, rounds + 1, time_left, what,
                          ", ".join(shown(level) for level in planned.levels))
        if stop is not None:
            ran = rounds + (stop.returncode != 0)  # a budget stop runs nothing; a failed run was a round
            return RefineResult(ran, tuple(added), stop.reason, stop.returncode)
        rounds += 1
        added.extend(planned.levels)


def _run_round(order: Sequence[str], dirs: dict[str, Path], run_levels: LevelRunner, plan: RefinePlan, round_no: int,
               time_left: Callable[[], float | None], what: str, at: str) -> RoundStop | None:
    """One round's levels on every server, merged into each run; None when it ran, else why it stopped."""
    need = len(order) * (len(plan.levels) * _step_s(dirs[order[0]]) + ROUND_OVERHEAD_S)
    left = time_left()
    if left is not None and need > left:
        return RoundStop(f"time budget spent: the next round needs about {fmt_duration(need)}, "
                         f"{fmt_duration(max(0.0, left))} is left")
    print(f"refining {what}: round {round_no} adds {at} on every server", flush=True)
    for n, name in enumerate(order):
        share = None if left is None else max(1.0, left / (len(order) - n))
        run = RunDir(dirs[name])
        sub = run.refined(round_no)
        code = run_levels(name, list(plan.levels), sub.path, share)
        if code not in (0, 3):
            return RoundStop("a refinement run failed or was interrupted", code)
        run.merge(sub, f"r{round_no}")
        left = time_left()
    return None


def capacities_of(order: Sequence[str], dirs: dict[str, Path]
                  ) -> tuple[dict[str, Capacity], list[float], list[float]]:
    """Each server's capacity under its run's SLO (rates with a window), every tested rate, the added ones."""
    from specbench.analysis import load_run, summarize_run

    capacities: dict[str, Capacity] = {}
    tested: set[float] = set()
    refined: set[float] = set()
    for name in order:
        if not RunDir(dirs[name]).has_records():
            continue
        summary = summarize_run(load_run(dirs[name]), name=name)
        if summary.slo is None:
            return {}, [], []
        rows = [r for r in summary.rows if r.target_rate is not None and r.window_s]
        capacities[name] = capacity(rows)
        tested.update(r.level for r in rows)
        refined.update(r.level for r in rows if r.refined)
    return capacities, sorted(tested), sorted(refined)


def _step_s(run_dir: Path) -> float:
    """Mean wall time of one ladder step of this run (start to end of its window), for the budget."""
    steps = RunDir(run_dir).steps()
    spans = [s["end_s"] - s["start_s"] for s in steps if isinstance(s.get("end_s"), float | int)
             and isinstance(s.get("start_s"), float | int)]
    return sum(spans) / len(spans) if spans else 30.0


def measured_levels(run_dir: Path) -> list[int]:
    """Closed-loop levels this run measured (a step that reached its window)."""
    steps = RunDir(run_dir).steps()
    return sorted({s["target_c"] for s in steps if s.get("target_rate") is None and s.get("steady_start_s")
                   is not None})


def pair_levels(order: Sequence[str], dirs: dict[str, Path], run_levels: LevelRunner) -> int:
    """After ``--stop-after-saturation`` ended ladders at different levels: measure on each server the levels
    another server ran and it skipped, so every level stays paired. Returns a failed run's exit code, else 0."""
    have = {name: set(measured_levels(dirs[name])) for name in order}
    every = set().union(*have.values())
    for name in order:
        missing = sorted(every - have[name])
        if not missing:
            continue
        print(f"{name}: measuring {', '.join(f'C={c}' for c in missing)}, which another server ran, so the "
              "levels stay paired", flush=True)
        run = RunDir(dirs[name])
        code = run_levels(name, missing, run.paired().path, None)
        if code not in (0, 3):
            return code
        run.merge(run.paired(), "p", refined=False)
    return 0


def budget_clock(total_s: float, began: float) -> Callable[[], float | None]:
    """What is left of a time budget started at ``began`` (monotonic); None without a budget."""
    return (lambda: total_s - (time.monotonic() - began)) if total_s else (lambda: None)
