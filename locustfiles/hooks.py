"""Wiring to Locust's events: options, the embedded emulator, run context, records and step books.

Everything hangs on named Locust events and custom messages; no runner internals are patched. ``install``
takes one Environment, so tests can wire several in one process, each with its own ``Events``. Each process
role has its class, in its own module (``CoordinatorHooks`` for the local runner in ``coordinatorhooks.py``,
``MasterHooks`` in ``masterhooks.py``, ``WorkerHooks`` in ``workerhooks.py``, what they share, ``RunHooks``, in
``runhooks.py``), chosen once by ``hooks_for`` from the runner's kind, as Locust has one runner class per role.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from specbench.contract.limits import LimitError, check_processes
from specbench.contract.settings import add_arguments
from specbench.locustfiles.coordinatorhooks import CoordinatorHooks
from specbench.locustfiles.deferred import AFTER_SENDS
from specbench.locustfiles.link import add_link_options
from specbench.locustfiles.masterhooks import MasterHooks
from specbench.locustfiles.runhooks import RunHooks
from specbench.locustfiles.workerhooks import WorkerHooks


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
