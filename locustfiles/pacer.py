"""Open loop on top of Locust's users: a user waits for the next due time of its process's schedule.

Locust's users are closed loops (send, wait for the answer, send again); ``constant_throughput`` paces each
user on its own and fires them in bursts. Here a pool of ``--max-in-flight`` users shares one schedule per
process: the rate ladder's arrivals (``shapes.arrivals.ArrivalClock``) or the trace's rows
(``locustfiles.replay.TraceSchedule``). Free users queue on one lock (``locustfiles.freeusers``, the newest
first); the user holding it claims the next due time, sleeps until it, releases the lock and sends, so only
one due time is ever held, arrivals follow the schedule however slow the answers are, and a step change is
picked up at the next claim. When every user of the pool is busy nobody queues: the due times that pass are
dropped, counted and reported to the master, which flags the step. One loop serves both schedules; each says
only which due time comes next. The lock holder sleeps on a kernel timer (``locustfiles.precisesleep``):
gevent's own sleep wakes up to a millisecond late.
"""

from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any

import gevent

from specbench.contract.messages import DROP_MESSAGE
from specbench.locustfiles.freeusers import FreeUsers
from specbench.locustfiles.precisesleep import PreciseSleeper
from specbench.locustfiles.schedule import Schedule
from specbench.shapes.arrivals import Claim

if TYPE_CHECKING:
    from specbench.locustfiles.run import RunContext


_LOCKS: weakref.WeakKeyDictionary[Schedule, tuple[FreeUsers, PreciseSleeper]] = weakref.WeakKeyDictionary()


def wait_for_turn(ctx: RunContext, runner: Any) -> Claim | None:
    """Sleep until this user's turn in ``ctx.schedule`` and return its claim (due time in this process's clock);
    None when nothing is to be sent now (between steps, the ladder draining, a step with nothing left)."""
    schedule = ctx.schedule
    assert schedule is not None
    free_since = time.time()
    # One lock per schedule, made without yielding between the look-up and the insert: two users each holding a
    # lock of their own would claim due times side by side (a sleeper that once yielded here let 48 users in
    # at once, claiming the schedule seconds ahead, and the next step dropped half its arrivals).
    pair = _LOCKS.get(schedule)
    if pair is None:
        pair = _LOCKS[schedule] = (FreeUsers(), PreciseSleeper())
    lock, sleeper = pair
    with lock.turn(free_since):  # one sleeper at a time (the timer is the holder's), the newest free user first
        while True:
            live = ctx.live
            step = live.index
            if live.draining or step is None:
                gevent.sleep(0.05)
                return None
            claim = schedule.claim(live, time.time(), lock.oldest_free_since(free_since))
            if claim.dropped and runner is not None:
                runner.send_message(DROP_MESSAGE, {"step": step, "count": claim.dropped})
            if claim.due_s is None:
                if claim.dropped:  # the schedule moved past what it dropped: claim again
                    continue
                gevent.sleep(0.05)
                return None
            delay = claim.due_s - time.time()
            if delay > 0:
                sleeper.sleep_until(time.monotonic() + delay)
            if ctx.live.index == step and not ctx.live.draining:
                return claim
            free_since = time.time()  # the step changed while it slept: claim from the new step's schedule
