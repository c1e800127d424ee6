"""compare --repeats N: every ladder N times, in alternating order, and the report over the repeats.

Why: measured once, all of the baseline and then all of the speculative server, any drift of the machine over
the run (a GPU warming up or throttling, a neighbour starting) reads as a difference between the servers.
Here repeat 1 runs the configurations in the order given, repeat 2 in the reverse order, and so on (A B, B A,
A B, ...: each level's measures of both sides are balanced around the same moments), with the same settings and
prompt order in every repeat. By default (``--interleave level``) each level is one short Locust run, and a
level's repeats all run before the next level starts, so a pair's two measures are minutes apart at most; with
``--interleave ladder`` (and in a sweep, whose servers restart for every run) whole ladders alternate. Repeat
1's run directories are ``OUT/NAME`` as in one pass; repeat R's are ``OUT/repeat-R/NAME``; a level run on its
own is merged into them (``RunDir.merge``). The report of repeat 1 is written as always; the repeats' own answer
(``analysis.verdicts.repeats``) leads report.md and the terminal, and goes to ``OUT/repeats.json``.
Refinement and the levels' top-up are off: every repeat measures the same levels.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.contract.redact import redact
from specbench.contract.rundir import RunDir
from specbench.contract.settings import duration_arg
from specbench.endcheck import END_CHECK_JSON
from specbench.shapes.budget import fmt_duration

if TYPE_CHECKING:
    from specbench.compare import CompareJob

REPEAT_PREFIX = "repeat-"
REPEATS_JSON = "repeats.json"
MAX_REPEATS = 20


def repeat_dir(out: Path, repeat: int, name: str) -> Path:
    """Where a configuration's run of one repeat goes (repeat 1: ``OUT/NAME``, as a one-pass comparison)."""
    return out / name if repeat == 1 else out / f"{REPEAT_PREFIX}{repeat}" / name


def running_order(names: Sequence[str], repeats: int) -> list[tuple[int, str]]:
    """(repeat, name) in the order they run: as given in odd repeats, reversed in even ones."""
    return [(r, name) for r in range(1, repeats + 1) for name in (names if r % 2 else list(reversed(names)))]


@dataclass(frozen=True)
class OneRun:
    """One Locust run of the plan: a configuration's whole ladder, or one level of it, in one repeat."""

    repeat: int
    name: str
    levels: tuple[float, ...] | None  # None: the whole ladder


def plan(names: Sequence[str], repeats: int, levels: Sequence[float], per_level: bool) -> list[OneRun]:
    """The runs in the order they go: per level (each level's repeats alternate before the next level starts:
    A B, B A, A B at the first level, then at the second, ...) or per ladder (A B, B A, ... of whole ladders)."""
    if not per_level:
        return [OneRun(r, n, None) for r, n in running_order(names, repeats)]
    return [OneRun(r, n, (level,)) for level in levels for r, n in running_order(names, repeats)]


def run_repeats(job: CompareJob) -> int:
    """Every configuration's ladder ``job.repeats`` times in alternating order, then both reports."""
    from specbench.compare import EXIT_TOO_MANY_ERRORS, write_report

    job.out.mkdir(parents=True, exist_ok=True)
    for stale in (REPEATS_JSON, END_CHECK_JSON):  # an earlier job's, not this one's
        (job.out / stale).unlink(missing_ok=True)
    api = job.common_api()
    urls = {job.baseline_name: job.baseline.identity.url, **{name: pre.identity.url for name, pre in job.specs}}
    names = list(urls)
    runs = plan(names, job.repeats, job.levels, job.interleave == "level" and len(job.levels) > 1)
    what = "each level" if runs[0].levels is not None else "each ladder"
    print(f"{job.repeats} repeats, {what} in alternating order ({' '.join(r.name for r in runs[:2 * len(names)])}"
          " ...); refinement off: every repeat measures the same levels", flush=True)
    began = time.monotonic()
    interrupted = too_many_errors = False
    started: set[tuple[int, str]] = set()
    for n, one in enumerate(runs):
        share = None
        if job.time_budget_s:
            share = max(1.0, (job.time_budget_s - (time.monotonic() - began)) / (len(runs) - n))
            print(f"{one.name}, repeat {one.repeat}: {fmt_duration(share)} of the budget", flush=True)
        code = _one_run(job, api, urls[one.name], one, share, first=(one.repeat, one.name) not in started)
        started.add((one.repeat, one.name))
        if code == 130:
            interrupted = True
            break
        if code == EXIT_TOO_MANY_ERRORS:
            too_many_errors = True
        elif code:
            return code
    print("Repeat 1 alone (each configuration measured once, in the order given; the answer over the repeats "
          "follows):", flush=True)
    code = write_report(job.out, (job.baseline_name, job.out / job.baseline_name),
                        [(name, job.out / name) for name, _ in job.specs], interrupted, job.verbose)
    if code in (0, 130):
        write_repeats(job.out, job.baseline_name, names, job.repeats)
    return EXIT_TOO_MANY_ERRORS if code == 0 and too_many_errors else code


def _one_run(job: CompareJob, api: str, url: str, one: OneRun, share: float | None, *, first: bool) -> int:
    """One run of the plan: a whole ladder into its repeat's run directory; or one level, into it where it is
    the run's first, else into its ``paired`` folder and then merged into it (``RunDir.merge``, not marked
    refined). Returns its exit code (130: interrupted)."""
    from specbench.compare import run_ladder
    from specbench.refine import added_level_options

    run_dir = repeat_dir(job.out, one.repeat, one.name)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    if one.levels is None:
        budget = ["--time-budget", duration_arg(share)] if share else []
        options = [*budget, *job.extra]
    else:
        options = added_level_options(one.levels, share, rate_mode=job.rate_mode, extra=job.extra)
    target = run_dir if first or one.levels is None else RunDir(run_dir).paired().path
    outcome = run_ladder(one.name, url, target, api=api, suite_config=job.suite_config, processes=job.processes,
                         extra=job.run_options(one.name, options), flush=job.flush_cache, api_key=job.api_key,
                         verbose=job.verbose)
    if target != run_dir and RunDir(target).has_records():
        RunDir(run_dir).merge(RunDir(target), f"l{one.levels[0]:g}" if one.levels else "l", refined=False)
    return 130 if outcome.interrupted else outcome.returncode


def complete_repeats(out: Path, names: Sequence[str], repeats: int) -> list[int]:
    """The repeats in which every configuration recorded requests (an interrupted job's last may not have)."""
    return [r for r in range(1, repeats + 1) if all(RunDir(repeat_dir(out, r, n)).has_records() for n in names)]


def write_repeats(out: Path, baseline_name: str, names: Sequence[str], repeats: int) -> None:
    """The answer over the repeats: printed, at the head of report.md, and in repeats.json."""
    from specbench.analysis import compare_many, load_run
    from specbench.analysis.reporting.files import add_report_section, write_whole
    from specbench.analysis.verdicts.repeats import compare_repeats, table_lines, to_json, verdict_lines

    done = complete_repeats(out, names, repeats)
    if len(done) < 2:
        print(f"repeats: only {len(done)} repeat(s) recorded by every configuration; no answer over repeats",
              flush=True)
        return
    specs = [n for n in names if n != baseline_name]
    per_repeat = [compare_many(load_run(repeat_dir(out, r, baseline_name)),
                               [(n, load_run(repeat_dir(out, r, n))) for n in specs], baseline_name=baseline_name)
                  for r in done]
    rc = compare_repeats(per_repeat)
    lines = verdict_lines(rc)
    print("\n" + "\n".join(redact(line) for line in lines), flush=True)
    note = (f"The tables below are repeat 1's alone (each configuration measured once, in the order given); the "
            f"answer above is over repeats {', '.join(map(str, done))}, run in alternating order.")
    section = "\n".join(["## Over the repeats", "", *(f"- {line}" for line in lines), "", *table_lines(rc), "",
                         note, ""])
    add_report_section(out / "report.md", section, first=True)
    write_whole(out / REPEATS_JSON, json.dumps(to_json(rc), indent=1))
    print(f"repeats: {out / REPEATS_JSON}", flush=True)
