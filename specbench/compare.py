"""The comparison job: the same ladder on the baseline, then on each speculative configuration, then the report.

All runs get identical settings and the same prompt order (same prompt set, mode and seed), and the same API
(SGLang's native route only when every server is SGLang). Each run directory is ``OUT/NAME``.
Ctrl-C stops the run in progress; what was recorded is kept and a report is still written, marked partial.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import requests

from specbench.analysis.verdicts.refine import DEFAULT_REFINE_LEVELS
from specbench.config.yamlload import load_yaml
from specbench.contract.policy import DRAIN_RESERVE, MIN_STEP_SHARE_S
from specbench.contract.redact import redact
from specbench.contract.rundir import RunDir
from specbench.contract.settings import duration_arg
from specbench.endcheck import END_CHECK_JSON, end_check_need_s, judge_end_checks, run_end_checks
from specbench.exporters import with_own_exporters
from specbench.loadrun import LoadRun, execute, stop_running
from specbench.locustfiles.auth import auth_headers
from specbench.locustfiles.guards import EXIT_TOO_MANY_ERRORS
from specbench.locustfiles.httpsession import new_session
from specbench.preflight import Preflight
from specbench.probe import PROBE_SHARE, probe_wanted, run_probe
from specbench.refine import (
    REFINE_SHARE,
    LevelRunner,
    added_level_options,
    budget_clock,
    pair_levels,
    refine_by_mode,
)
from specbench.shapes.budget import fmt_duration
from specbench.topup import short_levels, top_up

PROBE_FIT_MARGIN = 1.5  # a ladder's least step share times this, beside the probe's reserve, or no probe
EXIT_DISK = 2  # the disk refused a run's files: a user's environment, as bad input is (docs/reference/errors.md)

if TYPE_CHECKING:
    from specbench.analysis.verdicts.multi import MultiComparison


@dataclass
class CompareJob:
    """The baseline and the configurations to compare with it (``specs``: (name, preflight), in order)."""

    baseline: Preflight
    specs: list[tuple[str, Preflight]]
    out: Path
    suite_config: str | None = None
    processes: int = 0
    flush_cache: bool = False
    api_key: str | None = None
    extra: list[str] = field(default_factory=list)
    time_budget_s: float = 0.0  # for both runs together; 0: none
    baseline_name: str = "baseline"
    verbose: bool = False  # Locust's own output on the terminal too (always in each run's locust.log)
    refine_levels: int = DEFAULT_REFINE_LEVELS  # extra levels per crossover after the ladders; 0: none (#27)
    stop_after_saturation: int = -1  # the validated --stop-after-saturation (flag or profile); -1: off (#27)
    rate_mode: bool = False  # --rate-ladder: refinement adds rates around each capacity under the SLO (#27)
    gpu_metrics: dict[str, str] = field(default_factory=dict)  # run name -> its own exporters (#40)
    repeats: int = 1  # --repeats: every ladder this many times in alternating order (``specbench.repeatrun``)
    levels: list[float] = field(default_factory=list)  # the ladder's levels (rates in rate mode), for --repeats
    interleave: str = "level"  # --repeats: alternate each level's runs ("level") or whole ladders ("ladder")
    end_check: bool | None = None  # the first level again at the end (``specbench.endcheck``); None: if budgeted
    equivalence_probe: bool = False  # --equivalence-probe: the paired output-equivalence probe last (specbench.probe)

    def run_options(self, name: str, extra: list[str]) -> list[str]:
        """A run's Locust options: ``extra`` with the run's own ``--gpu-metrics`` where it has them (#40)."""
        return with_own_exporters(extra, self.gpu_metrics.get(name))

    def common_api(self) -> str:
        """One API for every run, so all are measured the same way."""
        apis = {self.baseline.api, *(pre.api for _, pre in self.specs)}
        return apis.pop() if len(apis) == 1 else "chat"


EXIT_FLUSH_FAILED = 2  # --flush-cache asked for a cold cache and the server's flush did not happen
NO_FLUSH_ROUTE = (404, 405, 501)  # the server has no /flush_cache (only SGLang has one): nothing to flush


def flush_cache(url: str, api_key: str | None) -> tuple[bool, str]:
    """POST /flush_cache where the server has it (SGLang): (go on, what happened, in one line).

    Through the suite's one session (``locustfiles.httpsession``: no proxy or netrc from the environment,
    ``--ca-bundle``), redirects not followed. A server without the route is said and passed; any other failure
    (no connection, a redirect, 401, 5xx) stops the run, since the comparison would not start from the cold
    cache it was asked for."""
    target = url.rstrip("/") + "/flush_cache"
    try:
        with new_session() as session:
            resp = session.post(target, timeout=30, headers=auth_headers(api_key), allow_redirects=False)
            resp.close()
    except requests.RequestException as exc:
        return False, f"--flush-cache failed: POST {target} did not answer ({type(exc).__name__})"
    if resp.status_code == 200:
        return True, "flushed the server cache"
    if resp.status_code in NO_FLUSH_ROUTE:
        return True, f"--flush-cache: {target} answers HTTP {resp.status_code}; this server has no cache flush"
    return False, f"--flush-cache failed: POST {target} answered HTTP {resp.status_code}"


def with_output_check(extra: list[str], suite_config: str | None) -> list[str]:
    """Comparisons keep answers by default (``--check-output``; the Locust run keeps them only at temperature
    0), unless the command line or the suite profile says otherwise."""
    if any(arg.split("=", 1)[0] in ("--check-output", "--no-check-output") for arg in extra):
        return extra
    if suite_config:
        try:
            profile = load_yaml(Path(suite_config).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # YamlInputError and UnicodeDecodeError are ValueErrors
            profile = None  # the Locust run reports a bad profile in its own words
        if isinstance(profile, dict) and any(k in profile for k in ("check-output", "check_output")):
            return extra
    return ["--check-output", *extra]


@dataclass
class LadderOutcome:
    returncode: int  # 0 when the ladder ran; 3 when a step failed more than --max-error-rate; else failed (2: disk)
    interrupted: bool


def run_ladder(name: str, url: str, run_dir: Path, *, api: str, suite_config: str | None, processes: int,
               extra: list[str], flush: bool = False, api_key: str | None = None,
               verbose: bool = False) -> LadderOutcome:
    """One configuration's ladder into its run directory, labelled with its name."""
    if flush:
        flushed, said = flush_cache(url, api_key)
        if not flushed:
            print(redact(f"specbench: error: {name}: {said}; stopping (the runs would not start from a cold cache)"),
                  file=sys.stderr, flush=True)
            return LadderOutcome(EXIT_FLUSH_FAILED, False)
        print(redact(f"{name}: {said}"), flush=True)
    print(redact(f"{name}: ladder against {url} -> {run_dir}"), flush=True)
    # "--overwrite": the caller has claimed the output directory (refused a non-empty one without it).
    options = ["--api", api, "--overwrite", *with_output_check(extra, suite_config)]
    result = execute(LoadRun(url, name, run_dir, suite_config, processes, options, verbose=verbose))
    if result.interrupted:
        print(f"{name}: interrupted; writing a partial report from what was recorded", flush=True)
        return LadderOutcome(130, True)
    if result.disk_error is not None:  # its exit 3 was the disk: the next run and the report would meet it too
        print(f"{name}: the disk refused the run's files ({redact(result.disk_error)}); stopping here, no report",
              flush=True)
        return LadderOutcome(EXIT_DISK, False)
    if result.returncode == EXIT_TOO_MANY_ERRORS:
        print(f"{name}: a step failed more than --max-error-rate allows, or the server refused its every request; "
              "it gets no verdict", flush=True)
        return LadderOutcome(EXIT_TOO_MANY_ERRORS, False)
    if result.failed:
        log = RunDir(run_dir).log_file
        print(f"{name}: the load run failed (Locust exit code {result.returncode}; its log: {log}); stopping here",
              flush=True)
        return LadderOutcome(result.returncode, False)
    return LadderOutcome(0, False)


def write_report(out: Path, baseline: tuple[str, Path], configs: list[tuple[str, Path]], interrupted: bool,
                 verbose: bool = False, schedules: tuple[str, ...] = ()) -> int:
    """Compare what was recorded and write the report; one configuration gives the two-run report. The terminal
    gets the answer and one table (``analysis.reporting.brief``); ``verbose``, the whole report. ``schedules``:
    configurations that are no fixed setting (a tuned schedule), never called the best fixed choice."""
    from specbench.analysis import compare_many, load_run, write_outputs

    recorded = [(name, path) for name, path in configs if RunDir(path).has_records()]
    if not RunDir(baseline[1]).has_records() or not recorded:
        print("No speculative run was recorded, so there is nothing to compare.", flush=True)
        return 130 if interrupted else 2
    multi = compare_many(load_run(baseline[1]), [(name, load_run(path)) for name, path in recorded],
                         baseline_name=baseline[0], schedules=schedules)
    print(redact(terminal_text(multi, verbose)), flush=True)
    written = write_outputs(multi, out)
    write_trace_section(out, baseline, recorded)  # trace replay (#28): nothing unless the runs replayed a trace
    print(report_line(out, len(written)), flush=True)
    return 130 if interrupted else 0


def terminal_text(multi: MultiComparison, verbose: bool) -> str:
    """What a comparison shows on the terminal: the answer and one table; ``verbose``, the whole report."""
    from specbench.analysis import render_comparison, render_multi
    from specbench.analysis.reporting.brief import brief_comparison, brief_multi

    if len(multi.pairs) == 1:
        return (render_comparison if verbose else brief_comparison)(multi.pairs[0])
    return (render_multi if verbose else brief_multi)(multi)


def report_line(out: Path, files: int) -> str:
    """The last line of a comparison: where its report is."""
    return f"report: {out / 'report.md'} and {out / 'report.html'} ({files} files in {out})"


def write_trace_section(out: Path, baseline: tuple[str, Path], configs: list[tuple[str, Path]]) -> None:
    """Trace replay (#28): each configuration against the baseline on the same trace rows, printed, added to
    report.md and written to trace.json."""
    import json

    from specbench.analysis import load_run  # the records screened as every other figure's (contract.evidence)
    from specbench.analysis.reporting.files import add_report_section, write_whole
    from specbench.analysis.verdicts.trace_compare import compare_trace

    base = load_run(baseline[1])
    found = [c for name, path in configs
             if (c := compare_trace(base, load_run(path), (baseline[0], name))) is not None]
    if not found:
        return
    lines = [line for c in found for line in c.lines()]
    print("\n".join(lines), flush=True)
    section = "## Trace replay\n\n" + "\n".join(f"- {line.strip()}" for line in lines)
    add_report_section(out / "report.md", section)  # whole or not at all, as every report file (#53)
    write_whole(out / "trace.json", json.dumps([c.to_json() for c in found], indent=1))


def ladder_share(budget_s: float, runs: int, refine_levels: int, probe: bool = False) -> float:
    """The first ladder's share of a compare's --time-budget: the runs share what refinement and the equivalence
    probe leave equally."""
    return budget_s * (1 - (REFINE_SHARE if refine_levels else 0.0) - (PROBE_SHARE if probe else 0.0)) / max(1, runs)


def budget_line(budget_s: float, ladders_s: float, runs: int, probe_s: float = 0.0) -> str:
    """How a compare's --time-budget is split: the ladders' part, the equivalence probe's, and the reserve and where
    it goes (#61, #76)."""
    line = (f"time budget {fmt_duration(budget_s)} for all {runs} runs: {fmt_duration(ladders_s)} for the ladders "
            f"(each gets an equal part of what is left when it starts, about {fmt_duration(ladders_s / runs)}, and "
            "shares it between its steps)")
    if probe_s > 0:
        line += (f"; {fmt_duration(probe_s)} kept for the output-equivalence probe, which runs last with that and "
                 "whatever the phases before it leave")
    reserve = budget_s - ladders_s - probe_s
    if reserve <= 0.5:
        return line
    return (f"{line}; {fmt_duration(reserve)} kept to pin a crossover, and what that leaves goes back to levels "
            "a ladder left without a finished request")


def least_ladder_s(levels: int) -> float:
    """The share a ladder of ``levels`` levels needs: half again the least its steps need (``PROBE_FIT_MARGIN``)."""
    return PROBE_FIT_MARGIN * MIN_STEP_SHARE_S * levels / (1 - DRAIN_RESERVE)


def ladder_budget(levels: int, ladders_s: float, probe_s: float, spent_s: float, runs_left: int) -> float:
    """The next ladder's --time-budget: an equal part of what the ladders have left. Where an earlier ladder ran
    over and that part would starve its steps, it takes what it needs from the probe's reserve (the probe then
    sizes itself to what is left), not below that part."""
    share = max(1.0, (ladders_s - spent_s) / runs_left)
    if probe_s and share < least_ladder_s(levels):
        share = max(share, min(least_ladder_s(levels), (ladders_s + probe_s - spent_s) / runs_left))
    return share


def probe_planned(job: CompareJob, runs: int) -> bool:
    """Whether the job plans the equivalence probe (``specbench.probe``): asked for (``--equivalence-probe``: it
    costs a quarter of a budget, or 10-20 s of an unbudgeted job, so it is not yet on by default), closed-loop
    ladders that keep answers at temperature 0, as far as the command line says (the baseline run's meta.json
    confirms it before it runs), and,
    with a budget, whose ladders still give each step half again the least it needs beside the probe's reserve (a
    ladder that ran over leaves the next one less; a budget that tight gets no probe rather than empty steps)."""
    extra = job.extra
    if not job.equivalence_probe:
        return False
    if job.time_budget_s and job.levels and ladder_share(job.time_budget_s, runs, job.refine_levels, True) < (
            least_ladder_s(len(job.levels))):
        return False
    if job.rate_mode or job.repeats > 1 or any(a.split("=", 1)[0] in ("--no-check-output", "--trace") for a in extra):
        return False
    for n, arg in enumerate(extra):
        value = arg.split("=", 1)[1] if "=" in arg else extra[n + 1] if n + 1 < len(extra) else ""
        if arg.split("=", 1)[0] == "--temperature" and value not in ("0", "0.0"):
            return False
    return True


def run_compare(job: CompareJob) -> int:
    job.out.mkdir(parents=True, exist_ok=True)
    (job.out / "repeats.json").unlink(missing_ok=True)  # an earlier --repeats job's answer is not this one's
    (job.out / END_CHECK_JSON).unlink(missing_ok=True)  # nor an earlier job's end check
    api = job.common_api()
    order = [(job.baseline_name, job.baseline), *job.specs]
    dirs = {name: job.out / name for name, _ in order}
    interrupted = too_many_errors = False
    began = time.monotonic()
    probe = probe_planned(job, len(order))
    ladders_s = ladder_share(job.time_budget_s, 1, job.refine_levels, probe)
    probe_s = job.time_budget_s * PROBE_SHARE if probe else 0.0
    if job.time_budget_s:
        print(budget_line(job.time_budget_s, ladders_s, len(order), probe_s), flush=True)
    for n, (name, pre) in enumerate(order):
        budget: list[str] = []
        if job.time_budget_s:
            share = ladder_budget(len(job.levels), ladders_s, probe_s, time.monotonic() - began, len(order) - n)
            budget = ["--time-budget", duration_arg(share)]
            print(f"{name}: {fmt_duration(share)} of the budget", flush=True)
        outcome = run_ladder(name, pre.identity.url, dirs[name], api=api, suite_config=job.suite_config,
                             processes=job.processes, extra=job.run_options(name, [*budget, *job.extra]),
                             flush=job.flush_cache,
                             api_key=job.api_key, verbose=job.verbose)
        if outcome.interrupted:
            interrupted = True
            break
        if outcome.returncode == EXIT_TOO_MANY_ERRORS:
            too_many_errors = True  # the comparison still runs; that level gets no verdict
        elif outcome.returncode:
            return outcome.returncode
    if not interrupted:
        after = after_ladders(job, api, dirs, began, probe_s if probe else None)
        interrupted = after == 130
        if after not in (0, 3, 130):
            return after
    code = write_report(job.out, (job.baseline_name, dirs[job.baseline_name]),
                        [(name, dirs[name]) for name, _ in job.specs], interrupted, job.verbose)
    if code == 0:
        judge_end_checks(job.out, list(dirs), dirs)
    return EXIT_TOO_MANY_ERRORS if code == 0 and too_many_errors else code


def equivalence_probe(job: CompareJob, api: str, dirs: dict[str, Path], began: float) -> int:
    """The paired output-equivalence probe (``specbench.probe``), last, where the runs keep answers: with what is
    left of the budget (its reserve, and what the phases before it did not use). A failed probe run is said and
    left out (the per-level check stands alone); an interrupted one stops the job."""
    if not probe_wanted(dirs[job.baseline_name], job.rate_mode):
        return 0
    urls = {job.baseline_name: job.baseline.identity.url, **{name: pre.identity.url for name, pre in job.specs}}

    def run(name: str, levels: Sequence[int], sub: Path, options: list[str]) -> int:
        extra = [*job.run_options(name, job.extra), "--ladder", ",".join(map(str, levels)),
                 "--stop-after-saturation", "-1", *options]
        return run_ladder(name, urls[name], sub, api=api, suite_config=job.suite_config,
                          processes=job.processes, extra=extra, api_key=job.api_key, verbose=job.verbose).returncode

    order = [job.baseline_name, *(name for name, _ in job.specs)]
    code = run_probe(order, dirs, run, budget_clock(job.time_budget_s, began)(), stop_running)
    if code and code != 130:
        print(f"output-equivalence probe: a run failed (exit code {code}); the per-level check stands alone",
              flush=True)
    return 130 if code == 130 else 0


def after_ladders(job: CompareJob, api: str, dirs: dict[str, Path], began: float, probe_s: float | None = None
                  ) -> int:
    """The extra levels (``extra_levels``), each server's first level again (``specbench.endcheck``), then the
    output-equivalence probe where planned (``probe_s``: its reserve of the budget, which the phases before it
    leave alone; None: no probe)."""
    before = job if not probe_s else replace(job, time_budget_s=job.time_budget_s - probe_s)
    code = extra_levels(before, api, dirs, began)
    if not code and job.end_check is not False:
        code = run_end_checks(list(dirs), dirs, level_runner(job, api), budget_clock(before.time_budget_s, began),
                              forced=bool(job.end_check))
    if code or probe_s is None:
        return code
    return equivalence_probe(job, api, dirs, began)


def extra_levels(job: CompareJob, api: str, dirs: dict[str, Path], began: float) -> int:
    """Levels skipped on one server but run on another (``--stop-after-saturation``), then the refinement."""
    if job.stop_after_saturation >= 0:
        code = pair_levels(list(dirs), dirs, level_runner(job, api))
        if code:
            return code
    code = refine_compare(job, api, dirs, began) if job.refine_levels else 0
    if code or job.rate_mode:
        return code
    # What refinement left of the budget (all of its share where nothing crossed) goes back to the ladder (#61),
    # less what the end check will need.
    left = budget_clock(job.time_budget_s, began)
    # The end check waits for every level's window (#76): where a ladder left one short, it gets no reserve here.
    short = any(short_levels(dirs[name]) for name in dirs)
    keep = end_check_need_s(list(dirs), dirs) if job.end_check is not False and not short else 0.0
    return top_up(list(dirs), dirs, level_runner(job, api), lambda: None if (t := left()) is None else t - keep)


def level_runner(job: CompareJob, api: str) -> LevelRunner:
    """Runs just some levels on one server with the job's settings (its prompt order, API, options) (#27)."""
    urls = {job.baseline_name: job.baseline.identity.url, **{name: pre.identity.url for name, pre in job.specs}}

    def run_levels(name: str, levels: Sequence[float], sub: Path, share: float | None) -> int:
        options = added_level_options(levels, share, rate_mode=job.rate_mode, extra=job.run_options(name, job.extra))
        return run_ladder(name, urls[name], sub, api=api, suite_config=job.suite_config, processes=job.processes,
                          extra=options, flush=job.flush_cache, api_key=job.api_key, verbose=job.verbose).returncode

    return run_levels


def refine_compare(job: CompareJob, api: str, dirs: dict[str, Path], began: float) -> int:
    """Extra levels around each crossover on every server, same settings and prompt order (#27)."""
    return refine_by_mode(job.out, list(dirs), dirs, level_runner(job, api), rate_mode=job.rate_mode,
                          max_levels=job.refine_levels, time_left=budget_clock(job.time_budget_s, began))
