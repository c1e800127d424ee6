"""compare --repeats N: every ladder N times, in alternating order, and the report over the repeats.

Why: measured once, all of the baseline and then all of the speculative server, any drift of the machine over
the run (a GPU warming up or throttling, a neighbour starting) reads as a difference between the servers.
Here repeat 1 runs the configurations in the order given, repeat 2 in the reverse order, and so on (A B, B A,
A B, ...: each level's measures of both sides are balanced around the same moments), with the same settings and
prompt order in every repeat. Repeat 1's run directories are ``OUT/NAME`` as in one pass; repeat R's are
``OUT/repeat-R/NAME``. The report of repeat 1 is written as always; the repeats' own answer
(``analysis.verdicts.repeats``) leads report.md and the terminal, and goes to ``OUT/repeats.json``.
Refinement and the levels' top-up are off: every repeat measures the same levels.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
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


def run_repeats(job: CompareJob) -> int:
    """Every configuration's ladder ``job.repeats`` times in alternating order, then both reports."""
    from specbench.compare import EXIT_TOO_MANY_ERRORS, run_ladder, write_report

    job.out.mkdir(parents=True, exist_ok=True)
    for stale in (REPEATS_JSON, END_CHECK_JSON):  # an earlier job's, not this one's
        (job.out / stale).unlink(missing_ok=True)
    api = job.common_api()
    urls = {job.baseline_name: job.baseline.identity.url, **{name: pre.identity.url for name, pre in job.specs}}
    names = list(urls)
    order = running_order(names, job.repeats)
    print(f"{job.repeats} repeats, each ladder in alternating order ({' '.join(n for _r, n in order[:2 * len(names)])}"
          " ...); refinement off: every repeat measures the same levels", flush=True)
    began = time.monotonic()
    interrupted = too_many_errors = False
    for n, (repeat, name) in enumerate(order):
        budget: list[str] = []
        if job.time_budget_s:
            share = max(1.0, (job.time_budget_s - (time.monotonic() - began)) / (len(order) - n))
            budget = ["--time-budget", duration_arg(share)]
            print(f"{name}, repeat {repeat}: {fmt_duration(share)} of the budget", flush=True)
        run_dir = repeat_dir(job.out, repeat, name)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        outcome = run_ladder(name, urls[name], run_dir, api=api, suite_config=job.suite_config,
                             processes=job.processes, extra=job.run_options(name, [*budget, *job.extra]),
                             flush=job.flush_cache, api_key=job.api_key, verbose=job.verbose)
        if outcome.interrupted:
            interrupted = True
            break
        if outcome.returncode == EXIT_TOO_MANY_ERRORS:
            too_many_errors = True
        elif outcome.returncode:
            return outcome.returncode
    print("Repeat 1 alone (each configuration measured once, in the order given; the answer over the repeats "
          "follows):", flush=True)
    code = write_report(job.out, (job.baseline_name, job.out / job.baseline_name),
                        [(name, job.out / name) for name, _ in job.specs], interrupted, job.verbose)
    if code in (0, 130):
        write_repeats(job.out, job.baseline_name, names, job.repeats)
    return EXIT_TOO_MANY_ERRORS if code == 0 and too_many_errors else code


def complete_repeats(out: Path, names: Sequence[str], repeats: int) -> list[int]:
    """The repeats in which every configuration recorded requests (an interrupted job's last may not have)."""
    return [r for r in range(1, repeats + 1) if all(RunDir(repeat_dir(out, r, n)).has_records() for n in names)]


def write_repeats(out: Path, baseline_name: str, names: Sequence[str], repeats: int) -> None:
    """The answer over the repeats: printed, at the head of report.md, and in repeats.json."""
    from specbench.analysis import compare_many, load_run
    from specbench.analysis.reporting.files import OutputWriteError, describe, write_whole
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
    report = out / "report.md"
    try:
        text = report.read_text(encoding="utf-8")
    except OSError as exc:
        raise OutputWriteError(f"cannot read {report}: {describe(exc)}") from None
    head, sep, rest = text.partition("\n## ")
    write_whole(report, f"{head.rstrip()}\n\n{section}\n## {rest}" if sep else f"{text.rstrip()}\n\n{section}")
    write_whole(out / REPEATS_JSON, json.dumps(to_json(rc), indent=1))
    print(f"repeats: {out / REPEATS_JSON}", flush=True)
