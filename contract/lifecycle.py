"""No process of the suite outlives its parent, whatever ended the parent (SIGKILL included).

Two means. Linux delivers a chosen signal to a process when its parent dies (``prctl(PR_SET_PDEATHSIG)``); the setting
is cleared in a forked child, so each child sets it for itself: ``preexec_fn`` for a Popen'd child, an
at-fork hook for Locust's ``--processes`` workers. Elsewhere these are no-ops (the emulator's parent-pid
watcher still holds). And a process group (a user's server command with the workers its launcher forked) is
stopped as a whole: SIGTERM, then SIGKILL to what is left after a timeout (``stop_group``), by specbench and by
its guardian alike.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM, parent: int | None = None) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent ends; send it now if it already has.

    ``parent``: the pid the parent had when it started this process. Without it, a parent that died before this
    call is noticed only if the orphan went to pid 1; in a container or under a subreaper it goes elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid() if parent is None else parent
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


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the process group; False once the group is gone (one we may not signal is still there)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in the group.

    Zombies count as members for ``killpg``, and in a container whose init does not reap orphans they stay
    forever, so on Linux the group is read from /proc instead.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return signal_group(pgid, 0)
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def stop_group(pgid: int, timeout_s: float, reap: Callable[[], object] | None = None) -> None:
    """SIGTERM to the group, SIGKILL after ``timeout_s`` to whatever is left; ``reap``: called while waiting,
    so the caller can reap its own child (the group's leader) and its zombie does not count as alive."""
    if not signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        if not group_alive(pgid):
            return
        time.sleep(0.1)
    signal_group(pgid, signal.SIGKILL)
