"""After a one-pass comparison: each server's first level measured again, to tell whether it changed during the run.

Why: measured once, all of the baseline and then all of the speculative server, a server (or the machine under
it) that warmed up, throttled or gained a neighbour during the run makes its later levels look better or worse
than they are, and the comparison cannot see it. One short step of the ladder's first level at the end of the
job, on each server, compared with that level's step at the start (``analysis.stats.repeats.drift_check``: the
two throughputs against their windows' intervals, and at least ``DRIFT_MIN_CHANGE`` apart) says whether the
server moved. The step runs into ``RUN/endcheck`` with the job's settings and is never merged into the run.

On by default where a ``--time-budget`` leaves room for it after the ladders (the first step's own length and a
run's start-up, per server) and every level of every ladder has a measured window: a level left short gets the
budget's rest first (``specbench.topup``), and a drift check is no reason to leave it without a figure.
``--end-check`` runs it regardless, ``--no-end-check`` never. ``--repeats`` has its
own, stronger test of drift and runs none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.contract.policy import DRAIN_RESERVE
from specbench.contract.redact import redact
from specbench.contract.rundir import RunDir
from specbench.refine import ROUND_OVERHEAD_S, LevelRunner
from specbench.shapes.budget import fmt_duration
from specbench.topup import short_levels

END_CHECK_JSON = "endcheck.json"


@dataclass(frozen=True)
class FirstLevel:
    level: float  # the concurrency, or the request rate in rate mode
    seconds: float  # how long its step ran in the ladder (warm-up and window)


def first_level(run_dir: Path) -> FirstLevel | None:
    """The ladder's first step: its level and length (None: no step recorded)."""
    steps = RunDir(run_dir).read().steps
    if not steps:
        return None
    step = steps[0]
    level = step.get("target_rate") or step["target_c"]
    return FirstLevel(float(level), max(1.0, float(step["end_s"]) - float(step["start_s"])))


def end_check_need_s(order: Sequence[str], dirs: dict[str, Path]) -> float:
    """About how long the end checks of these runs take: each first step's length and a run's start-up."""
    return sum(f.seconds + ROUND_OVERHEAD_S for name in order if (f := first_level(dirs[name])) is not None)


def run_end_checks(order: Sequence[str], dirs: dict[str, Path], run_levels: LevelRunner,
                   time_left: Callable[[], float | None], forced: bool) -> int:
    """Each server's first level once more, where the budget holds every one (or ``forced``). Returns a failed
    run's exit code, else 0."""
    firsts = {name: first for name in order if (first := first_level(dirs[name])) is not None}
    if not firsts:
        return 0
    if not forced and (short := [f"{name} {', '.join(f'C={c}' for c in levels)}" for name in order
                                 if (levels := short_levels(dirs[name]))]):
        print(f"end check: not run ({'; '.join(short)} went without a measured window, and a level's own figure "
              "comes before a drift check; --end-check runs it anyway)", flush=True)
        return 0
    need = end_check_need_s(list(firsts), dirs)
    left = time_left()
    if not forced and (left is None or left < need):
        why = "no --time-budget" if left is None else f"{fmt_duration(max(0.0, left))} of the budget left"
        print(f"end check: not run ({why}; it needs about {fmt_duration(need)}; --end-check runs it anyway)",
              flush=True)
        return 0
    for name, first in firsts.items():
        print(f"end check: {name} measures its first level ({first.level:g}) again", flush=True)
        # As long as the first step ran, no longer: a like-for-like window, and an end check that cannot run on
        # to --max-step-time (a 46 s window on a slow server's C=1 where the start had 10 s, #76).
        share = first.seconds / (1 - DRAIN_RESERVE) + 1.0
        code = run_levels(name, [first.level], RunDir(dirs[name]).end_check().path, share)
        if code not in (0, 3):
            return code
    return 0


def judge_end_checks(out: Path, order: Sequence[str], dirs: dict[str, Path]) -> None:
    """Compare each end check with its ladder's first step: printed, added to report.md, in endcheck.json."""
    from specbench.analysis import load_run, summarize_run
    from specbench.analysis.reporting.files import add_report_section, write_whole
    from specbench.analysis.stats.repeats import drift_check, from_relative

    found: list[dict[str, Any]] = []
    for name in order:
        end_dir = RunDir(dirs[name]).end_check().path
        if not RunDir(end_dir).has_records() or not RunDir(dirs[name]).has_records():
            continue
        start_rows, end_rows = summarize_run(load_run(dirs[name])).rows, summarize_run(load_run(end_dir)).rows
        if not start_rows or not end_rows or not start_rows[0].throughput_tok_s or not end_rows[0].throughput_tok_s:
            continue
        first, again = start_rows[0], end_rows[0]
        check = drift_check([from_relative(first.throughput_tok_s, first.throughput_ci_rel),
                             from_relative(again.throughput_tok_s, again.throughput_ci_rel)])
        found.append({"config": name, "level": first.target_rate or first.target_c,
                      "start_tok_s": first.throughput_tok_s, "end_tok_s": again.throughput_tok_s,
                      "change": None if check is None else check.change,
                      "p_value": None if check is None else check.p_value,
                      "drift": bool(check is not None and check.flagged)})
    if not found:
        return
    lines = [end_check_line(f) for f in found]
    print("\n".join(redact(line) for line in lines), flush=True)
    section = "## Did the servers change during the run?\n\n" + "\n".join(f"- {line}" for line in lines)
    add_report_section(out / "report.md", section)
    write_whole(out / END_CHECK_JSON, json.dumps(found, indent=1))


def end_check_line(found: dict[str, Any]) -> str:
    """One server's end check in words."""
    head = (f"{found['config']}: the first level ({found['level']:g}) measured again at the end: "
            f"{found['end_tok_s']:.1f} tok/s against {found['start_tok_s']:.1f} at the start")
    if found["change"] is None:
        return f"{head} (no interval on one of them: not judged)"
    if found["drift"]:
        return (f"{head} ({found['change']:+.0%}): drift, the server changed during the run (beyond both windows' "
                f"intervals, p={found['p_value']:.1g}); levels measured later may be off by as much, and "
                "--repeats 3 would balance it out")
    return f"{head} ({found['change']:+.1%}): no change beyond the windows' noise"
