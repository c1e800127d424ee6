"""Which prompt each request gets, whatever the number of load processes: request N of a level gets prompt N.

Why: with every worker walking its own slice of the prompt order, a 4-process run and a local run (or a
baseline and a speculative run whose requests spread differently over the workers) sent different prompts at
the same level, and the comparison was no longer like for like. Here the master (or the local runner) owns
one counter per ladder step and hands out sequence numbers; every step starts at 0, so each level draws the
same prompts in the same order in every run (a run's levels differ only in how far they get).

Workers ask ahead of need, in blocks sized to their users, so a request never waits for a round trip
(except the first requests of a step, which wait one). Numbers a worker had reserved but did not use when its
step ended are the only gaps; they lie at the end of a level, inside the drain.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from gevent.event import Event

from specbench.contract.messages import SEQ_ASK_MESSAGE

log = logging.getLogger("specbench")


MIN_BLOCK = 4
WAIT_S = 30.0


class StepCounters:
    """On the master or local runner: the next unused sequence number of each step."""

    def __init__(self) -> None:
        self._next: dict[int | None, int] = {}

    def clear(self) -> None:
        self._next.clear()

    def take(self, step: int | None, n: int) -> int:
        """Reserve ``n`` consecutive numbers of ``step``; returns the first."""
        start = self._next.get(step, 0)
        self._next[step] = start + n
        return start

    def grant(self, data: dict[str, Any]) -> dict[str, Any]:
        """Answer a worker's ask."""
        step, n = data.get("step"), max(1, int(data.get("n", 1)))
        return {"step": step, "start": self.take(step, n), "n": n}


class LocalSequence:
    """Local runner: the counters are in this process."""

    def __init__(self, counters: StepCounters) -> None:
        self.counters = counters

    def next(self, step: int | None) -> int:
        return self.counters.take(step, 1)


class WorkerSequence:
    """A worker's pool of numbers granted by the master, refilled ahead of need."""

    def __init__(self, send: Callable[[str, dict[str, Any]], None], users: Callable[[], int]) -> None:
        self._send = send
        self._users = users
        self._step: int | None = None
        self._pool: deque[int] = deque()
        self._asked = 0  # numbers asked for the current step and not yet granted
        self._arrived = Event()

    def _block(self) -> int:
        return max(MIN_BLOCK, self._users())

    def _ask(self, step: int | None) -> None:
        n = self._block()
        self._asked += n
        self._send(SEQ_ASK_MESSAGE, {"step": step, "n": n})

    def on_grant(self, data: dict[str, Any]) -> None:
        if data.get("step") != self._step:
            return  # granted for a step that is over: those numbers stay unused (gaps at a level's end)
        start, n = int(data["start"]), int(data["n"])
        self._pool.extend(range(start, start + n))
        self._asked = max(0, self._asked - n)
        self._arrived.set()

    def next(self, step: int | None) -> int:
        if step != self._step:
            self._step, self._asked = step, 0
            self._pool.clear()
        waited = 0.0
        while not self._pool:
            if self._asked == 0:
                self._ask(step)
            self._arrived.clear()
            if not self._arrived.wait(timeout=1.0):
                waited += 1.0
                if waited >= WAIT_S:
                    raise RuntimeError(f"no prompt sequence numbers from the master for {WAIT_S:.0f} s")
                if waited % 5 == 0:
                    self._asked = 0  # ask again: the master may have missed it during a restart
        seq = self._pool.popleft()
        if len(self._pool) + self._asked < self._block():  # keep a block in hand: the next ask goes early
            self._ask(step)
        return seq

