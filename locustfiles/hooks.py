"""Wiring to Locust's events: options, the embedded emulator, run context, records and step books.

Everything hangs on named Locust events and custom messages; no runner internals are patched. ``install``
takes one Environment, so tests can wire several in one process, each with its own ``Events``. Each process
role has its class (``CoordinatorHooks`` for the local runner, ``MasterHooks``, ``WorkerHooks``), chosen once
by ``hooks_for`` from the runner's kind, as Locust has one runner class per role.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import gevent
from locust.env import Environment
from locust.runners import STATE_RUNNING, STATE_SPAWNING, MasterRunner, WorkerRunner

from specbench.contract.limits import LimitError, check_processes
from specbench.contract.messages import (
    CLOCK_MESSAGE,
    CPU_MESSAGE,
    DROP_MESSAGE,
    HELLO_MESSAGE,
    PLAN_MESSAGE,
    RECORD_MESSAGE,
    SEQ_ASK_MESSAGE,
    SEQ_GRANT_MESSAGE,
    START_MESSAGE,
    STEP_MESSAGE,
    WELCOME_MESSAGE,
)
from specbench.contract.redact import install_log_filter, redact
from specbench.contract.schema import RunMeta
from specbench.contract.settings import SettingsError, SuiteSettings, add_arguments, apply_profile, settings_of
from specbench.contract.urls import UrlError, check_url, has_credentials
from specbench.locustfiles import guards
from specbench.locustfiles import run as runmod
from specbench.locustfiles.console import install_console
from specbench.locustfiles.deferred import AFTER_SENDS
from specbench.locustfiles.fleet import Fleet
from specbench.locustfiles.gpu_sampler import GpuMetricsSampler
from specbench.locustfiles.link import WorkerLink, add_link_options, run_token
from specbench.locustfiles.looplag import LOOP_LAG
from specbench.locustfiles.masterwatch import watch_master
from specbench.locustfiles.prompts import PromptError
from specbench.locustfiles.recorder import WRITE_FAILURES, on_write_failure, write_meta
from specbench.locustfiles.sequencer import LocalSequence, StepCounters, WorkerSequence
from specbench.locustfiles.server_metrics import ServerMetricsSampler
from specbench.locustfiles.target import EmulatorProcess, start_emulator_process
from specbench.locustfiles.uisignals import install_ui_signals, stop_running_test
from specbench.shapes.ladder import ConcurrencyLadder
from specbench.shapes.live import LiveStep

log = logging.getLogger("specbench")


class RunHooks:
    """What every process role shares: the live step, the run context's installation, the end of a process.

    One subclass per role, chosen once by ``hooks_for`` from the runner's kind (as Locust has one runner class per
    role): ``CoordinatorHooks`` for the local runner (it decides the run and runs the users),
    ``MasterHooks`` for a master (decides, runs none: its workers do), ``WorkerHooks`` for a worker (follows the
    master's plan and steps, sends its records to the master). No method asks again which role it plays.
    """

    def __init__(self, environment: Environment) -> None:
        self.env = environment
        self.live = LiveStep()

    @property
    def shape(self) -> ConcurrencyLadder | None:
        shape = self.env.shape_class
        return shape if isinstance(shape, ConcurrencyLadder) else None

    # -- init ------------------------------------------------------------------------------------------------

    def on_init(self, argv: list[str]) -> None:
        runner = self.env.runner
        assert runner is not None
        install_log_filter()
        on_write_failure(self._on_write_failure)
        install_console(str(getattr(self.env.parsed_options, "console", None) or "locust"),
                        getattr(self.env.parsed_options, "logfile", None))
        self._init_role(runner, argv)

    def _init_role(self, runner: Any, argv: list[str]) -> None:
        """This role's options, messages and outputs."""
        raise NotImplementedError

    def _on_step_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        """The shape's current step, on a process that runs users (the local runner's comes straight back)."""
        self.live.update(msg.data)

    def _on_write_failure(self, reason: str) -> None:
        """The disk refused a line: nothing more can be kept, so the run stops now and exits 3 (lost data)."""
        log.error("Stopping the run: %s (every line written before it is kept)", reason)
        self.env.process_exit_code = 3
        gevent.spawn(self._stop_run)  # not in the greenlet that was writing: stopping may kill it

    def _stop_run(self) -> None:
        """End the ladder as at a signal: the open step closes, users stop, the run is marked partial."""
        runner = self.env.runner
        if runner is not None and runner.shape_greenlet is not None:
            runner.shape_greenlet.kill(block=False)
        elif runner is not None:
            runner.quit()

    # -- test lifecycle --------------------------------------------------------------------------------------

    def on_test_start(self) -> None:
        """The run's context for this process's users (each Start of the web UI has its own)."""
        worker = int(getattr(self.env.runner, "worker_index", 0) or 0)  # a worker's index; 0 on the others
        try:
            ctx = self._context(settings_of(self.env.parsed_options), worker)
        except (SettingsError, PromptError) as exc:
            fail(str(exc))
        ctx.live = self.live
        setattr(self.env, "specbench_run", ctx)  # noqa: B010 - read by the users through LLMUser
        self._started(ctx)

    def _context(self, settings: SuiteSettings, worker: int) -> runmod.RunContext:
        raise NotImplementedError

    def _started(self, ctx: runmod.RunContext) -> None:
        """What the role does once the users' context is in place."""

    def on_test_stopping(self) -> None:
        """Before Locust cuts the users' requests short."""

    def on_test_stop(self) -> None:
        self._finish_run()

    def _finish_run(self) -> None:
        """The end of one run of this process (a worker keeps nothing of its own)."""

    def on_quitting(self) -> None:
        ctx = getattr(self.env, "specbench_run", None)
        if ctx is not None:
            ctx.close_files()
        self._finish_run()
        if WRITE_FAILURES.first is not None:
            sys.stderr.write(f"specbench: error: {WRITE_FAILURES.first}; {WRITE_FAILURES.lines_lost} line(s) were "
                             "not written\n")
            sys.stderr.flush()
            self.env.process_exit_code = 3


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
        if self.env.web_ui is not None:
            from specbench.locustfiles.webui import install_tokens_tab  # only where a web UI is served

            self.tokens_tab = install_tokens_tab(self.env, self)

    def _check_error_rate(self, step: Any) -> None:
        limit = float(getattr(self.env.parsed_options, "max_error_rate", 0.05))
        line = guards.error_rate_line(step, limit)
        if line:
            self.failed_steps.append(line)

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
        log.info("Run directory: %s (api %s, model %s, server %s%s)", ctx.run_dir, ctx.api, ctx.model,
                 ctx.server.kind, ", speculative" if ctx.server.speculative else "")
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
            runmod.finish_meta(ctx.run_dir, self.meta, completed)
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
        """A partial run is never a success, whichever signal stopped it; nor a step with too many errors."""
        for line in self.failed_steps:
            log.error(line)
        if self.env.process_exit_code:
            return
        if self.partial:
            self.env.process_exit_code = 130
        elif self.failed_steps:
            self.env.process_exit_code = guards.EXIT_TOO_MANY_ERRORS

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


class MasterHooks(CoordinatorHooks):
    """A master: decides the run as the local runner does, runs no user, admits workers (``Fleet``) and tells
    them the plan, the steps, the time and their prompt numbers; notices a lost worker."""

    def __init__(self, environment: Environment, runner: MasterRunner) -> None:
        super().__init__(environment)
        self.runner = runner
        token, self._token_given = run_token(environment.parsed_options)  # a link option: no profile sets it
        self.fleet = Fleet(token)  # workers admitted by token, their record counts, losses
        self._watch: gevent.Greenlet | None = None
        self._plan_message: dict[str, Any] | None = None  # the current run's plan, for late joiners

    def _register(self, runner: Any) -> None:
        self._register_books(runner)  # no STEP_MESSAGE handler: the master runs no user
        runner.register_message(HELLO_MESSAGE, lambda msg, **_kw: self._on_hello(msg))
        runner.register_message(CLOCK_MESSAGE, lambda msg, **_kw: self._on_clock(msg))
        runner.register_message(SEQ_ASK_MESSAGE, lambda msg, **_kw: self._on_seq_ask(msg))
        runner.register_message(CPU_MESSAGE, lambda msg, **_kw: self.fleet.on_cpu(msg.node_id, msg.data))
        if self.shape is not None:
            self.shape.worker_cpu = self.fleet.worker_cpu
            self.shape.worker_lag = self.fleet.worker_lag
        if not self._token_given and not getattr(self.env.parsed_options, "processes", None):
            token = self.fleet.token
            log.info("Run token %s: start workers with --run-token %s (or %s in their environment)",
                     token, token, "SPECBENCH_RUN_TOKEN")

    def _on_hello(self, msg: Any) -> None:
        self.fleet.on_hello(self.runner, msg.node_id, msg.data, before_welcome=self._catch_up)

    def _catch_up(self, node: str) -> None:
        """A worker joining a running test (a replacement) gets the run's plan and the current step first."""
        if self._plan_message is not None and self.runner.state in (STATE_RUNNING, STATE_SPAWNING):
            self.runner.send_message(PLAN_MESSAGE, self._plan_message, client_id=node)
            if self.shape is not None:
                self.runner.send_message(STEP_MESSAGE, self.shape.live.to_message(), client_id=node)

    def _on_clock(self, msg: Any) -> None:
        if self.fleet.accepts(msg.node_id):
            self.runner.send_message(CLOCK_MESSAGE, {"t0": msg.data["t0"], "tm": time.time()}, client_id=msg.node_id)

    def _on_seq_ask(self, msg: Any) -> None:
        if self.fleet.accepts(msg.node_id):
            self.runner.send_message(SEQ_GRANT_MESSAGE, self.counters.grant(msg.data), client_id=msg.node_id)

    def _on_worker_lost(self, node: str, index: int, users: int) -> None:
        shape, runner = self.shape, self.runner
        steps = shape.collector.lose_node(node) if shape is not None else []
        if shape is not None:
            shape.note_worker_lost(users, steps)
        remaining = runner.worker_count
        log.error("Worker %d lost (no heartbeat): %d users and %d requests in flight lost; "
                  "re-spawning its users on the %d remaining workers", index, users, len(steps), remaining)
        if remaining > 0 and runner.state in (STATE_RUNNING, STATE_SPAWNING):
            gevent.spawn(runner.start, runner.target_user_count, runner.spawn_rate)

    def _on_start_message(self, environment: Environment, msg: Any, **kw: Any) -> None:
        if self.fleet.accepts(msg.node_id):
            super()._on_start_message(environment, msg, **kw)

    def _on_record_message(self, environment: Environment, msg: Any, **kw: Any) -> None:
        if not self.fleet.accepts(msg.node_id):
            return
        self.fleet.count_record(msg.node_id, msg.data.get("n"))
        super()._on_record_message(environment, msg, **kw)

    def _plan(self, settings: SuiteSettings) -> runmod.RunPlan:
        plan = super()._plan(settings)
        self._plan_message = plan.to_message()  # sent before Locust's spawn messages, so it arrives first
        self.runner.send_message(PLAN_MESSAGE, self._plan_message)
        return plan

    def _sequence(self) -> None:
        self.counters.clear()  # the workers ask for their numbers (SEQ_ASK_MESSAGE)
        return None

    def _started(self, ctx: runmod.RunContext) -> None:
        super()._started(ctx)
        self.fleet.clear_run()
        if self._watch is not None:
            self._watch.kill(block=False)
        self._watch = self.fleet.watch(self.runner, self._on_worker_lost)

    def on_test_stop(self) -> None:
        if self._watch is not None:  # workers quitting at the end are not lost
            self._watch.kill(block=False)
            self._watch = None
        super().on_test_stop()

    def _missing_records(self) -> int:
        return self.fleet.missing_records()


class WorkerHooks(RunHooks):
    """A worker: says hello with the run's token, follows the master's plan and steps, takes its prompt numbers
    from the master and sends it every start, record and drop; writes no file."""

    def __init__(self, environment: Environment, runner: WorkerRunner) -> None:
        super().__init__(environment)
        self.runner = runner
        self.plan: runmod.RunPlan | None = None  # the master's plan for the current run
        token, _given = run_token(environment.parsed_options)
        self.link = WorkerLink(runner.send_message, token, self._on_refused)  # token handshake, clock offset
        self.sequence: WorkerSequence | None = None  # prompt numbers granted by the master
        self._pending_start = False  # a spawn arrived before the master's welcome

    def _init_role(self, runner: Any, argv: list[str]) -> None:
        runner.register_message(STEP_MESSAGE, self._on_step_message)
        runner.register_message(PLAN_MESSAGE, self._on_plan_message)
        runner.register_message(WELCOME_MESSAGE, lambda msg, **_kw: self._on_welcome(msg.data))
        runner.register_message(CLOCK_MESSAGE, lambda msg, **_kw: self.link.on_clock(msg.data))
        runner.register_message(SEQ_GRANT_MESSAGE, self._on_seq_grant)
        self.link.hello()  # connected already (Locust waits for the master's ack), and before any spawn
        LOOP_LAG.start()  # sent with each CPU figure: the master's books take each step's read lag from it
        watch_master(runner, self._on_master_gone)

    def _on_master_gone(self, reason: str) -> None:
        log.error("specbench: %s; this worker stops its users and quits", reason)
        self.env.process_exit_code = 3
        self.runner.quit()

    def _on_refused(self, reason: str) -> None:
        log.error("specbench: %s; this worker quits and sends nothing", reason)
        self.env.process_exit_code = 2
        gevent.spawn_later(0.2, self.runner.quit)

    def _on_plan_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        self.plan = runmod.RunPlan.from_message(msg.data)

    def _on_seq_grant(self, msg: Any, **_kw: Any) -> None:
        if self.sequence is not None:
            self.sequence.on_grant(msg.data)

    def _on_welcome(self, data: dict[str, Any]) -> None:
        self.link.on_welcome(data)
        # Joined a running test: its spawn came first (maybe even before these hooks were installed).
        running = self.runner.worker_state in (STATE_SPAWNING, STATE_RUNNING)
        if self.link.welcomed and (self._pending_start or running):
            self._pending_start = False
            self.on_test_start()

    def on_test_start(self) -> None:
        if not self.link.welcomed:
            # A worker that joined a running test hears "spawn" before the answer to its hello; it starts
            # once welcomed (a refused one never does: its users find no run context and send nothing).
            self._pending_start = True
            return
        super().on_test_start()

    def _context(self, settings: SuiteSettings, worker: int) -> runmod.RunContext:
        if self.plan is None:
            fail("worker: no run plan arrived from the master before the test started")
        assert self.plan is not None
        # --trace (#28): rows go out in small blocks, so every process takes its share of the trace
        users = (lambda: 0) if settings.trace else (lambda: int(self.runner.user_count or 0))
        self.sequence = WorkerSequence(self.runner.send_message, users)
        # Open loop: the expected workers share the rate (the master ships expect_workers to each).
        workers = int(getattr(self.env.parsed_options, "expect_workers", 1) or 1)
        ctx = runmod.build_context(settings, self.plan, worker, writes_records=False, sequence=self.sequence,
                                   workers=workers)
        ctx.clock = self.link.clock  # the same object: later probes refine it
        return ctx


def fail(message: str) -> NoReturn:
    """A user mistake: one clear line, exit code 2, no traceback."""
    sys.stderr.write(f"specbench: error: {redact(message)}\n")
    sys.stderr.flush()
    raise SystemExit(2)


def unused_run_dir(run_dir: str, used: set[str]) -> str:
    """``run_dir``, or ``run_dir-2``, ``-3`` ... when an earlier Start of this process already wrote there."""
    candidate, n = run_dir, 1
    while candidate in used:
        n += 1
        candidate = f"{run_dir}-{n}"
    return candidate


def hooks_for(environment: Environment) -> RunHooks:
    """The hooks of this process's role, chosen once from its runner's kind (the one place that asks)."""
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        return WorkerHooks(environment, runner)
    if isinstance(runner, MasterRunner):
        return MasterHooks(environment, runner)
    return CoordinatorHooks(environment)


def install(environment: Environment, argv: list[str] | None = None) -> RunHooks:
    """Attach the suite to one Environment whose runner exists (call from the ``init`` event)."""
    hooks = hooks_for(environment)
    environment.events.test_start.add_listener(lambda **_kw: hooks.on_test_start())
    # Records of requests that just ended first (locustfiles.deferred): the last step is judged on them
    environment.events.test_stopping.add_listener(lambda **_kw: AFTER_SENDS.flush())
    environment.events.test_stopping.add_listener(lambda **_kw: hooks.on_test_stopping())
    environment.events.test_stop.add_listener(lambda **_kw: AFTER_SENDS.flush())
    environment.events.quitting.add_listener(lambda **_kw: AFTER_SENDS.flush())
    environment.events.test_stop.add_listener(lambda **_kw: hooks.on_test_stop())
    environment.events.quitting.add_listener(lambda **_kw: hooks.on_quitting())
    hooks.on_init(sys.argv if argv is None else argv)
    return hooks


def add_options(parser: Any, **_kw: Any) -> None:
    add_arguments(parser)
    add_link_options(parser)
    # The web UI has no login by default and its form can start load: loopback only unless the user widens it
    # (an explicit --web-host or LOCUST_WEB_HOST still wins over this default).
    parser.set_defaults(web_host="127.0.0.1")
    bound_processes(parser)


def bound_processes(parser: Any) -> None:
    """Locust forks ``--processes`` children before any hook runs: bound the count while parsing it."""
    action = getattr(parser, "_option_string_actions", {}).get("--processes")
    if action is None:
        return

    def processes(text: str) -> int:
        try:
            value = int(text)
            check_processes(value)
        except (ValueError, LimitError) as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("--processes: ")) from None
        return value

    action.type = processes
