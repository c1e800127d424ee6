"""Open loop on top of Locust's users: a user waits for the next due time of its process's schedule.

Locust's users are closed loops (send, wait for the answer, send again); ``constant_throughput`` paces each
user on its own and fires them in bursts. Here a pool of ``--max-in-flight`` users shares one schedule per
process (``shapes.arrivals``). Free users queue on one lock; the user holding it claims the next due time,
sleeps until it, releases the lock and sends, so only one due time is ever held, arrivals follow the schedule
however slow the answers are, and a step change is picked up at the next claim. When every user of the pool
is busy nobody queues: the due times that pass are dropped, counted and reported to the master, which flags
the step.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import gevent
from gevent.lock import Semaphore

from locustfiles.messages import DROP_MESSAGE
from locustfiles.run import RunContext
from shapes.arrivals import ArrivalClock

_LOCKS: weakref.WeakKeyDictionary[ArrivalClock, Semaphore] = weakref.WeakKeyDictionary()


def wait_for_due(ctx: RunContext, runner: Any) -> float | None:
    """Sleep until this user's turn in the schedule and return its due time; None when nothing is to be sent."""
    clock = ctx.arrivals
    assert clock is not None
    free_since = time.time()
    lock = _LOCKS.setdefault(clock, Semaphore())
    with lock:
        while True:
            live = ctx.live
            if live.draining or live.index is None or not live.target_rate:
                gevent.sleep(0.05)
                return None
            step = live.index
            due, dropped = clock.claim(step, float(live.target_rate), time.time(), free_since)
            if dropped and runner is not None:
                runner.send_message(DROP_MESSAGE, {"step": step, "count": dropped})
            delay = due - time.time()
            if delay > 0:
                gevent.sleep(delay)
            if ctx.live.index == step and not ctx.live.draining:
                return due
            free_since = time.time()  # the step changed while it slept: claim from the new step's schedule
