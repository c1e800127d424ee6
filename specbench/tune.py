"""``specbench tune FILE``: measure the baseline and every speculative depth on one ladder, choose a depth per
load, and write the server setting that runs it (``OUT/tuned/``).

It is a sweep (``specbench.sweep``): each configuration's server is started, checked, measured and stopped in
turn (the baseline, then ``k1``, ``k2``, ...), with no refinement, so every depth is measured at the same levels.
``--time-budget`` is shared as it goes: each run gets an equal part of what is left when it starts (server
starts count against it). The choice and the schedule are ``analysis.verdicts.tune``; the files ``tuneout``.
``--validate`` then starts the baseline, the best single depth and the tuned schedule again, measures them in one
more sweep (``OUT/validate/``) and says level by level whether the schedule delivered what was predicted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from specbench.analysis.reporting.tune_report import depth_name, schedule_text
from specbench.compare import write_report
from specbench.contract.rundir import RunDir
from specbench.sweep import SweepJob, run_entry
from specbench.sweepfile import Sweep
from specbench.tunefile import TUNED_NAME, TuneFile
from specbench.tuneout import TuneContext, write_tuned, write_validation

VALIDATE_DIR = "validate"
VALIDATE_RUNS = 3  # baseline, best single depth, tuned
# Of a --time-budget, kept for what follows the last run: the reports and the choice (10 s over a 10-minute budget
# on 2 cores without it, benchmarks/bench_tune.py).
REPORT_RESERVE_S = 20.0


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

    @property
    def runs(self) -> int:
        return len(self.tune.sweep.entries) + (VALIDATE_RUNS if self.validate else 0)


def run_tune(job: TuneJob) -> int:
    """Measure, choose, write ``tuned/`` and (``validate``) check it; returns the exit code."""
    job.out.mkdir(parents=True, exist_ok=True)
    code, api = _measure(job, job.tune.sweep, job.out, done=0)
    if code not in (0, 3, 130):
        return code
    names = [e.name for e in job.tune.sweep.entries if not e.baseline]
    report = write_report(job.out, ("baseline", job.out / "baseline"), [(n, job.out / n) for n in names],
                          code == 130, job.verbose)
    if report not in (0, 130):
        return report
    result, multi = _choose(job, names)
    folder = write_tuned(job.out, result, _context(job))
    print(f"tuned: {schedule_text(result)}; best single depth {depth_name(result.best_single)} "
          f"({result.key_note})", flush=True)
    print(f"tuned: {folder} (vllm-speculative-config.json, launch.txt, README.md, tune.json)", flush=True)
    if code == 130 or not job.validate:
        return code
    if result.best_single is None or not result.schedule:
        print("validate: skipped: the tune has no schedule or no best single depth to measure it against", flush=True)
        return code
    return _validate(job, api, result, multi, folder)


def _measure(job: TuneJob, sweep: Sweep, out: Path, done: int, api: str | None = None) -> tuple[int, str]:
    """Every configuration of ``sweep`` in turn into ``out/NAME``; (exit code, API used)."""
    sweep_job = SweepJob(sweep, out, job.suite_config, job.processes, api or job.api, job.api_key, job.flush_cache,
                         job.extra, verbose=job.verbose, refine_levels=0,
                         time_budget_s=max(job.time_budget_s - REPORT_RESERVE_S, job.time_budget_s / 2),
                         began=job.began)
    used = api or job.api
    for i, entry in enumerate(sweep.entries):
        options = [*sweep_job.budget_options(entry.name, job.runs - done - i), *job.extra]
        try:
            used, code = run_entry(entry, sweep_job, used, extra=options)
        except KeyboardInterrupt:
            code = 130
        if code == 130:
            print(f"{entry.name}: interrupted; writing a partial report from what was recorded", flush=True)
            return 130, used
        if code not in (0, 3):
            return code, used
    return 0, used


def _choose(job: TuneJob, names: list[str]):  # -> (TuneResult, MultiComparison); typed loosely: lazy imports
    from specbench.analysis import compare_many, load_run
    from specbench.analysis.verdicts.tune import tune_depths

    recorded = [n for n in names if RunDir(job.out / n).has_records()]
    multi = compare_many(load_run(job.out / "baseline"), [(n, load_run(job.out / n)) for n in recorded],
                         baseline_name="baseline")
    depth_of = {n: k for n, k in job.tune.depths.items() if n in recorded}
    return tune_depths(multi, depth_of, upper=job.tune.max_batch, objective=job.objective, floor=job.floor), multi


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
    code, _ = _measure(job, sweep, out, done=len(job.tune.sweep.entries), api=api)
    if code not in (0, 3, 130):
        return code
    report = write_report(out, ("baseline", out / "baseline"), [(fixed, out / fixed), (TUNED_NAME, out / TUNED_NAME)],
                          code == 130, job.verbose)
    if report not in (0, 130) or not RunDir(out / TUNED_NAME).has_records():
        return report or code
    check = compare_many(load_run(out / "baseline"),
                         [(fixed, load_run(out / fixed)), (TUNED_NAME, load_run(out / TUNED_NAME))],
                         baseline_name="baseline")
    levels = validate_schedule(result, multi, check, TUNED_NAME, fixed)
    print(write_validation(folder, levels, fixed), flush=True)
    return code


__all__ = ["VALIDATE_DIR", "TuneJob", "run_tune"]
