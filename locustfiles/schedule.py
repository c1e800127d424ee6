"""``Schedule``: what an open-loop schedule offers the pacer, one claim of a due time at a time.

Its own module, under both the run plan that holds a process's schedule (``locustfiles.run``) and the pacer that
claims from it (``locustfiles.pacer``), so that neither imports the other. The rate ladder's arrivals
(``shapes.arrivals.ArrivalClock``) and the trace's rows (``locustfiles.replay.TraceSchedule``) are schedules.
"""

from __future__ import annotations

from typing import Protocol

from specbench.shapes.arrivals import Claim
from specbench.shapes.live import LiveStep

__all__ = ["Schedule"]


class Schedule(Protocol):
    """One process's due times in open loop, handed out one claim at a time."""

    def claim(self, live: LiveStep, now_s: float, free_since_s: float) -> Claim:
        """The next due time of step ``live.index`` for a user free since ``free_since_s`` (this process's
        clock), and how many due times passed unsent before it (see ``Claim``)."""
        ...
