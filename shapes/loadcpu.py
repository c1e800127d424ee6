"""CPU use of every load process over a ladder step, as percent of one core.

Why: a load process near a full core delays reading streams, so TTFT and inter-token figures grow with the
client, not the server. Above ``CLIENT_BOUND_PCT`` the step is flagged ``client_bound``; the cure is more
processes (``--processes N``, or more workers). Every process's figure is busy seconds over wall seconds between
the step's first and last sample; busy = CPU seconds plus, on Linux, seconds its main thread waited in the run
queue for a CPU (``/proc/self/schedstat``): on a machine with more runnable work than cores a saturated
process gets well under a core of CPU time, yet it is the client that limits the step. The master (or local
runner) reads its own figure, workers send theirs once a second (Locust's heartbeat figure is refreshed only
every few seconds, too coarse for short steps).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil

from specbench.contract import laghist
from specbench.contract.policy import CLIENT_BOUND_CPU

CLIENT_BOUND_PCT = 100.0 * CLIENT_BOUND_CPU
SCHEDSTAT = "/proc/self/schedstat"


class LoadCpu:
    """One step's CPU figures: ``begin`` at the step's start, ``sample`` each tick, ``finish`` at its end.

    A sample is each process's cumulative CPU seconds and the time (its own monotonic clock) it was read;
    a process's figure is the CPU time between its first and last sample of the step over the time between.
    """

    def __init__(self, own_name: str = "local", own_lag: Callable[[], list[int]] | None = None) -> None:
        self.own_name = own_name
        self.own_lag = own_lag  # this process's event-loop lateness histogram (contract.laghist) where it runs users
        self._first: dict[str, tuple[float, float]] = {}
        self._last: dict[str, tuple[float, float]] = {}
        self._lag_first: dict[str, list[int]] = {}
        self._lag_last: dict[str, list[int]] = {}

    def own(self) -> tuple[float, float]:
        return process_busy_seconds(), time.monotonic()

    def begin(self) -> None:
        self._first, self._last = {}, {}
        self._lag_first, self._lag_last = {}, {}
        self.sample({})

    def sample(self, workers: dict[str, tuple[float, float]], lags: dict[str, list[int]] | None = None) -> None:
        for name, point in {self.own_name: self.own(), **workers}.items():
            self._first.setdefault(name, point)
            self._last[name] = point
        own = {self.own_name: self.own_lag()} if self.own_lag is not None else {}
        for name, counts in {**own, **(lags or {})}.items():
            self._lag_first.setdefault(name, counts)
            self._lag_last[name] = counts

    def read_lag_p90_ms(self) -> dict[str, float]:
        """Each process's event-loop lateness p90 between the step's first and last sample (``contract.laghist``);
        a process with too few timer samples in between has none."""
        out: dict[str, float] = {}
        for name, first in self._lag_first.items():
            p90 = laghist.quantile_ms(laghist.between(first, self._lag_last[name]), 0.9)
            if p90 is not None:
                out[name] = round(p90, 2)
        return out

    def stalled_s(self, at_least_ms: float) -> dict[str, float]:
        """Each process's seconds of event-loop stalls of ``at_least_ms`` or more over the step (a floor), where
        it had any: how a paused worker shows, since only the master's own clock is watched tick by tick."""
        out: dict[str, float] = {}
        for name, first in self._lag_first.items():
            stalled = laghist.stalled_s(laghist.between(first, self._lag_last[name]), at_least_ms)
            if stalled > 0:
                out[name] = round(stalled, 2)
        return out

    def finish(self) -> dict[str, float]:
        self.sample({})
        out: dict[str, float] = {}
        for name, (cpu0, t0) in self._first.items():
            cpu1, t1 = self._last[name]
            if t1 - t0 > 0.2:
                out[name] = round(100.0 * (cpu1 - cpu0) / (t1 - t0), 1)
        return out


def run_queue_wait_s() -> float:
    """Seconds this process's main thread has waited for a CPU while runnable (0 where the kernel does not say)."""
    try:
        with open(SCHEDSTAT, encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def process_busy_seconds() -> float:
    """CPU seconds of every thread, plus the main thread's wait for a CPU: what this process asked for."""
    t = psutil.Process().cpu_times()
    return float(t.user + t.system) + run_queue_wait_s()


def client_bound(cpu: dict[str, float]) -> bool:
    return any(v > CLIENT_BOUND_PCT for v in cpu.values())
