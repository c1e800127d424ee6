"""Sleep until a due time to within a fraction of a millisecond, on the event loop, without spinning.

Why: open loop sends each request at its schedule's time, and ``gevent.sleep`` wakes late by up to a millisecond
on a quiet process (its loop waits in ``epoll_wait``, whose timeout is whole milliseconds: measured here, a
median 0.73 ms and p90 1.1 ms late), so every send of a slow rate step was late by about that much. A Linux
``timerfd`` is a kernel high-resolution timer read as a file descriptor: the loop waits for it to become
readable, which the kernel makes it at the due time, not at the next millisecond (median 0.08 ms late,
measured the same way). Python 3.11 has no ``os.timerfd_create``, so it is called through ``ctypes``; where it
is missing (not Linux, no libc) the sleep is gevent's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time

import gevent
from gevent.socket import wait_read

_CLOCK_MONOTONIC = 1  # time.monotonic's clock on Linux
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = 0o2000000  # O_CLOEXEC on x86-64 and arm64 (asm-generic)
_TFD_TIMER_ABSTIME = 1
#: how much later than the due time the waiting greenlet gives up on the timer and goes on (it never should)
_SAFETY_S = 1.0


def _libc() -> ctypes.CDLL | None:
    """The C library's functions, from the running process's own symbols (no search: ``ctypes.util.find_library``
    starts a subprocess, which under gevent yields to other greenlets)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.timerfd_create  # noqa: B018  # present (glibc, musl), else AttributeError
        libc.timerfd_settime  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()  # at import: creating a sleeper must never yield (``locustfiles.pacer`` creates one under no lock)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class PreciseSleeper:
    """One timer for one sleeper at a time (the pacer's lock holder): ``sleep_until`` a ``time.monotonic`` due."""

    __slots__ = ("_fd", "_libc")

    def __init__(self) -> None:
        """Never yields to the event loop (one system call)."""
        self._libc: ctypes.CDLL | None = None
        self._fd = -1
        if _LIBC is None:
            return
        fd = int(_LIBC.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC))
        if fd >= 0:
            self._libc, self._fd = _LIBC, fd

    @property
    def precise(self) -> bool:
        """Whether sleeps use the kernel's timer (else gevent's, late by up to a millisecond)."""
        return self._libc is not None

    def sleep_until(self, due: float) -> None:
        """Return at ``due`` (``time.monotonic``), yielding to the event loop meanwhile."""
        delay = due - time.monotonic()
        if delay <= 0:
            return
        if self._libc is None or not self._arm(due):
            gevent.sleep(delay)
            return
        with contextlib.suppress(TimeoutError):
            wait_read(self._fd, timeout=delay + _SAFETY_S)
        with contextlib.suppress(BlockingIOError):
            os.read(self._fd, 8)  # the expiry count: read so the next wait starts from a quiet timer

    def _arm(self, due: float) -> bool:
        sec = int(due)
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(sec, int((due - sec) * 1e9)))
        assert self._libc is not None
        return int(self._libc.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None)) == 0

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd, self._libc = -1, None
