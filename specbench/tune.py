"""``specbench tune FILE``: measure the baseline and every speculative depth on one ladder, choose a depth per
load, and write the server setting that runs it (``OUT/tuned/``).

It is a sweep (``specbench.sweep``): each configuration's server is started, checked, measured and stopped in
turn (the baseline, then ``k1``, ``k2``, ...), with no refinement, so every depth is measured at the same levels.
``--time-budget`` is planned over every run from the start, the validation's included (``tunebudget``): each
ladder gets an equal share once the time outside the ladders (server starts count) is set aside. The choice and
the schedule are ``analysis.verdicts.tune``; the files ``tuneout``.
``--validate`` then starts the baseline, the best single depth and the tuned schedule again, measures them in one
more sweep (``OUT/validate/``) and says level by level whether the schedule delivered what was predicted.

A run that failed a step beyond --max-error-rate, or an interrupt, makes the tune partial: ``tuned/`` then says
so and holds nothing to launch, and the exit code is 3 (130 for the interrupt), never 0. A validation that failed
or was interrupted writes no validation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from specbench.analysis.reporting.tune_report import depth_name, schedule_text
from specbench.compare import write_report
from specbench.contract.rundir import RunDir
from specbench.sweep import SweepJob, run_entry
from specbench.sweepfile import Sweep
from specbench.tunebudget import REPORT_RESERVE_S, TuneBudget
from specbench.tunefile import TUNED_NAME, TuneFile
from specbench.tuneout import TuneContext, write_tuned, write_validation

VALIDATE_DIR = "validate"
VALIDATE_RUNS = 3  # baseline, best single depth, tuned


@dataclass
class TuneJob:
    tune: TuneFile
    out: Path
    suite_config: str | None = None
    processes: int = 0
    api: str = "auto"
    api_key: str | None = None
    flush_cache: bool = False
    extra: list[str] = field(default_factory=list)
    verbose: bool = False
    time_budget_s: float = 0.0  # for every run together, validation included; 0: none
    validate: bool = False
    release: tuple[int, int, int] | None = None  # --vllm-release
    objective: str = "throughput"  # --objective
    floor: float = 0.95  # --throughput-floor (the energy objective)
    began: float = field(default_factory=time.monotonic)
    budget: TuneBudget = field(init=False)

    def __post_init__(self) -> None:
        self.budget = TuneBudget(self.time_budget_s, self.runs, 2 if self.validate else 1, self.began)

    @property
    def runs(self) -> int:
        return len(self.tune.sweep.entries) + (VALIDATE_RUNS if self.validate else 0)


def run_tune(job: TuneJob) -> int:
    """Measure, choose, write ``tuned/`` and (``validate``) check it; returns the exit code."""
    job.out.mkdir(parents=True, exist_ok=True)
    code, api, stopped = _measure(job, job.tune.sweep, job.out, done=0)
    if code not in (0, 3, 130):
        return code
    names = [e.name for e in job.tune.sweep.entries if not e.baseline]
    if not RunDir(job.out / "baseline").has_records():
        print(f"tuned: not written: the baseline recorded nothing ({stopped or 'see its run'})", flush=True)
        return code or 3
    report = write_report(job.out, ("baseline", job.out / "baseline"), [(n, job.out / n) for n in names],
                          code == 130, job.verbose)
    if report not in (0, 130):
        return report
    result, multi = _choose(job, names)
    if stopped:
        result = replace(result, schedule=(), best_single=None, problems=(*result.problems, stopped))
    folder, note = write_tuned(job.out, result, _context(job))
    if not result.complete:
        print(f"tuned: PARTIAL, nothing to launch: {len(result.problems)} problem(s); {folder}/README.md lists "
              "them:", flush=True)
        for problem in result.problems:
            print(f"tuned: {problem}", flush=True)
        return code or 3
    print(f"tuned: {schedule_text(result)}; best single depth {depth_name(result.best_single)} "
          f"({result.key_note})", flush=True)
    print(f"tuned: {folder} ({', '.join(p.name for p in sorted(folder.iterdir()))}); vLLM: {note}", flush=True)
    if code == 130 or not job.validate:
        return code
    if result.best_single is None or not result.schedule:
        print("validate: skipped: the tune has no schedule or no best single depth to measure it against", flush=True)
        return code
    return _validate(job, api, result, multi, folder)


def _measure(job: TuneJob, sweep: Sweep, out: Path, done: int, api: str | None = None) -> tuple[int, str, str]:
    """Every configuration of ``sweep`` in turn into ``out/NAME``; (exit code, API used, why the measuring
    stopped short: '' when every run finished). A run that failed a step goes on to the next (exit code 3)."""
    sweep_job = SweepJob(sweep, out, job.suite_config, job.processes, api or job.api, job.api_key, job.flush_cache,
                         job.extra, verbose=job.verbose, refine_levels=0,
                         time_budget_s=max(job.time_budget_s - REPORT_RESERVE_S, job.time_budget_s / 2),
                         began=job.began)
    used = api or job.api
    failed = []
    for i, entry in enumerate(sweep.entries):
        budget, start = job.budget.options(entry.name, job.runs - done - i, job.budget.reports - (done > 0))
        try:
            used, code = run_entry(entry, sweep_job, used, extra=[*budget, *job.extra])
        except KeyboardInterrupt:
            code = 130
        job.budget.finished(start)
        if code == 130:
            print(f"{entry.name}: interrupted; writing a partial report from what was recorded", flush=True)
            left = [e.name for e in sweep.entries[i + 1:]]
            return 130, used, (f"interrupted while measuring {entry.name}"
                               + (f"; never measured: {', '.join(left)}" if left else ""))
        if code not in (0, 3):
            return code, used, f"{entry.name} failed (exit code {code})"
        if code == 3:
            failed.append(entry.name)
    return (3 if failed else 0), used, ""


def _choose(job: TuneJob, names: list[str]):  # -> (TuneResult, MultiComparison); typed loosely: lazy imports
    from specbench.analysis import compare_many, load_run
    from specbench.analysis.verdicts.tune import DEFAULT_MAX_ERROR_RATE, tune_depths

    recorded = [n for n in names if RunDir(job.out / n).has_records()]
    base = load_run(job.out / "baseline")
    runs = [(n, load_run(job.out / n)) for n in recorded]
    multi = compare_many(base, runs, baseline_name="baseline")
    limits = [r.meta.settings.max_error_rate for r in (base, *(run for _, run in runs)) if r.meta.settings]
    result = tune_depths(multi, job.tune.depths, upper=job.tune.max_batch, objective=job.objective, floor=job.floor,
                         max_error_rate=min(limits, default=DEFAULT_MAX_ERROR_RATE), ladder=base.meta.ladder)
    return result, multi


def _context(job: TuneJob) -> TuneContext:
    spec_dirs = [job.out / e.name for e in job.tune.sweep.entries if not e.baseline]
    meta = next((m for d in spec_dirs if (m := RunDir(d).meta_json()) is not None), {})
    server = dict(meta.get("server") or {})
    ladder = tuple(int(c) for c in meta.get("ladder") or ())
    server.pop("url", None)  # where it ran says nothing about how to launch it
    return TuneContext(job.tune.source, server, ladder, job.tune.base_config, job.release, job.tune.max_batch)


def _validate(job: TuneJob, api: str, result, multi, folder: Path) -> int:
    from specbench.analysis import compare_many, load_run
    from specbench.analysis.verdicts.tune import validate_schedule

    fixed = job.tune.name_of(result.best_single)
    sweep = job.tune.validation_sweep(result.best_single, result.schedule)
    out = job.out / VALIDATE_DIR
    print(f"validate: the baseline, the best single depth ({fixed}) and the tuned schedule, one after another, "
          f"into {out}", flush=True)
    code, _, stopped = _measure(job, sweep, out, done=len(job.tune.sweep.entries), api=api)
    if code not in (0, 3, 130):
        return code
    if code != 0:
        why = stopped or "a run failed a step beyond --max-error-rate"
        print(f"validate: {why}; no validation written ({folder} is the tune's, measured whole)", flush=True)
        return code
    report = write_report(out, ("baseline", out / "baseline"), [(fixed, out / fixed), (TUNED_NAME, out / TUNED_NAME)],
                          False, job.verbose, schedules=(TUNED_NAME,))
    if report not in (0, 130) or not RunDir(out / TUNED_NAME).has_records():
        return report or code
    check = compare_many(load_run(out / "baseline"),
                         [(fixed, load_run(out / fixed)), (TUNED_NAME, load_run(out / TUNED_NAME))],
                         baseline_name="baseline", schedules=(TUNED_NAME,))
    levels = validate_schedule(result, multi, check, TUNED_NAME, fixed)
    print(write_validation(folder, levels, fixed), flush=True)
    return code


__all__ = ["VALIDATE_DIR", "TuneJob", "run_tune"]
