"""When a read's bytes could first have been seen: the moment the event loop's poll returned them.

Why: every Locust user is a greenlet on one event loop. When many streams have bytes at once (a first token
or a last chunk in the same decode step), one poll wakes them all and the loop runs them one after another;
the last one's read returns after all the others' work. Stamping a chunk with the time its read returned put
that queue into its TTFT (and its stream's end, so into the next request's send lag without counting it).
A ``check`` watcher runs right after each poll, before the loop hands out what it found; a read that waited
on the loop can be stamped with that moment, the one when the process learnt its bytes were there, whatever
its place in the queue (``locustfiles.sse.EventReader`` says which events get it).
"""

from __future__ import annotations

import time
from typing import Any

import gevent


class WakeClock:
    """The poll-return time of the event loop's latest iteration, and a count of iterations."""

    __slots__ = ("_watcher", "iteration", "polled_at")

    def __init__(self, loop: Any) -> None:
        self.iteration = 0
        self.polled_at = time.perf_counter()
        self._watcher = loop.check()
        self._watcher.start(self._on_poll)

    def _on_poll(self) -> None:
        self.iteration += 1
        self.polled_at = time.perf_counter()


_clocks: dict[int, WakeClock] = {}


def wake_clock() -> WakeClock:
    """This thread's event loop's clock, started on first use (one watcher per loop, for the process's life)."""
    hub = gevent.get_hub()
    clock = _clocks.get(id(hub))
    if clock is None:
        clock = _clocks[id(hub)] = WakeClock(hub.loop)
    return clock
