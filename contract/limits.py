"""The one table of limits: every number a user can give has a range a real machine can honour.

Checked before anything starts (``specbench`` before preflight and before any directory; the Locust child
again when it runs alone). Each bound carries its reason, which docs/reference/limits.md repeats, so a refusal
explains itself. A value outside its range (NaN and infinities included) is one line naming the flag.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


class LimitError(ValueError):
    """A number outside its range; the message names the flag, the range and why."""


@dataclass(frozen=True)
class Limit:
    """``lo``..``hi`` inclusive; ``lo_open``: ``lo`` itself is refused (a time that must be positive)."""

    lo: float
    hi: float
    why: str
    lo_open: bool = False

    def text(self) -> str:
        lo = f"above {num(self.lo)}" if self.lo_open else f"at least {num(self.lo)}"
        return f"{lo} and at most {num(self.hi)}"

    def holds(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (value > self.lo if self.lo_open else value >= self.lo) and value <= self.hi


def num(value: float) -> str:
    """A bound as people write it: 1048576, not 1.04858e+06."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


DAY_S = 86400.0
#: Users (greenlets, each with an open connection) one load process can drive without its own scheduling lag
#: distorting latencies (benchmarks/bench_lag.py: lag grows past ~1000 per process); more needs more processes.
USERS_PER_PROCESS = 1000
#: Open-loop requests per second one load process may be asked for: at 1000 it still sent every arrival with
#: lateness p90 0.34 ms, its p99 170 ms (benchmarks/bench_rate_ceiling.py, 2 cores shared with the emulator).
RATE_PER_PROCESS = 1000.0
#: Load processes per core: more only time-share the cores and each costs ~30 MB of memory.
PROCESSES_PER_CORE = 4

LIMITS: dict[str, Limit] = {
    "max_tokens": Limit(1, 1_048_576, "no model generates more than a million tokens per request"),
    "temperature": Limit(0, 2, "the OpenAI range; servers refuse values outside it"),
    "seed": Limit(0, 2**63 - 1, "a 64-bit seed; anything larger is a typo"),
    "connect_timeout": Limit(0.001, 600, "a connection not made in 10 minutes will not be made; none is made in "
                                         "under a millisecond"),
    "read_timeout": Limit(0.001, DAY_S, "a finite wait of at least a millisecond: an infinite one would hang the "
                                      "run, a shorter one ends every stream"),
    "request_timeout": Limit(0.001, 7 * DAY_S, "a finite wait per request of at least a millisecond"),
    "warmup_time": Limit(0, DAY_S, "a warm-up longer than a day is a typo"),
    "min_requests": Limit(0, 10_000_000, "every record of a step is held in memory"),
    "min_step_time": Limit(0, DAY_S, "a step longer than a day is a typo"),
    "max_step_time": Limit(0, 7 * DAY_S, "a positive, finite step length", lo_open=True),
    "step_ci": Limit(0, 0.999, "a fraction below 1 (0: off)"),
    "server_metrics_interval": Limit(0.05, 3600, "faster reads of /metrics load the server being measured"),
    "max_error_rate": Limit(0, 1, "a fraction of requests"),
    "gpu_hour_price": Limit(0, 1_000_000, "USD per GPU-hour (0: none); a million is a typo"),
    "kwh_price": Limit(0, 1000, "USD per kWh (0: none); a thousand is a typo"),
    "max_in_flight": Limit(1, 1_000_000, "each request in flight holds a connection"),
    "multi_turn": Limit(1, 1000, "each turn resends the whole conversation; beyond this no context fits"),
    "stop_after_saturation": Limit(-1, 1000, "a count of ladder levels (-1: off); a ladder has fewer than this"),
    "emulator_speed": Limit(0.001, 1000, "a positive, finite time scale; faster than 1000x the emulator's timers "
                                         "cannot keep up, slower than 1/1000 never ends a request"),
    "burstiness": Limit(0.01, 100, "the gamma gaps' shape: at 0.01 one gap in a hundred holds nearly all the time, "
                                   "at 100 the gaps are within 10% of even"),
    "trace_speed": Limit(0.001, 1_000_000, "a positive, finite replay speed; at 1/1000 a trace minute takes "
                                          "17 hours"),
}


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_limit(dest: str, value: float, shown: str | None = None) -> None:
    """Raise LimitError when ``value`` is outside ``LIMITS[dest]`` (NaN and infinities always are)."""
    limit = LIMITS[dest]
    if not limit.holds(value):
        raise LimitError(f"{shown or flag(dest)}: expected a number {limit.text()} ({limit.why}), got {value!r}")


def max_processes() -> int:
    """The most load processes this machine may run: a few per core."""
    return PROCESSES_PER_CORE * (os.cpu_count() or 1)


def check_processes(processes: int, shown: str = "--processes") -> None:
    """0 (one process), -1 (one per core, as Locust reads it) or 1..``max_processes()``."""
    most = max_processes()
    if not (processes == -1 or 0 <= processes <= most):
        raise LimitError(f"{shown}: expected 0 (one process), -1 (one per core) or at most {most} "
                         f"({PROCESSES_PER_CORE} per core on this machine; more only fight over the cores), "
                         f"got {processes}")


#: ``--processes auto``: users one process drives before another is added. At C=250 in one process the client's
#: own delay reached 18-20 ms of TTFT against a fast independent server; at C=60 its read lag stayed near 1 ms.
AUTO_USERS_PER_PROCESS = 100
#: ``--processes auto`` in open loop: requests per second one process starts before another is added. Measured:
#: one process is on time (lateness p90 <= 1 ms, p99 <= 5 ms) up to 100 req/s; two held 1400 (bench_rate_ceiling).
AUTO_RATE_PER_PROCESS = 100.0


def auto_processes(levels: list[int], rates: list[float], cores: int | None = None) -> tuple[int, str]:
    """``--processes auto``: the load processes for a ladder, and why, in words.

    As many as the highest level needs at ``AUTO_USERS_PER_PROCESS`` users (or ``AUTO_RATE_PER_PROCESS``
    requests/s) each, never more than the cores: a second process on one core only time-shares it. One process is
    0 (Locust's local runner: a master and one worker would add a hop and gain nothing)."""
    cores = cores or os.cpu_count() or 1
    if rates:
        need, what = math.ceil(max(rates) / AUTO_RATE_PER_PROCESS), f"{max(rates):g} requests/s"
        per = f"{AUTO_RATE_PER_PROCESS:g} requests/s"
    else:
        need, what = math.ceil(max(levels, default=1) / AUTO_USERS_PER_PROCESS), f"C={max(levels, default=1)}"
        per = f"{AUTO_USERS_PER_PROCESS} users"
    chosen = max(1, min(need, cores))
    capped = f", capped by this machine's {cores} cores" if need > cores else ""
    why = f"{what} at up to {per} per process needs {need}{capped}"
    return (0 if chosen == 1 else chosen), f"--processes auto: {chosen} load process(es) ({why})"


def load_processes(processes: int, workers: int = 0) -> int:
    """How many processes send load: the workers when there are any, else one."""
    if processes == -1:
        processes = os.cpu_count() or 1
    return max(1, processes, workers)


def check_scale(levels: list[int], rates: list[float], max_in_flight: int, processes: int) -> None:
    """Users, rates and requests in flight per load process within what one process can drive."""
    users = USERS_PER_PROCESS * processes
    add = ("; add load processes (--processes, up to a few per core) or load machines "
           "(see docs/guides/distributed.md)")
    if levels and max(levels) > users:
        raise LimitError(f"--ladder: level {max(levels)} is above {users} users for {processes} load "
                         f"process(es) ({USERS_PER_PROCESS} per process){add}")
    if rates and max(rates) > RATE_PER_PROCESS * processes:
        raise LimitError(f"--rate-ladder: {max(rates):g} requests/s is above {RATE_PER_PROCESS * processes:g} for "
                         f"{processes} load process(es) ({RATE_PER_PROCESS:g} per process){add}")
    if max_in_flight > users:
        raise LimitError(f"--max-in-flight: {max_in_flight} is above {users} for {processes} load process(es) "
                         f"({USERS_PER_PROCESS} per process){add}")
