"""``specbench sweep FILE``: each configuration's server, one after another, the same ladder on each, one report.

For every entry (the baseline first): start its command in its own process group (or use its URL as it is),
wait until its readiness URL answers 200, check it like ``compare`` does, run the ladder into ``OUT/NAME``,
and stop the server (SIGTERM to the group, SIGKILL after the stop timeout) before the next one starts, so two
configurations never share the machine. Every run gets identical settings and prompt order; the API is the
one the baseline resolves to (or ``--api``). Ctrl-C stops the run in progress and its server; the report is
still written from what was recorded. ``--time-budget`` is shared as it goes: each ladder gets an equal part of
what the ladders have left when it starts (server starts count against it; refinement keeps its share). Then,
unless ``--no-refine``, refinement starts the configurations again
for the levels it adds (switch points; with ``--rate-ladder``, each capacity under the SLO).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specbench.analysis.verdicts.refine import DEFAULT_REFINE_LEVELS
from specbench.compare import run_ladder, write_report
from specbench.contract.optionvalues import duration_arg
from specbench.contract.rundir import server_log
from specbench.contract.urls import UrlError
from specbench.exporters import with_own_exporters
from specbench.launch import LaunchError, ServerCommand, free_port
from specbench.preflight import check_server
from specbench.refine import REFINE_SHARE, added_level_options, budget_clock, refine_by_mode
from specbench.repeatrun import repeat_dir, running_order, write_repeats
from specbench.shapes.budget import fmt_duration
from specbench.sweepfile import Entry, Sweep, parse_sweep


@dataclass
class SweepJob:
    sweep: Sweep
    out: Path
    suite_config: str | None = None
    processes: int = 0
    api: str = "auto"
    api_key: str | None = None
    flush_cache: bool = False
    extra: list[str] = field(default_factory=list)
    verbose: bool = False
    refine_levels: int = DEFAULT_REFINE_LEVELS  # extra levels per switch point after the ladders; 0: none (#27)
    rate_mode: bool = False  # --rate-ladder: refinement adds rates around each capacity under the SLO (#27)
    repeats: int = 1  # --repeats: every configuration this many times in alternating order (``repeatrun``)
    time_budget_s: float = 0.0  # --time-budget for every run together (refinement's share kept); 0: none
    began: float = field(default_factory=time.monotonic)

    def budget_options(self, name: str, runs_left: int) -> list[str]:
        """``--time-budget`` for the next ladder: an equal part of what the ladders have left (refinement keeps
        ``REFINE_SHARE`` of the whole where it is on), said on one line; [] without a budget."""
        if not self.time_budget_s:
            return []
        ladders_s = self.time_budget_s * (1 - REFINE_SHARE if self.refine_levels and self.repeats == 1 else 1)
        left = ladders_s - (time.monotonic() - self.began)
        share = max(1.0, left / max(1, runs_left))
        print(f"{name}: {fmt_duration(share)} of the budget", flush=True)
        return ["--time-budget", duration_arg(share)]


def run_sweep(job: SweepJob) -> int:
    """Run every configuration in turn and write the report; raises LaunchError/PreflightError (exit 2)."""
    job.out.mkdir(parents=True, exist_ok=True)
    if job.repeats > 1:
        return _repeated(job)
    api = job.api
    interrupted = False
    for i, entry in enumerate(job.sweep.entries):
        budget = job.budget_options(entry.name, len(job.sweep.entries) - i)
        try:
            api, code = run_entry(entry, job, api, extra=[*budget, *job.extra] if budget else None)
        except KeyboardInterrupt:
            print(f"{entry.name}: interrupted; writing a partial report from what was recorded", flush=True)
            interrupted = True
            break
        if code == 130:
            interrupted = True
            break
        if code:
            return code
    if not interrupted and job.refine_levels:
        code = refine_sweep(job, api)
        interrupted = code == 130
        if code not in (0, 3, 130):
            return code
    base = job.sweep.baseline
    configs = [(e.name, job.out / e.name) for e in job.sweep.entries if not e.baseline]
    return write_report(job.out, (base.name, job.out / base.name), configs, interrupted, job.verbose)


def _repeated(job: SweepJob) -> int:
    """--repeats: every configuration's ladder ``job.repeats`` times, the order reversed in every other repeat;
    each run starts its server afresh (a managed one), so every repeat starts cold. No refinement."""
    entries = {e.name: e for e in job.sweep.entries}
    order = running_order(list(entries), job.repeats)
    print(f"{job.repeats} repeats, each configuration's ladder in alternating order; refinement off: every repeat "
          "measures the same levels", flush=True)
    api, interrupted = job.api, False
    for i, (repeat, name) in enumerate(order):
        run_dir = repeat_dir(job.out, repeat, name)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        budget = job.budget_options(name, len(order) - i)
        try:
            api, code = run_entry(entries[name], job, api, run_dir=run_dir,
                                  extra=[*budget, *job.extra] if budget else None)
        except KeyboardInterrupt:
            code = 130
        if code == 130:
            print(f"{name}: interrupted; writing a partial report from what was recorded", flush=True)
            interrupted = True
            break
        if code not in (0, 3):
            return code
    base = job.sweep.baseline
    configs = [(e.name, job.out / e.name) for e in job.sweep.entries if not e.baseline]
    print("Repeat 1 alone (each configuration measured once, in the order given; the answer over the repeats "
          "follows):", flush=True)
    code = write_report(job.out, (base.name, job.out / base.name), configs, interrupted, job.verbose)
    if code in (0, 130):
        write_repeats(job.out, base.name, list(entries), job.repeats)
    return code


def refine_sweep(job: SweepJob, api: str) -> int:
    """Extra levels around each switch point (rate mode: extra rates around each capacity under the SLO):
    every configuration is started again, measured at just those levels with the same settings and prompt
    order, and stopped, one after another (#27)."""
    entries = {e.name: e for e in job.sweep.entries}
    order = [job.sweep.baseline.name, *(e.name for e in job.sweep.entries if not e.baseline)]
    dirs = {name: job.out / name for name in order}

    def run_levels(name: str, levels: Sequence[float], sub: Path, share: float | None) -> int:
        options = added_level_options(levels, share, rate_mode=job.rate_mode, extra=job.extra)
        try:
            return run_entry(entries[name], job, api, run_dir=sub, extra=options)[1]
        except KeyboardInterrupt:
            return 130

    return refine_by_mode(job.out, order, dirs, run_levels, rate_mode=job.rate_mode, max_levels=job.refine_levels,
                          time_left=budget_clock(job.time_budget_s, job.began))


def run_entry(entry: Entry, job: SweepJob, api: str, *, run_dir: Path | None = None,
         extra: list[str] | None = None) -> tuple[str, int]:
    """Start (if managed), check and measure one configuration; returns the API used and an exit code.

    ``run_dir``/``extra``: where and with which options (default ``OUT/NAME`` and the job's)."""
    port = free_port() if entry.needs_port else None
    try:  # checked when the file was read with a stand-in port; again now, with the port that will be used
        url = entry.server_url(port, f"{entry.name}: url")
        ready_url = entry.ready_url(port, f"{entry.name}: ready.url")
    except UrlError as exc:
        raise LaunchError(str(exc)) from None
    server = None
    if entry.managed:
        command = entry.command_line(port)
        assert command is not None
        server = ServerCommand(entry.name, command, server_log(job.out, entry.name), entry.env,
                               entry.stop_timeout_s)
        print(f"{entry.name}: starting {command if isinstance(command, str) else ' '.join(command)}", flush=True)
    try:
        if server is not None:
            server.start()
            took = server.wait_ready(ready_url, entry.ready.timeout_s,
                                     entry.ready.interval_s)
            print(f"{entry.name}: ready after {took:.1f} s", flush=True)
        pre = check_server(url, entry.name, api=api, api_key=job.api_key)
        print(pre.describe(entry.name), flush=True)
        options = job.extra if extra is None else extra
        if entry.gpu_metrics is not None:
            exporters = entry.fill(entry.gpu_metrics, port)
            options = with_own_exporters(options, exporters)
            print(f"{entry.name}: GPU metrics from {exporters.replace(',', ', ')}", flush=True)
        outcome = run_ladder(entry.name, url, run_dir or job.out / entry.name, api=pre.api,
                             suite_config=job.suite_config, processes=job.processes, extra=options,
                             flush=job.flush_cache,
                             api_key=job.api_key, verbose=job.verbose)
        return pre.api, outcome.returncode
    finally:
        if server is not None:
            server.stop()
            print(f"{entry.name}: server stopped", flush=True)




#: ``specbench demo --sweep``: the baseline and four speculative emulator profiles, by name in the report.
DEMO_SWEEP = (("off", "baseline"), ("steps5", "eagle3-steps5"), ("steps3", "eagle3-steps3"),
              ("steps1", "eagle3-steps1"), ("eagle3", "eagle3"))


def demo_sweep(speed: float) -> Sweep:
    """The demo's sweep: each built-in emulator profile started by command, as a user's servers would be."""
    entries = [{"name": name, "baseline": name == DEMO_SWEEP[0][0],
                "command": [sys.executable, "-m", "specbench.emulator", "--profile", profile, "--port", "{port}",
                            "--speed", f"{speed:g}"],
                "ready": {"url": "http://127.0.0.1:{port}/ready", "timeout_s": 60, "interval_s": 0.1},
                "stop_timeout_s": 10}
               for name, profile in DEMO_SWEEP]
    return parse_sweep({"configurations": entries}, "<demo --sweep>")


__all__ = ["DEMO_SWEEP", "LaunchError", "SweepJob", "demo_sweep", "run_entry", "run_sweep"]
