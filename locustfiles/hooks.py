"""Wiring to Locust's events: options, the embedded emulator, run context, records and step books.

Everything hangs on named Locust events and custom messages; no runner internals are patched. ``install``
takes one Environment, so tests can wire several in one process, each with its own ``Events``.
"""

from __future__ import annotations

import logging
import signal
import sys
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from contract.schema import RunMeta
from contract.settings import SettingsError, add_arguments, apply_profile, settings_of
from locustfiles import run as runmod
from locustfiles.prompts import PromptError
from locustfiles.recorder import write_meta
from locustfiles.target import EmulatorProcess, start_emulator_process
from shapes.ladder import ConcurrencyLadder
from shapes.live import PLAN_MESSAGE, RECORD_MESSAGE, START_MESSAGE, STEP_MESSAGE, LiveStep

log = logging.getLogger("specbench")


class RunHooks:
    """Per-environment state the listeners share: live step, run context, meta, steps writer, emulator."""

    def __init__(self, environment: Environment) -> None:
        self.env = environment
        self.live = LiveStep()
        self.meta: RunMeta | None = None
        self.steps = runmod.StepsWriter()
        self.emulator: EmulatorProcess | None = None
        self.plan: runmod.RunPlan | None = None  # on a worker: the master's plan for the current run

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
        if self.runs_users:
            runner.register_message(STEP_MESSAGE, self._on_step_message)
        if not self.coordinates:
            runner.register_message(PLAN_MESSAGE, self._on_plan_message)
        if not self.coordinates:
            return
        options = self.env.parsed_options
        if options is not None:
            try:
                apply_profile(options, argv)
                settings_of(options)  # fail fast, before any load, on a bad flag or profile value
            except SettingsError as exc:
                fail(str(exc))
            if not self.env.host:
                self._start_embedded_emulator(options)
        runner.register_message(START_MESSAGE, self._on_start_message)
        runner.register_message(RECORD_MESSAGE, self._on_record_message)
        if self.shape is not None:
            self.shape.on_step_closed.append(self.steps)
        if options is not None and getattr(options, "headless", False):
            # Locust 2.47 installs its SIGTERM handler only after a headless shape run has ended (a SIGTERM
            # during the ladder kills the process with nothing closed), and Ctrl-C raises KeyboardInterrupt
            # in whichever greenlet happens to run. Both now end the shape, so Locust stops in order.
            for signum in (signal.SIGTERM, signal.SIGINT):
                gevent.signal_handler(signum, self._on_stop_signal, signum)

    def _on_stop_signal(self, signum: int) -> None:
        log.info("Got %s: stopping the ladder; every finished request is kept", signal.Signals(signum).name)
        runner = self.env.runner
        if runner is not None and runner.shape_greenlet is not None:
            runner.shape_greenlet.kill(block=False)
        elif runner is not None:
            runner.quit()

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

    def _on_step_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        self.live.update(msg.data)

    def _on_plan_message(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        self.plan = runmod.RunPlan.from_message(msg.data)

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
            settings = settings_of(options)
            if self.coordinates:
                plan = runmod.plan_run(settings, self.env.host or "")
                if isinstance(runner, MasterRunner):  # sent before Locust's spawn messages, so it arrives first
                    runner.send_message(PLAN_MESSAGE, plan.to_message())
            elif self.plan is None:
                fail("worker: no run plan arrived from the master before the test started")
            else:
                plan = self.plan
            # Workers split one prompt order between them (the master ships expect_workers to each).
            workers = int(getattr(options, "expect_workers", 1) or 1) if isinstance(runner, WorkerRunner) else 1
            ctx = runmod.build_context(settings, plan, worker, runs_users=self.runs_users, workers=workers)
        except (SettingsError, PromptError) as exc:
            fail(str(exc))
        ctx.live = self.live
        setattr(self.env, "specbench_run", ctx)  # noqa: B010 - read by the users through LLMUser
        if self.coordinates:
            self.meta = runmod.initial_meta(ctx, self.env.host or "")
            write_meta(ctx.run_dir, self.meta)
            self.steps.open(ctx.run_dir)
            log.info("Run directory: %s (api %s, model %s, server %s%s)", ctx.run_dir, ctx.api, ctx.model,
                     ctx.server.kind, ", speculative" if ctx.server.speculative else "")

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
        self.steps.close()
        if self.emulator is not None:
            self.emulator.stop()
            log.info("Stopped the built-in emulator at %s", self.emulator.url)


def fail(message: str) -> None:
    """A user mistake: one clear line, exit code 2, no traceback."""
    sys.stderr.write(f"specbench: error: {message}\n")
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
