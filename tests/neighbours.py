"""How busy the rest of the machine was while a test ran: the CPU that neither the test's process nor anything it
started used, second by second.

Why: a few tests judge figures against a long run's mean (an interval's coverage of it). A constant neighbour
slows that run evenly and its mean stays the truth; a neighbour that comes and goes (another load run starting
and stopping) moves the emulator's pace within the run, so there is no single mean for the windows to cover.
Such a test measures this while it runs, and says it cannot judge rather than pass or fail on it.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from types import TracebackType

import psutil


def _own_cpu_s(me: psutil.Process) -> float:
    """CPU seconds of this process, its reaped children and every live descendant."""
    total = sum(me.cpu_times()[:4])  # user, system, children_user, children_system
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):  # gone since the listing: its time went to its parent's reaped sum
            total += sum(child.cpu_times()[:2])
    return total


def _busy_cpu_s() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


@dataclass
class NeighbourCpu:
    """``with NeighbourCpu() as cpu: ...``; then ``cpu.cores`` holds the neighbours' use, in cores, per interval."""

    every_s: float = 1.0
    cores: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> NeighbourCpu:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        me = psutil.Process()
        busy, own = _busy_cpu_s(), _own_cpu_s(me)
        while not self._stop.wait(self.every_s):
            busy_now, own_now = _busy_cpu_s(), _own_cpu_s(me)
            self.cores.append(max(0.0, (busy_now - busy) - (own_now - own)) / self.every_s)
            busy, own = busy_now, own_now

    def swing(self, span: int = 5) -> float:
        """How far the neighbours' use moved: the highest minus the lowest mean over ``span`` intervals, in cores."""
        if len(self.cores) < span:
            return 0.0
        means = [sum(self.cores[i:i + span]) / span for i in range(len(self.cores) - span + 1)]
        return max(means) - min(means)

    def mean(self) -> float:
        """The neighbours' mean use over the whole run, in cores."""
        return sum(self.cores) / len(self.cores) if self.cores else 0.0

    def text(self) -> str:
        return (f"other processes used {self.mean():.2f} cores on average, swinging by {self.swing():.2f} cores "
                f"(5-s means, {len(self.cores)} s sampled)")
