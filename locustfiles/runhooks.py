"""What every process role's hooks share (``RunHooks``), and ``fail``: one line and exit code 2 for a user mistake.

Each role's class lives in its own module (``coordinatorhooks``, ``masterhooks``, ``workerhooks``);
``locustfiles.hooks`` chooses one per process and wires it to Locust's events.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, NoReturn

import gevent
from locust.env import Environment

from specbench.contract.redact import install_log_filter, redact
from specbench.contract.settings import SettingsError, SuiteSettings, settings_of
from specbench.locustfiles import run as runmod
from specbench.locustfiles.console import install_console
from specbench.locustfiles.prompts import PromptError
from specbench.locustfiles.recorder import WRITE_FAILURES, on_write_failure
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


def fail(message: str) -> NoReturn:
    """A user mistake: one clear line, exit code 2, no traceback."""
    sys.stderr.write(f"specbench: error: {redact(message)}\n")
    sys.stderr.flush()
    raise SystemExit(2)
