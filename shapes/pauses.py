"""Times the load process itself stood still: a paused process, a sleeping laptop, a frozen VM.

Why: while the load process is stopped (SIGTSTP then SIGCONT, a suspended machine, a VM the host froze) no
request is sent and no chunk is read, yet the clocks run on: the step's throughput falls, its latencies grow by
the pause, and nothing in the records says the client, not the server, stood still. The shape's tick runs about
once a second; a gap between two ticks longer than ``PAUSE_S`` beyond that second is a pause. Measured on
``CLOCK_BOOTTIME`` where the system has it (it counts a suspended machine's sleep; ``CLOCK_MONOTONIC`` does not).
A busy event loop delays a tick by milliseconds, not seconds, so the threshold leaves room for a loaded machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

TICK_S = 1.0  # Locust calls the shape's tick this often
PAUSE_S = 2.0  # a tick later than this beyond its second is a pause of the whole process

_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def steady_clock() -> float:
    """Seconds on a clock that runs through a suspended machine where the system has one."""
    return time.clock_gettime(_CLOCK)


@dataclass
class PauseWatch:
    """Each tick's clock readings; the pauses found, as (wall clock at the last tick before, seconds missed)."""

    pauses: list[tuple[float, float]] = field(default_factory=list)
    _last: tuple[float, float] | None = None  # (wall clock, steady clock) at the previous tick

    def observe(self, wall_s: float, steady_s: float) -> float:
        """Record this tick; returns the pause it ends (0.0 for none)."""
        last, self._last = self._last, (wall_s, steady_s)
        if last is None:
            return 0.0
        missed = steady_s - last[1] - TICK_S
        if missed <= PAUSE_S:
            return 0.0
        self.pauses.append((last[0], missed))
        return missed

    def paused_s(self, start_s: float, end_s: float) -> float:
        """Seconds of pauses that began between ``start_s`` and ``end_s`` (wall clock): the step's share."""
        return sum(missed for began, missed in self.pauses if start_s <= began < end_s)

    def reset(self) -> None:
        self.pauses.clear()
        self._last = None
