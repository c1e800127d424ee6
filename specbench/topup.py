"""After the ladders and refinement: the budget's unused time goes back to levels a ladder left unmeasured (#61).

A compare with ``--time-budget`` keeps a share (``REFINE_SHARE``) to pin a crossover. Where nothing crosses,
refinement adds no level and that time would go unused while a top level had no window, or a window in which
not one request finished. Here each server measures those levels again, in one short ladder of just them with the
job's settings, into ``RUN/remeasured`` and merged into the run like a paired level (``RunDir.merge``); the
analysis then reads the later, measured step for the level (``RunSummary.row_at``) and drops the superseded one
(``summary.superseded``). Levels that still have no finished request are named in one line, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from specbench.contract.rundir import RunDir
from specbench.refine import ROUND_OVERHEAD_S, LevelRunner
from specbench.shapes.budget import fmt_duration

#: The least time worth a second try at a level: Locust's start and close, and a step's warm-up and window.
MIN_TRY_S = ROUND_OVERHEAD_S + 10.0


def short_levels(run_dir: Path) -> list[int]:
    """Closed-loop ladder levels of this run with no measured window, or a window no request finished in."""
    from specbench.analysis import load_run, summarize_run

    if not RunDir(run_dir).has_records():
        return []
    run = load_run(run_dir)
    summary = summarize_run(run)
    levels = sorted({r.target_c for r in summary.rows if r.target_rate is None})
    return [c for c in levels if (row := summary.row_at(c)) is None or row.requests_ok == 0]


def top_up(order: Sequence[str], dirs: dict[str, Path], run_levels: LevelRunner,
           time_left: Callable[[], float | None]) -> int:
    """Measure again, on each server, the levels its ladder left short, within what is left of the budget; print
    what it did and one line naming the levels still short. Returns a failed run's exit code, else 0."""
    short = {name: levels for name in order if (levels := short_levels(dirs[name]))}
    if not short:
        return 0
    for n, name in enumerate([name for name in order if name in short]):
        left = time_left()
        if left is None:
            break  # no budget: the ladder had all the time it asked for
        share = left / (len(short) - n)
        if share < MIN_TRY_S:
            break
        at = ", ".join(f"C={c}" for c in short[name])
        print(f"{name}: measuring {at} again with {fmt_duration(share)} of the budget that crossover refinement "
              "did not use (the ladder left them without a finished request)", flush=True)
        run = RunDir(dirs[name])
        code = run_levels(name, short[name], run.remeasured().path, share)
        if code not in (0, 3):
            return code
        run.merge(run.remeasured(), "m", refined=False)
    still = [f"{name} {', '.join(f'C={c}' for c in levels)}" for name in order if (levels := short_levels(dirs[name]))]
    if still:
        left = time_left()
        spare = f"{fmt_duration(max(0.0, left))} of the budget was left" if left is not None else "no time budget"
        print(f"no finished request in a measured window at {'; '.join(still)} ({spare}; a longer --time-budget or "
              "--max-step-time gives them one)", flush=True)
    return 0
