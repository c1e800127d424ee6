"""A worker's hooks (``WorkerHooks``): follow the master's plan and steps, send it everything, write no file."""

from __future__ import annotations

import logging
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import STATE_RUNNING, STATE_SPAWNING, WorkerRunner

from specbench.contract.messages import (
    CLOCK_MESSAGE,
    PLAN_MESSAGE,
    SEQ_GRANT_MESSAGE,
    STEP_MESSAGE,
    WELCOME_MESSAGE,
)
from specbench.contract.settings import SuiteSettings
from specbench.locustfiles import run as runmod
from specbench.locustfiles.link import WorkerLink, run_token
from specbench.locustfiles.looplag import LOOP_LAG
from specbench.locustfiles.masterwatch import watch_master
from specbench.locustfiles.runhooks import RunHooks, fail
from specbench.locustfiles.sequencer import WorkerSequence

log = logging.getLogger("specbench")


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
