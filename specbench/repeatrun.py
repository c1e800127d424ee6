"""compare --repeats N: every ladder N times, in alternating order, and the report over the repeats.

Why: measured once, all of the baseline and then all of the speculative server, any drift of the machine over
the run (a GPU warming up or throttling, a neighbour starting) reads as a difference between the servers.
Here repeat 1 runs the configurations in the order given, repeat 2 in the reverse order, and so on (A B, B A,
A B, ...: a steady drift pulls the repeats' ratios one way and the other; with an odd count, one order once more,
the answer weighs the two orders equally, ``analysis.stats.repeats.combine_ratios``), with the same settings and
prompt order in every repeat. By default (``--interleave level``) each level is one short Locust run, and a
level's repeats all run before the next level starts, so a pair's two measures are minutes apart at most; with
``--interleave ladder`` (and in a sweep, whose servers restart for every run) whole ladders alternate. Repeat
1's run directories are ``OUT/NAME`` as in one pass; repeat R's are ``OUT/repeat-R/NAME``; a level run on its
own is merged into them (``RunDir.merge``). The report of repeat 1 is written as always; the repeats' own answer
(``analysis.verdicts.repeats``) leads report.md and the terminal, and goes to ``OUT/repeats.json``.
Refinement and the levels' top-up are off: every repeat measures the same levels. A server that changes between
repeats, or a budget share the runs have outgrown, stops the job before the next run (``specbench.repeatguard``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.contract.redact import redact
from specbench.contract.rundir import RunDir
from specbench.contract.runformat import RunFormatError
from specbench.contract.schema import read_meta
from specbench.contract.servertext import markdown_text
from specbench.contract.settings import duration_arg
from specbench.endcheck import END_CHECK_JSON
from specbench.locustfiles.serverinfo import identify
from specbench.repeatguard import identity_changes, run_need_s, run_share
from specbench.shapes.budget import fmt_duration

if TYPE_CHECKING:
    from specbench.compare import CompareJob
    from specbench.preflight import Preflight

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
    """Every configuration's ladder ``job.repeats`` times in alternating order, then both reports. A server whose
    identity changed, or a budget share too short for the next run, stops the job (``specbench.repeatguard``):
    the reports cover what was measured before, say why they stop there, and the job exits 2."""
    from specbench.compare import EXIT_TOO_MANY_ERRORS, write_report

    job.out.mkdir(parents=True, exist_ok=True)
    for stale in (REPEATS_JSON, END_CHECK_JSON):  # an earlier job's, not this one's
        (job.out / stale).unlink(missing_ok=True)
    api = job.common_api()
    pres = {job.baseline_name: job.baseline, **dict(job.specs)}
    names = list(pres)
    runs = plan(names, job.repeats, job.levels, job.interleave == "level" and len(job.levels) > 1)
    what = "each level" if runs[0].levels is not None else "each ladder"
    print(f"{job.repeats} repeats, {what} in alternating order ({' '.join(r.name for r in runs[:2 * len(names)])}"
          " ...); refinement off: every repeat measures the same levels", flush=True)
    ended = _run_plan(job, api, pres, runs)
    if ended.failed:
        return ended.failed
    interrupted, stopped = ended.interrupted, ended.stopped
    if stopped:
        print(redact(f"specbench: error: {stopped}"), file=sys.stderr, flush=True)
    print("Repeat 1 alone (each configuration measured once, in the order given; the answer over the repeats "
          "follows):", flush=True)
    code = write_report(job.out, (job.baseline_name, job.out / job.baseline_name),
                        [(name, job.out / name) for name, _ in job.specs], interrupted, job.verbose)
    if code in (0, 130):
        write_repeats(job.out, job.baseline_name, names, job.repeats, stopped)
    if stopped:
        return 130 if interrupted else 2
    return EXIT_TOO_MANY_ERRORS if code == 0 and ended.too_many_errors else code


@dataclass
class PlanEnd:
    """How the plan's runs ended: ``failed``, a run's exit code that stops the job with no report (0: none)."""

    interrupted: bool = False
    too_many_errors: bool = False
    stopped: str = ""  # why the job stopped before the plan's end, in one line (#70); '' when it did not
    failed: int = 0


def _run_plan(job: CompareJob, api: str, pres: dict[str, Preflight], runs: Sequence[OneRun]) -> PlanEnd:
    """The runs in order, each after its checks: its share of the budget, and its server's identity (#70)."""
    from specbench.compare import EXIT_TOO_MANY_ERRORS

    began = time.monotonic()
    ended = PlanEnd()
    started: set[tuple[int, str]] = set()
    seen: dict[str, Mapping[str, Any]] = {}  # each server as asked before its first run: the one every run must meet
    for n, one in enumerate(runs):
        share, ended.stopped = _before(job, pres[one.name], one, (began, n, len(runs)), seen)
        if ended.stopped:
            break
        code, ended.stopped = _one_run(job, api, pres[one.name], one, share, seen[one.name],
                                       first=(one.repeat, one.name) not in started)
        started.add((one.repeat, one.name))
        ended.interrupted = code == 130
        if ended.interrupted or ended.stopped:
            break
        if code == EXIT_TOO_MANY_ERRORS:
            ended.too_many_errors = True
        elif code:
            ended.failed = code
            break
    return ended


def _before(job: CompareJob, pre: Preflight, one: OneRun, clock: tuple[float, int, int],
            seen: dict[str, Mapping[str, Any]]) -> tuple[float | None, str]:
    """The run's share of the budget (None: no budget; ``clock``: the plan's start, this run's index, its runs)
    and why the job stops before it ('' to go on). The server is asked who it is, as preflight asks; its first
    answer (after preflight's probe request: a llama.cpp slot shows its speculative settings only once it has
    served one) is kept in ``seen`` as the one every later run must meet."""
    began, n, runs = clock
    share = None
    if job.time_budget_s:
        share = run_share(job.time_budget_s - (time.monotonic() - began), runs - n)
        short = _short_share(one, len(job.levels), share, n, runs)
        if short:
            return share, short
        print(f"{one.name}, repeat {one.repeat}: {fmt_duration(share)} of the budget", flush=True)
    now = identify(pre.identity.url, api_key=job.api_key).to_json()
    return share, _changed(pre.identity.url, one, seen.setdefault(one.name, now), now, "before")


def _short_share(one: OneRun, levels: int, share: float, n: int, runs: int) -> str:
    """Why the job stops before this run ('' when its share is enough): a machine slower than ``RUN_COST_S``
    allows has eaten the budget, and the run's child would refuse its share (no report) or measure nothing.
    ``levels``: the ladder's, which a run of the whole ladder walks."""
    need = run_need_s(len(one.levels) if one.levels is not None else levels)
    if share >= need:
        return ""
    return (f"--time-budget: {one.name}, repeat {one.repeat} would get {max(0.0, share):.2f} s, less than the "
            f"{need:.2f} s a run needs (the runs so far took longer than their shares); stopped before it, after "
            f"{n} of {runs} runs: give a longer --time-budget or fewer repeats")


def _changed(url: str, one: OneRun, first: Mapping[str, Any], now: Mapping[str, Any] | None, when: str) -> str:
    """Why the job stops at this run ('' when ``now``, the server as asked before the run or as the run's own
    meta.json recorded it at its start, is ``first``, as it was before its first run:
    ``repeatguard.identity_changes``)."""
    changes = identity_changes(first, now) if now is not None else []
    if not changes:
        return ""
    return (f"{one.name}: the server at {url} changed {when} repeat {one.repeat} "
            f"({'; '.join(changes)}); stopped: repeats of different servers are not one comparison, so the report "
            "covers only what was measured before the change")


def _one_run(job: CompareJob, api: str, pre: Preflight, one: OneRun, share: float | None,
             server: Mapping[str, Any], *, first: bool) -> tuple[int, str]:
    """One run of the plan: a whole ladder into its repeat's run directory; or one level, into it where it is
    the run's first, else into its ``paired`` folder and then merged into it (``RunDir.merge``, not marked
    refined). Returns its exit code (130: interrupted) and, where its meta.json names another server than
    preflight met, why the job stops: that run is then dropped (its files removed, never merged)."""
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
    outcome = run_ladder(one.name, pre.identity.url, target, api=api, suite_config=job.suite_config,
                         processes=job.processes, extra=job.run_options(one.name, options), flush=job.flush_cache,
                         api_key=job.api_key, verbose=job.verbose)
    stopped = _changed(pre.identity.url, one, server, _recorded_server(RunDir(target)), "during")
    if stopped:
        RunDir(target).clear()  # nothing of another server reaches a figure; Locust's log stays
    elif target != run_dir and RunDir(target).has_records():
        RunDir(run_dir).merge(RunDir(target), f"l{one.levels[0]:g}" if one.levels else "l", refined=False)
    return (130 if outcome.interrupted else outcome.returncode), stopped


def _recorded_server(run: RunDir) -> Mapping[str, Any] | None:
    """The server as the run's meta.json recorded it at the run's start; None for a run without one (it failed
    before writing it) or with one that does not read: it recorded no other server."""
    if not run.has_meta():
        return None
    try:
        return read_meta(run.meta_file).server
    except RunFormatError:
        return None


def complete_repeats(out: Path, names: Sequence[str], repeats: int) -> list[int]:
    """The repeats in which every configuration recorded requests (an interrupted job's last may not have)."""
    return [r for r in range(1, repeats + 1) if all(RunDir(repeat_dir(out, r, n)).has_records() for n in names)]


def write_repeats(out: Path, baseline_name: str, names: Sequence[str], repeats: int, stopped: str = "") -> None:
    """The answer over the repeats: printed, at the head of report.md, and in repeats.json; ``stopped``: why the
    job stopped before its plan's end, said above it (and in repeats.json), so no reader takes it for the whole."""
    from specbench.analysis import compare_many, load_run
    from specbench.analysis.reporting.files import add_report_section, write_whole
    from specbench.analysis.verdicts.repeats import compare_repeats, table_lines, to_json, verdict_lines

    done = complete_repeats(out, names, repeats)
    if len(done) >= 2:
        specs = [n for n in names if n != baseline_name]
        per_repeat = [compare_many(load_run(repeat_dir(out, r, baseline_name)),
                                   [(n, load_run(repeat_dir(out, r, n))) for n in specs],
                                   baseline_name=baseline_name) for r in done]
        rc = compare_repeats(per_repeat)
        lines = verdict_lines(rc)
        print("\n" + "\n".join(redact(line) for line in lines), flush=True)
        note = (f"The tables below are repeat 1's alone (each configuration measured once, in the order given); the "
                f"answer above is over repeats {', '.join(map(str, done))}, run in alternating order.")
        section = "\n".join(["## Over the repeats", "", *(f"- {line}" for line in lines), "", *table_lines(rc), "",
                             note, ""])
        add_report_section(out / "report.md", section, first=True)
        write_whole(out / REPEATS_JSON, json.dumps({**to_json(rc), **({"stopped": stopped} if stopped else {})},
                                                   indent=1))
        print(f"repeats: {out / REPEATS_JSON}", flush=True)
    else:
        print(f"repeats: only {len(done)} repeat(s) recorded by every configuration; no answer over repeats",
              flush=True)
    if stopped:
        add_report_section(out / "report.md", "\n".join([
            "## Stopped before the plan's end", "", f"- {markdown_text(stopped, None)}", "",
            f"Repeats recorded by every configuration: {len(done)} of the {repeats} asked for; what is below was "
            "measured before the job stopped.", ""]), first=True)
