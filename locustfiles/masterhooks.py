"""A master's hooks (``MasterHooks``): the local runner's decisions, no users, and the workers' admission."""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import STATE_RUNNING, STATE_SPAWNING, MasterRunner

from specbench.contract.messages import (
    CLOCK_MESSAGE,
    CPU_MESSAGE,
    HELLO_MESSAGE,
    PLAN_MESSAGE,
    SEQ_ASK_MESSAGE,
    SEQ_GRANT_MESSAGE,
    STEP_MESSAGE,
)
from specbench.contract.settings import SuiteSettings
from specbench.locustfiles import run as runmod
from specbench.locustfiles.coordinatorhooks import CoordinatorHooks
from specbench.locustfiles.fleet import Fleet
from specbench.locustfiles.link import run_token

log = logging.getLogger("specbench")


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
