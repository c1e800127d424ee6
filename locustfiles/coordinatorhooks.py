"""The local runner's hooks (``CoordinatorHooks``): it decides the run and runs its users.

It writes the run directory (meta.json, steps.jsonl, records), samples the server's /metrics and the GPUs, serves
the web UI's Tokens tab, and ends the process with the run's exit code. ``MasterHooks`` (locustfiles.masterhooks)
builds on it.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import gevent
from locust import log as locust_log
from locust.env import Environment

from specbench.contract.messages import (
    DROP_MESSAGE,
    RECORD_MESSAGE,
    START_MESSAGE,
    STEP_MESSAGE,
)
from specbench.contract.receiveclock import clock_of
from specbench.contract.schema import RunMeta
from specbench.contract.servertext import plain
from specbench.contract.settings import SettingsError, SuiteSettings, apply_profile, settings_of
from specbench.contract.urls import UrlError, check_url, has_credentials
from specbench.locustfiles import guards
from specbench.locustfiles import run as runmod
from specbench.locustfiles.gpu_sampler import GpuMetricsSampler
from specbench.locustfiles.looplag import LOOP_LAG
from specbench.locustfiles.recorder import write_meta
from specbench.locustfiles.refusals import refusals_only
from specbench.locustfiles.runhooks import RunHooks, fail
from specbench.locustfiles.sequencer import LocalSequence, StepCounters
from specbench.locustfiles.server_metrics import ServerMetricsSampler
from specbench.locustfiles.target import EmulatorProcess, start_emulator_process
from specbench.locustfiles.uisignals import install_ui_signals, stop_running_test

log = logging.getLogger("specbench")


class CoordinatorHooks(RunHooks):
    """The local runner: decides the run (plan, run directory, steps, meta, reports) and runs its users."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.meta: RunMeta | None = None
        self.steps = runmod.StepsWriter()
        self.emulator: EmulatorProcess | None = None
        self.counters = StepCounters()  # prompt sequence numbers per step
        self.run_dirs: set[str] = set()  # run directories this process has written (one per Start)
        self.tokens_tab: Any = None  # the web UI's Tokens tab, on the process that serves the UI
        self.sampler: ServerMetricsSampler | None = None  # the coordinating process samples /metrics
        self.gpu_sampler: GpuMetricsSampler | None = None  # and the --gpu-metrics exporters
        self.start_host = ""  # the host given at start: the only one an API key may go to
        self.failed_steps: list[str] = []  # steps above --max-error-rate, one line each
        self.partial = False  # the last run ended before its ladder did

    # -- init ------------------------------------------------------------------------------------------------

    def _init_role(self, runner: Any, argv: list[str]) -> None:
        options = self.env.parsed_options
        if options is not None:
            self._init_options(options, argv)
        self._register(runner)
        self._wire_outputs()
        if options is not None and getattr(options, "headless", False):
            # Locust 2.47 installs its SIGTERM handler only after a headless shape run has ended (a SIGTERM
            # during the ladder kills the process with nothing closed), and Ctrl-C raises KeyboardInterrupt
            # in whichever greenlet happens to run. Both now end the shape, so Locust stops in order.
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                gevent.signal_handler(signum, self._on_stop_signal, signum)
        elif self.env.web_ui is not None:
            install_ui_signals()

    def _register(self, runner: Any) -> None:
        runner.register_message(STEP_MESSAGE, self._on_step_message)  # its own users follow the shape
        self._register_books(runner)
        LOOP_LAG.start()  # this process reads the streams: its event loop's lateness is the steps' read lag
        if self.shape is not None:
            self.shape.own_lag = LOOP_LAG.snapshot

    def _register_books(self, runner: Any) -> None:
        """What the users tell the shape's books: starts, records (written here), open-loop drops."""
        runner.register_message(START_MESSAGE, self._on_start_message)
        runner.register_message(RECORD_MESSAGE, self._on_record_message)
        runner.register_message(DROP_MESSAGE, self._on_drop_message)

    def _init_options(self, options: Any, argv: list[str]) -> None:
        """Fail fast, before any load, on a bad flag, profile value or host; fix the host a key may go to."""
        try:
            apply_profile(options, argv)
            settings = settings_of(options)  # validated once; registers the key's variable for redaction
            self.env.host = check_url(self.env.host) if self.env.host else self.env.host
            if self.env.host and has_credentials(self.env.host) and settings.api_key():
                raise UrlError("--host: the URL carries credentials (user:pass@) and an API key is set (--api-key-env)"
                               "; requests would send the URL's Basic auth instead of the key: give one of the two")
        except (SettingsError, UrlError) as exc:
            fail(str(exc))
        if not self.env.host:
            self._start_embedded_emulator(options)
        self.start_host = self.env.host or ""
        if self.env.web_ui is not None:
            guards.guard_web_ui(self.env.web_ui, self.start_host, options)

    def _wire_outputs(self) -> None:
        """Closed steps go to steps.jsonl, and (where a web UI is served) to the Tokens tab."""
        if self.shape is not None:
            self.shape.on_step_closed.append(self.steps)
            self.shape.on_step_closed.append(self._check_error_rate)
            self.shape.on_step_closed.append(self._check_clock)
        if self.env.web_ui is not None:
            from specbench.locustfiles.webui import install_tokens_tab  # only where a web UI is served

            self.tokens_tab = install_tokens_tab(self.env, self)

    def _check_error_rate(self, step: Any) -> None:
        limit = float(getattr(self.env.parsed_options, "max_error_rate", 0.05))
        line = guards.error_rate_line(step, limit)
        if line:
            self.failed_steps.append(line)

    def _check_clock(self, _step: Any) -> None:
        """meta.json says the clock the steps so far dated their chunks on as soon as it differs from the one
        asked (a kernel that refused its stamps): a run killed before its end never claims "kernel" for them."""
        ctx = getattr(self.env, "specbench_run", None)
        clock = clock_of(self.steps.clocks)
        if ctx is not None and self.meta is not None and clock is not None and clock != self.meta.receive_clock:
            self.meta.receive_clock = clock
            write_meta(ctx.run_dir, self.meta)

    def _on_stop_signal(self, signum: int) -> None:
        log.info("Got %s: stopping the ladder; every finished request is kept", signal.Signals(signum).name)
        self._stop_run()

    def _start_embedded_emulator(self, options: Any) -> None:
        """No --host: start the default target in its own process (never in Locust's); stopped at quitting."""
        profile = str(getattr(options, "emulator_profile", "baseline"))
        speed = float(getattr(options, "emulator_speed", 1.0))
        try:
            self.emulator = start_emulator_process(profile, speed=speed)
        except RuntimeError as exc:
            fail(f"--emulator-profile {profile}: the built-in emulator did not start: {exc}")
        self.env.host = self.emulator.url
        log.info("No --host given: started the built-in emulator (profile %s, speed %g) at %s",
                 profile, speed, self.emulator.url)

    # -- messages --------------------------------------------------------------------------------------------

    def _on_start_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        if self.shape is not None:
            self.shape.collector.on_start(msg.data, node=msg.node_id)

    def _on_drop_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        if self.shape is not None:
            self.shape.collector.on_drop(msg.data)

    def _on_record_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        """The one writer of records.jsonl: each record is appended as it arrives, then counted for the books."""
        record = msg.data["record"]
        ctx = getattr(self.env, "specbench_run", None)
        if ctx is not None:
            ctx.write_record(record, msg.data.get("answer"))
        if self.shape is not None:
            self.shape.collector.on_record(record)

    # -- test lifecycle --------------------------------------------------------------------------------------

    def _context(self, settings: SuiteSettings, worker: int) -> runmod.RunContext:
        return runmod.build_context(settings, self._plan(settings), worker, writes_records=True,
                                    sequence=self._sequence())

    def _plan(self, settings: SuiteSettings) -> runmod.RunPlan:
        if settings.api_key() and not guards.host_allowed(self.start_host, self.env.host or "",
                                                          self.env.parsed_options):
            raise SettingsError(guards.HOST_CHANGE_REFUSED)
        plan = runmod.plan_run(settings, self.env.host or "")
        if settings.out and not self.run_dirs:  # an explicit --out: never mix two runs in it
            guards.claim_run_dir(Path(plan.run_dir), settings.overwrite)
        plan = dataclasses.replace(plan, run_dir=unused_run_dir(plan.run_dir, self.run_dirs))
        self.run_dirs.add(plan.run_dir)
        return plan

    def _sequence(self) -> LocalSequence | None:
        self.counters.clear()
        return LocalSequence(self.counters)

    def _started(self, ctx: runmod.RunContext) -> None:
        """Opens the run: meta.json, steps.jsonl, the Tokens tab's run, the /metrics sampler."""
        levels = self.shape.levels if self.shape is not None else ctx.settings.ladder  # users mode: its one level
        self.meta = runmod.initial_meta(ctx, self.env.host or "", list(levels))
        write_meta(ctx.run_dir, self.meta)
        self.steps.open(ctx.run_dir)
        if self.tokens_tab is not None:
            self.tokens_tab.run_started(ctx.run_dir)
        log.info("Run directory: %s (api %s, model %s, server %s%s)", ctx.run_dir, ctx.api, plain(ctx.model),
                 plain(ctx.server.kind), ", speculative" if ctx.server.speculative else "")  # server text: one line
        self._start_sampler(ctx)

    def _start_sampler(self, ctx: runmod.RunContext) -> None:
        if self.sampler is not None:  # a web-UI restart: the previous run's sampler ends with it
            self.sampler.stop()
            self.sampler = None
        if self.gpu_sampler is not None:
            self.gpu_sampler.stop()
            self.gpu_sampler = None
        settings = ctx.settings
        if settings.gpu_metrics:
            self.gpu_sampler = GpuMetricsSampler(settings.gpu_metrics, ctx.run_dir, settings.server_metrics_interval,
                                                 timeout_s=settings.connect_timeout)
            self.gpu_sampler.start()
        if settings.server_metrics:
            self.sampler = ServerMetricsSampler(self.env.host or "", ctx.run_dir, settings.server_metrics_interval,
                                                api_key=settings.api_key(), timeout_s=settings.connect_timeout)
            self.sampler.start()

    def on_test_stopping(self) -> None:
        """Before Locust cuts the users' requests short: the open step's window ends while it is still exact."""
        if self.shape is not None:
            self.shape.stop_now()

    def on_test_stop(self) -> None:
        """Each run ends its directory (every Start of the web UI has its own): last step written, meta final."""
        if self.shape is not None:
            self.shape.stop_now()
        super().on_test_stop()

    def _finish_run(self) -> None:
        ctx = getattr(self.env, "specbench_run", None)
        if ctx is not None and self.meta is not None:
            completed = self.shape.completed if self.shape is not None else True
            self.partial = not completed
            runmod.finish_meta(ctx.run_dir, self.meta, completed, self.steps.clocks)
            self.meta = None
        self.steps.close()
        if self.sampler is not None:  # its last read comes after the ladder drained
            self.sampler.stop()
        if self.gpu_sampler is not None:
            self.gpu_sampler.stop()
        if self.tokens_tab is not None and ctx is not None:
            self.tokens_tab.run_ended(ctx.run_dir)

    def on_quitting(self) -> None:
        stop_running_test(self.env.runner)
        super().on_quitting()
        self._report_losses()
        self._report_failures()
        if self.emulator is not None:
            self.emulator.stop()
            log.info("Stopped the built-in emulator at %s", self.emulator.url)

    def _report_failures(self) -> None:
        """A partial run is never a success, whichever signal stopped it; nor a step with too many errors, or one
        whose every request was refused (it measured nothing). Refusals alone are no failure: Locust's
        ``--exit-code-on-error`` then does not apply (``refusals.refusals_only``)."""
        for line in self.failed_steps:
            log.error(line)
        if self.env.process_exit_code:
            return
        runner = self.env.runner
        if self.partial:
            self.env.process_exit_code = 130
        elif self.failed_steps:
            self.env.process_exit_code = guards.EXIT_TOO_MANY_ERRORS
        elif (runner is not None and not runner.exceptions and not locust_log.unhandled_greenlet_exception
              and refusals_only(runner.errors)):
            self.env.process_exit_code = 0

    def _missing_records(self) -> int:
        """Records numbered by workers that never arrived (none without workers)."""
        return 0

    def _report_losses(self) -> None:
        """A run that lost data says so in one line and exits non-zero (3)."""
        books = self.shape.books if self.shape is not None else []
        lost_steps = [b.index + 1 for b in books if b.users_lost or b.lost_requests]
        in_flight = sum(b.lost_requests for b in books)
        missing = self._missing_records()
        if not lost_steps and not missing:
            return
        sys.stderr.write(f"specbench: error: this run lost data: a worker was lost in step(s) "
                         f"{', '.join(map(str, lost_steps)) or '-'}; {in_flight} requests in flight were never "
                         f"recorded; {missing} records numbered by workers never arrived\n")
        sys.stderr.flush()
        if not self.env.process_exit_code:
            self.env.process_exit_code = 3


def unused_run_dir(run_dir: str, used: set[str]) -> str:
    """``run_dir``, or ``run_dir-2``, ``-3`` ... when an earlier Start of this process already wrote there."""
    candidate, n = run_dir, 1
    while candidate in used:
        n += 1
        candidate = f"{run_dir}-{n}"
    return candidate
