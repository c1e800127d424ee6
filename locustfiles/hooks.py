"""Wiring to Locust's events: options, the embedded emulator, run context, records and step books.

Everything hangs on named Locust events and custom messages; no runner internals are patched. ``install``
takes one Environment, so tests can wire several in one process, each with its own ``Events``.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from analysis.schema import RunMeta
from contract.redact import install_log_filter, redact, register_key_env
from contract.urls import UrlError, check_url
from locustfiles import guards
from locustfiles import run as runmod
from locustfiles.prompts import PromptError
from locustfiles.recorder import write_meta
from locustfiles.serverinfo import identify
from locustfiles.settings import SettingsError, SuiteSettings, add_arguments, apply_profile
from shapes.ladder import ConcurrencyLadder
from shapes.live import RECORD_MESSAGE, START_MESSAGE, STEP_MESSAGE, LiveStep

log = logging.getLogger("specbench")


class RunHooks:
    """Per-environment state the listeners share: live step, run context, meta, steps writer, emulator."""

    def __init__(self, environment: Environment) -> None:
        self.env = environment
        self.live = LiveStep()
        self.meta: RunMeta | None = None
        self.steps = runmod.StepsWriter()
        self.emulator: Any = None
        self.out_given = False
        self.start_host = ""  # the host given at start: the only one an API key may go to
        self.failed_steps: list[str] = []  # steps above --max-error-rate, one line each

    @property
    def shape(self) -> ConcurrencyLadder | None:
        shape = self.env.shape_class
        return shape if isinstance(shape, ConcurrencyLadder) else None

    @property
    def coordinates(self) -> bool:
        """The master or the local runner decides for the run; workers follow."""
        return not isinstance(self.env.runner, WorkerRunner)

    @property
    def runs_users(self) -> bool:
        return not isinstance(self.env.runner, MasterRunner)

    # -- init ------------------------------------------------------------------------------------------------

    def on_init(self, argv: list[str]) -> None:
        runner = self.env.runner
        assert runner is not None
        options = self.env.parsed_options
        install_log_filter()
        if options is not None:
            register_key_env(str(getattr(options, "api_key_env", "") or ""))
        if self.runs_users:
            runner.register_message(STEP_MESSAGE, self._on_step_message)
        if not self.coordinates:
            return
        if options is not None:
            try:
                apply_profile(options, argv)
                register_key_env(str(getattr(options, "api_key_env", "") or ""))
                SuiteSettings.from_options(options)
            except SettingsError as exc:
                fail(str(exc))
            self.out_given = bool(getattr(options, "out", ""))
            if self.env.host:
                try:
                    self.env.host = check_url(self.env.host)
                except UrlError as exc:
                    fail(str(exc))
            else:
                self._start_embedded_emulator(options)
            self.start_host = self.env.host or ""
            web_ui = getattr(self.env, "web_ui", None)
            if web_ui is not None:
                guards.guard_host_change(web_ui.app, self.start_host, options)
        runner.register_message(START_MESSAGE, self._on_start_message)
        runner.register_message(RECORD_MESSAGE, self._on_record_message)
        if self.shape is not None:
            self.shape.on_step_closed.append(self.steps)
            self.shape.on_step_closed.append(self._check_error_rate)
        if options is not None and getattr(options, "headless", False):
            # Locust 2.47 installs its SIGTERM handler only after a headless shape run has ended (a SIGTERM
            # during the ladder kills the process with nothing closed), and Ctrl-C raises KeyboardInterrupt
            # in whichever greenlet happens to run. Both now end the shape, so Locust stops in order.
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                gevent.signal_handler(signum, self._on_stop_signal, signum)

    def _check_error_rate(self, step: Any) -> None:
        limit = float(getattr(self.env.parsed_options, "max_error_rate", 0.05))
        line = guards.error_rate_line(step, limit)
        if line:
            self.failed_steps.append(line)

    def _on_stop_signal(self, signum: int) -> None:
        log.info("Got %s: stopping the ladder; every finished request is kept", signal.Signals(signum).name)
        runner = self.env.runner
        if runner is not None and runner.shape_greenlet is not None:
            runner.shape_greenlet.kill(block=False)
        elif runner is not None:
            runner.quit()

    def _start_embedded_emulator(self, options: Any) -> None:
        from emulator import start_emulator  # only when there is no --host: the default target

        profile = str(getattr(options, "emulator_profile", "baseline"))
        speed = float(getattr(options, "emulator_speed", 1.0))
        self.emulator = start_emulator(profile, speed=speed)
        self.env.host = self.emulator.url
        log.info("No --host given: started the built-in emulator (profile %s, speed %g) at %s",
                 profile, speed, self.emulator.url)

    # -- messages --------------------------------------------------------------------------------------------

    def _on_step_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        self.live.update(msg.data)

    def _on_start_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        if self.shape is not None:
            self.shape.collector.on_start(msg.data)

    def _on_record_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        if self.shape is not None:
            self.shape.collector.on_record(msg.data)

    # -- test lifecycle --------------------------------------------------------------------------------------

    def on_test_start(self) -> None:
        options = self.env.parsed_options
        runner = self.env.runner
        worker = int(getattr(runner, "worker_index", 0) or 0)
        try:
            settings = SuiteSettings.from_options(options)
            if self.coordinates:
                if settings.api_key() and not guards.host_allowed(self.start_host, self.env.host or "", options):
                    raise SettingsError(guards.HOST_CHANGE_REFUSED)
                if self.out_given:
                    guards.claim_run_dir(Path(settings.out), settings.overwrite)
                server = runmod.coordinate(options, settings, self.env.host or "", not self.out_given)
            else:
                server = identify(self.env.host or "", api_key=settings.api_key(),
                                  timeout=settings.connect_timeout)
            # Workers split one prompt order between them (the master ships expect_workers to each).
            workers = int(getattr(options, "expect_workers", 1) or 1) if isinstance(runner, WorkerRunner) else 1
            ctx = runmod.build_context(options, worker, server, runs_users=self.runs_users, workers=workers)
        except (SettingsError, PromptError) as exc:
            fail(str(exc))
        ctx.live = self.live
        setattr(self.env, "specbench_run", ctx)  # noqa: B010 - read by the users through LLMUser
        if self.coordinates:
            self.meta = runmod.initial_meta(ctx, self.env.host or "")
            write_meta(ctx.run_dir, self.meta)
            self.steps.open(ctx.run_dir)
            log.info("Run directory: %s (api %s, model %s, server %s%s)", ctx.run_dir, ctx.api, ctx.model,
                     server.kind, ", speculative" if server.speculative else "")

    def on_test_stop(self) -> None:
        if self.shape is not None and self.coordinates:
            self.shape.stop_now()

    def on_quitting(self) -> None:
        ctx = getattr(self.env, "specbench_run", None)
        if ctx is not None and ctx.records is not None:
            ctx.records.close()
        if self.coordinates and ctx is not None and self.meta is not None:
            completed = self.shape.completed if self.shape is not None else True
            runmod.finish_meta(ctx.run_dir, self.meta, completed)
            for line in self.failed_steps:
                log.error(line)
            # A partial run is never a success, whichever signal path stopped it; too many errors neither.
            if not completed and self.env.process_exit_code is None:
                self.env.process_exit_code = 130
            elif self.failed_steps and self.env.process_exit_code is None:
                self.env.process_exit_code = guards.EXIT_TOO_MANY_ERRORS
        self.steps.close()
        if self.emulator is not None:
            self.emulator.stop()


def fail(message: str) -> None:
    """A user mistake: one clear line, exit code 2, no traceback."""
    sys.stderr.write(f"specbench: error: {redact(message)}\n")
    sys.stderr.flush()
    raise SystemExit(2)


def install(environment: Environment, argv: list[str] | None = None) -> RunHooks:
    """Attach the suite to one Environment whose runner exists (call from the ``init`` event)."""
    hooks = RunHooks(environment)
    environment.events.test_start.add_listener(lambda **_kw: hooks.on_test_start())
    environment.events.test_stop.add_listener(lambda **_kw: hooks.on_test_stop())
    environment.events.quitting.add_listener(lambda **_kw: hooks.on_quitting())
    hooks.on_init(sys.argv if argv is None else argv)
    return hooks


def add_options(parser: Any, **_kw: Any) -> None:
    add_arguments(parser)
    # The web UI has no login by default and its form can start load: loopback only unless the user widens it
    # (an explicit --web-host or LOCUST_WEB_HOST still wins over this default).
    parser.set_defaults(web_host="127.0.0.1")
