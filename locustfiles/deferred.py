"""End-of-request work that waits until the users ready to send have sent: each record's way to disk and books.

Why: when continuous batching ends many streams in one decode step, one poll of the event loop wakes all their
users, and each runs until it blocks. A user that built and wrote its record, counted it in the books and
reported it to Locust before sending its next request made every user behind it wait for that too: at C=250
with every stream ending in one step, that work was about a third of the send lag. Now a user queues it and
sends first; one greenlet works the queue, started as a callback of the loop's next turn, so after the users
woken in this one have sent, and it yields to the loop between items, so bytes that arrive meanwhile are read
(and stamped) on time. A record reaches disk a few milliseconds after its request ended instead of before the
user's next send; ``flush`` runs what is queued at once where a run ends (before its files close or its last
step is judged).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

import gevent

log = logging.getLogger(__name__)


class AfterSends:
    """The process's queue of end-of-request work (one event loop, one queue)."""

    def __init__(self) -> None:
        self._items: deque[Callable[[], None]] = deque()
        self._worker: gevent.Greenlet | None = None

    def add(self, work: Callable[[], None]) -> None:
        self._items.append(work)
        if self._worker is None:
            self._worker = gevent.spawn(self._run)

    def _run(self) -> None:
        try:
            gevent.sleep(0)  # started by the first user woken in this turn: the others' sends are queued first
            while self._items:
                _do(self._items.popleft())
                gevent.sleep(0)  # one turn of the loop: arrived bytes, and users ready to send, go first
        finally:
            self._worker = None

    def flush(self) -> None:
        """Do what is queued now, in the caller's greenlet."""
        while self._items:
            _do(self._items.popleft())

    def __len__(self) -> int:
        return len(self._items)


def _do(work: Callable[[], None]) -> None:
    try:
        work()
    except Exception:  # a fault of ours: said, and the other users' records still go their way
        log.exception("end-of-request work failed; this request's record may be missing")


AFTER_SENDS = AfterSends()
