"""SIGINT, SIGTERM and SIGHUP end a command as Ctrl-C does, and are never lost.

For the suite's plain-Python commands (``specbench``, ``python -m specbench.analysis``); it lives in
``contract`` so each layer's command can use it. Locust's processes use gevent's handlers instead
(``locustfiles.coordinatorhooks``, ``locustfiles.uisignals``).

The handler raises KeyboardInterrupt, but Python drops an exception raised where it cannot propagate: a
signal that lands while ``subprocess.Popen`` forks runs the handler inside an at-fork callback (logging's lock
release), the exception is printed as "Exception ignored" and the command ran on to exit 0 (seen in a CI run:
SIGTERM half a second into the spec run of ``specbench demo``). So the handler also records the signal, and
``raise_if_pending`` raises it again at the next point that can act on it (after a child has started), and
the dropped exception is not printed: Python's "Exception ignored ... Traceback" for it read as a crash where the
command in fact stops as asked (seen in a CI run beside two others: exit 130 with that traceback on stderr).
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

_pending: str | None = None


def on_signal(signum: int, _frame: FrameType | None) -> None:
    """Signal handler: remember the signal, then interrupt whatever runs now."""
    global _pending
    _pending = signal.Signals(signum).name
    raise KeyboardInterrupt(_pending)


def raise_if_pending() -> None:
    """Raise KeyboardInterrupt for a signal whose first KeyboardInterrupt was swallowed."""
    if _pending is not None:
        raise KeyboardInterrupt(_pending)


def _quiet_dropped_interrupt(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: silent for the KeyboardInterrupt of a recorded signal (``raise_if_pending`` raises
    it again), Python's own report for anything else."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and _pending is not None:
        return
    sys.__unraisablehook__(unraisable)


def install() -> None:
    """Route SIGINT, SIGTERM and SIGHUP to ``on_signal``. SIGINT too: a process started with SIGINT ignored (a
    background job of a non-interactive shell, as CI scripts run) keeps it ignored, and Ctrl-C or `kill -INT`
    was then lost while the ladder ran on. A signal recorded before this call is forgotten: it belonged to no run.
    A KeyboardInterrupt that Python drops is no longer printed (``_quiet_dropped_interrupt``)."""
    global _pending
    _pending = None
    sys.unraisablehook = _quiet_dropped_interrupt
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
