"""How busy each load process was during a step: CPU seconds per wall second, and the ``client_bound`` flag.

A Locust process is one gevent loop on one core. When it saturates, chunks are read late (TTFT and ITL
inflate) and new requests start late (throughput drops), and the step's figures describe the client, not the
server. Every process samples its own CPU time (psutil) every ``SAMPLE_S``; workers send their samples to
the master with a message, so the coordinating process can put each process's share of a core over the
step's window into the step line (``client_cpu``, ``client_cpu_max``) and flag it above ``CLIENT_BOUND_CPU``.

On a machine with more runnable processes than cores, a saturated loop gets less than a core: it spends the
rest waiting for one. So, where Linux reports it (``/proc/self/schedstat``), the loop thread's time waiting
in the run queue is added to its CPU time (``client_busy``, the share of a core it asked for), and the flag
is raised on that.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from typing import Any

import gevent
import psutil

from contract.policy import CLIENT_BOUND_CPU
from contract.schema import StepRecord

CPU_MESSAGE = "specbench_cpu"  # worker -> master: {"who": "w<N>", "t": wall s, "cpu": CPU s, "busy": s}
CLIENT_BOUND = "client_bound"
SAMPLE_S = 0.5
_KEEP = 4000  # samples per process: over half an hour at SAMPLE_S; a step longer than that is measured to its end


class CpuSeries:
    """(wall time, cumulative CPU seconds) of one process, in time order."""

    def __init__(self) -> None:
        self.t: deque[float] = deque(maxlen=_KEEP)
        self.cpu: deque[float] = deque(maxlen=_KEEP)
        self.busy: deque[float] = deque(maxlen=_KEEP)

    def add(self, t: float, cpu: float, busy: float) -> None:
        if self.t and t <= self.t[-1]:
            return
        self.t.append(t)
        self.cpu.append(cpu)
        self.busy.append(busy)

    def share(self, t0: float, t1: float, which: str = "cpu") -> float | None:
        """Seconds per wall second between the samples nearest outside [t0, t1] (1.0 = one full core)."""
        if len(self.t) < 2:
            return None
        times = list(self.t)
        values = self.cpu if which == "cpu" else self.busy
        i = max(0, bisect.bisect_right(times, t0) - 1)
        j = min(len(times) - 1, bisect.bisect_left(times, t1))
        if j <= i:
            return None
        return (values[j] - values[i]) / (times[j] - times[i])


def own_cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def loop_busy_seconds(cpu: float) -> float:
    """The main (gevent loop) thread's time on a CPU plus waiting for one; ``cpu`` where Linux does not say."""
    try:
        with open("/proc/self/schedstat", encoding="ascii") as fh:
            on_cpu_ns, waiting_ns = fh.read().split()[:2]
        return (int(on_cpu_ns) + int(waiting_ns)) / 1e9
    except (OSError, ValueError):
        return cpu


class ClientCpu:
    """Samples this process's CPU; on the coordinating process also collects the workers' and annotates steps.

    ``role`` is "local" (one process), "master" or "worker"; a worker is named "w<N>" in the step line, by the
    index the master gave it.
    """

    def __init__(self, runner: Any, role: str) -> None:
        self.runner = runner
        self.role = role
        self.coordinates = role != "worker"
        self.series: dict[str, CpuSeries] = {}
        self._process = psutil.Process()
        self._greenlet: gevent.Greenlet | None = None
        if role == "master":
            runner.register_message(CPU_MESSAGE, self._on_message)

    @property
    def who(self) -> str:
        return f"w{getattr(self.runner, 'worker_index', 0)}" if self.role == "worker" else self.role

    def start(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        greenlet, self._greenlet = self._greenlet, None
        if greenlet is not None:
            greenlet.kill(block=False)

    def _loop(self) -> None:
        while True:
            self.sample()
            gevent.sleep(SAMPLE_S)

    def sample(self) -> None:
        t, cpu = time.time(), own_cpu_seconds(self._process)
        busy = loop_busy_seconds(cpu)
        if self.coordinates:
            self.series.setdefault(self.who, CpuSeries()).add(t, cpu, busy)
        else:
            self.runner.send_message(CPU_MESSAGE, {"who": self.who, "t": t, "cpu": cpu, "busy": busy})

    def _on_message(self, environment: Any, msg: Any, **_kw: Any) -> None:
        data = msg.data
        self.series.setdefault(str(data["who"]), CpuSeries()).add(float(data["t"]), float(data["cpu"]),
                                                                  float(data.get("busy", data["cpu"])))

    def annotate(self, step: StepRecord) -> None:
        """Add each process's CPU share over the step's window (its whole span without one) to its line."""
        self.sample()  # the newest point, so a step that just ended is covered to its end
        t0 = step.get("steady_start_s") or step.get("start_s")
        t1 = step.get("end_s")
        shares: dict[str, float] = {}
        busy: dict[str, float] = {}
        if t0 is not None and t1 is not None and t1 > t0:
            for who, series in sorted(self.series.items()):
                value, wanted = series.share(t0, t1), series.share(t0, t1, "busy")
                if value is not None and wanted is not None:
                    shares[who], busy[who] = round(value, 4), round(wanted, 4)
        step["client_cpu"] = shares
        step["client_cpu_max"] = max(shares.values()) if shares else None
        step["client_busy_max"] = max(busy.values()) if busy else None
        if busy and max(busy.values()) > CLIENT_BOUND_CPU and CLIENT_BOUND not in step["flags"]:
            step["flags"].append(CLIENT_BOUND)
