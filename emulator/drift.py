"""Speed drift over wall time (``--drift F``, profile key ``drift_per_min``).

Real servers do not keep one speed for a whole run: GPUs warm up and throttle, a neighbour tenant starts. A drifting
emulator gives a benchmark's drift detection a known truth to be tested against. The definition is deliberately
linear and has one parameter:

    speed(t) = speed * max(0.05, 1 + F * t / 60)

``t`` is the seconds of wall time (a monotonic clock) since the server started; ``F`` is the relative change of
speed per minute (-0.10: 10% slower after one minute, 20% after two; +0.10: 10% faster). The floor keeps the server
from stopping or running backwards. The scheduler divides every step's modelled duration (decode and prefill) by
``factor(step start)``; fault stalls, the start-up delay and the health probe do not drift. ``F = 0`` leaves every
duration exactly as it was (``stretch`` returns it untouched).
"""

from __future__ import annotations

import time

__all__ = ["FLOOR", "Drift"]

#: The lowest speed drift can reach, as a share of the speed at start.
FLOOR = 0.05


class Drift:
    """The speed factor of one server over time, measured from ``started_s`` (``time.monotonic`` seconds)."""

    __slots__ = ("per_min", "started_s")

    def __init__(self, per_min: float, started_s: float | None = None) -> None:
        self.per_min = per_min
        self.started_s = time.monotonic() if started_s is None else started_s

    def factor(self, now_s: float) -> float:
        """Speed at monotonic time ``now_s`` relative to the speed at start: ``max(FLOOR, 1 + F * t / 60)``."""
        return max(FLOOR, 1.0 + self.per_min * (now_s - self.started_s) / 60.0)

    def stretch(self, duration_s: float, now_s: float) -> float:
        """A modelled duration that starts at ``now_s``, at the speed of that moment (unchanged without drift)."""
        if self.per_min == 0.0:
            return duration_s
        return duration_s / self.factor(now_s)
