"""One process's schedule of request due times in open loop: seeded Poisson, gamma or constant arrivals.

Gamma gaps with shape B (``--burstiness``) and mean 1/rate (scale 1/(rate x B)), as vLLM's benchmark draws
them: B = 1 is Poisson, B < 1 bunches sends between long lulls (gap CV 1/sqrt(B)), B > 1 evens them out.

Free users queue for the schedule; the first in the queue claims the next due time, sleeps until it, sends,
and the next free user claims the one after, so the schedule never waits for a response: a slow server only
means more requests in flight. A due time earlier than the moment the claiming user became free (it was the
longest-waiting free user) fell due while every user of the pool was busy: it is dropped (never sent late,
which would bend the arrival process) and counted. Pure: no gevent, no Locust; the clock is passed in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import NamedTuple

from specbench.shapes.live import LiveStep


class Claim(NamedTuple):
    """A free user's claim on its process's open-loop schedule (``locustfiles.pacer``)."""

    due_s: float | None  # when its request is due, in this process's clock; None: nothing to send from it
    dropped: int  # due times that passed while every user was busy: dropped (never sent late), counted
    row: int | None = None  # --trace: the row of the step's window it sends


@dataclass
class ArrivalSchedule:
    """Due times ``anchor_s + gap_1 + ... + gap_k`` for one step on one process."""

    step: int
    rate: float  # requests/s on this process
    mode: str  # "poisson", "gamma" or "constant"
    anchor_s: float
    seed: str
    dropped: int = 0
    burstiness: float = 1.0  # gamma: the gaps' shape
    _next_s: float = field(init=False)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._next_s = self.anchor_s + self._gap()

    def _gap(self) -> float:
        if self.mode == "constant":
            return 1.0 / self.rate
        if self.mode == "gamma":
            return self._rng.gammavariate(self.burstiness, 1.0 / (self.rate * self.burstiness))
        return self._rng.expovariate(self.rate)

    def claim(self, free_since_s: float) -> tuple[float, int]:
        """(the next due time not before ``free_since_s``, how many earlier ones were skipped as dropped).

        ``free_since_s``: when the claiming user became free. The due time returned may already have passed
        (by the scheduler's latency in handing over the claim); it is then sent at once, late, and its
        lateness shows in the record (``start_s - scheduled_s``).
        """
        skipped = 0
        while self._next_s < free_since_s:
            skipped += 1
            self._next_s += self._gap()
        due = self._next_s
        self._next_s += self._gap()
        self.dropped += skipped
        return due, skipped


class ArrivalClock:
    """The process's current schedule; a new one starts (anchored at that moment) whenever the step changes."""

    def __init__(self, mode: str, seed: int, worker: int, workers: int, burstiness: float = 1.0) -> None:
        self.mode = mode
        self.burstiness = burstiness
        self.seed = seed
        self.worker = worker
        self.workers = max(1, workers)
        self.schedule: ArrivalSchedule | None = None

    def claim(self, live: LiveStep, now_s: float, free_since_s: float) -> Claim:
        """The next due time of the live step at its rate for a user free since ``free_since_s`` (see
        ``ArrivalSchedule``); none while the step has no rate (closed loop, or between steps)."""
        step, rate = live.index, live.target_rate
        if step is None or not rate:
            return Claim(None, 0)
        sched = self.schedule
        if sched is None or sched.step != step:
            # Each of N processes sends 1/N of the rate; seeded per run seed, step and process.
            sched = ArrivalSchedule(step=step, rate=rate / self.workers, mode=self.mode, anchor_s=now_s,
                                    seed=f"{self.seed}:{step}:{self.worker}", burstiness=self.burstiness)
            self.schedule = sched
            free_since_s = now_s
        return Claim(*sched.claim(free_since_s))
