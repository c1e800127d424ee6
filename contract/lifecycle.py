"""No process of the suite outlives its parent, whatever ended the parent (SIGKILL included).

Linux delivers a chosen signal to a process when its parent dies (``prctl(PR_SET_PDEATHSIG)``); the setting
is cleared in a forked child, so each child sets it for itself: ``preexec_fn`` for a Popen'd child, an
at-fork hook for Locust's ``--processes`` workers. Elsewhere these are no-ops (the emulator's parent-pid
watcher still holds).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent ends; exit now if it already has."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent or parent == 1:  # the parent died before the prctl took effect
        os.kill(os.getpid(), sig)


def forked_children_die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Every later fork of this process (Locust's --processes workers) ends when this process ends."""
    os.register_at_fork(after_in_child=lambda: die_with_parent(sig))
