"""SIGINT, SIGHUP and SIGTERM to a web UI process end it as Ctrl-C does: the run in progress stops in order.

Locust's web UI quits on SIGTERM and on Ctrl-C through its ``shutdown``, which fires ``quitting`` before it
stops the runner; the suite's ``quitting`` hook then stops the run first, as the UI's Stop does, so the open
step's line is written (``stop_running_test``). SIGHUP had no handler (the process died: exit 129, the open
step lost, ``meta.json`` never ended), and SIGINT none where the process started with it ignored (a background
job of a script): both now go the way of Ctrl-C, a KeyboardInterrupt in the main greenlet, where Locust's
``main`` waits on the UI and takes it as the signal to quit.
"""

from __future__ import annotations

import logging
import signal
from typing import Any

import gevent
from locust.runners import STATE_RUNNING, STATE_SPAWNING

log = logging.getLogger("specbench")
_handlers: list[Any] = []  # gevent's watchers live as long as their objects


def _quit_as_ctrl_c(signum: int) -> None:
    name = signal.Signals(signum).name
    log.info("Got %s: stopping the run and quitting; every finished request is kept", name)
    main = gevent.get_hub().parent  # the main greenlet, where Locust's main waits on the UI
    assert main is not None
    main.throw(KeyboardInterrupt(name))


def install_ui_signals() -> None:
    """In a process that serves the web UI: SIGINT (even if ignored at start) and SIGHUP quit as Ctrl-C."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        _handlers.append(gevent.signal_handler(signum, _quit_as_ctrl_c, signum))


def stop_running_test(runner: Any) -> None:
    """At quitting: stop a run still going as the UI's Stop does (its open step closed and written, meta.json
    ended), before the files close; Locust's own stop comes only after ``quitting``."""
    if runner is not None and runner.state in (STATE_RUNNING, STATE_SPAWNING):
        runner.stop()
