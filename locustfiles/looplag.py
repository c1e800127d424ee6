"""This process's event-loop lateness (``contract.laghist``): a timer every ``TICK_S``, how late it fired.

One per load process, started when it first runs users; its histogram only grows, and the shape (or, on a
worker, the CPU message to the master) samples it at each step's start and end. Cost: 50 wake-ups a second.
"""

from __future__ import annotations

import time

import gevent

from specbench.contract import laghist

TICK_S = 0.02


class LoopLag:
    """Counts of how late a ``TICK_S`` sleep came back, by ``laghist`` bin, since the process started it."""

    def __init__(self) -> None:
        self.counts = laghist.empty()
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            began = time.perf_counter()
            gevent.sleep(TICK_S)
            self.counts[laghist.bin_of((time.perf_counter() - began - TICK_S) * 1000.0)] += 1

    def snapshot(self) -> list[int]:
        return list(self.counts)


LOOP_LAG = LoopLag()
