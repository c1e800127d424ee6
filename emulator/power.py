"""The emulated GPUs' power: a stated model, integrated exactly, so that every joule exported is known.

The model (``PowerModel``; all figures at speed 1, for the whole server unless "per GPU"):

* each of the ``gpus`` GPUs draws ``idle_w`` watts at all times;
* while a model step runs, each GPU draws ``active_w`` more, and the GPUs together ``running_w`` more per request
  in the step's batch (split evenly over the GPUs);
* each step costs ``pass_j`` joules per request in its batch (a decode step; under speculation a verify pass with
  its drafting), spread evenly over the step's planned length and split over the GPUs, each GPU's share scaled by a
  seeded factor ``1 + jitter * u`` (``u`` uniform in [-1, 1], drawn per step and GPU from ``seed``; deterministic for
  a given sequence of steps). By default ``pass_j`` is ``PASS_J_PER_MS`` times the profile's per-request step cost
  (``step_b_ms``, the speculative one under speculation), so a verify pass costs what its time says.

The scheduler calls ``begin`` when a step starts (with the time left to its deadline) and ``end`` when it ends
(``emulator.scheduler``). A step that runs past its deadline adds its watts for the extra time but no more pass
energy; one that ends early adds the rest of its pass energy at its end. Every GPU's energy is thus piecewise linear in
time, with a point kept at each change of slope, so the meter knows it exactly at any instant: what the exporter shows
(``emulator.dcgm``) and the truth the tests read (``GET /_emulator/energy``) come from the same function.

Speed: at ``--speed N`` time runs N times faster, so the meter draws N times the watts; energy per token is then
the speed-1 figure. The power gauge and the utilisation are averages over the last ``average_s`` (1 s at speed 1),
as DCGM averages over its sample period.
"""

from __future__ import annotations

import bisect
import random
import time
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

__all__ = ["PASS_J_PER_MS", "PowerMeter", "PowerModel", "parse_power"]

#: Default pass energy per millisecond of per-request step cost (profile ``step_b_ms``): ~3.4 J a decode pass and
#: ~20 J a verify pass for the built-in (seed-calibrated, 8-GPU) profiles.
PASS_J_PER_MS = 3.0
_RECENT_S = 5.0  # real seconds of per-GPU history kept for the averaged gauges


@dataclass(frozen=True)
class PowerModel:
    """The power model of ``--gpu-telemetry N`` (module docstring); ``pass_j`` None: from the profile."""

    gpus: int = 1
    idle_w: float = 70.0  # per GPU, always
    active_w: float = 100.0  # per GPU, while a step runs
    running_w: float = 2.0  # per request in the running batch, the whole server
    pass_j: float | None = None  # per request per step, the whole server
    jitter: float = 0.05  # relative, per step and GPU
    seed: int = 0
    average_s: float = 1.0  # the gauges' averaging period (speed-1 seconds)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_power(text: str, base: PowerModel) -> PowerModel:
    """``idle_w=60,pass_j=2.5`` over ``base``; raises ValueError naming the bad key."""
    numbers = {f.name for f in fields(PowerModel)} - {"gpus", "seed"}
    changes: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in numbers | {"seed"}:
            raise ValueError(f"--power: expected KEY=VALUE with KEY one of {', '.join(sorted(numbers | {'seed'}))}, "
                             f"got {part!r}")
        try:
            changes[key] = int(value) if key == "seed" else float(value)
        except ValueError:
            raise ValueError(f"--power {key}: expected a number, got {value!r}") from None
        if changes[key] < 0 or (key == "average_s" and changes[key] == 0) or (key == "jitter" and changes[key] >= 1):
            raise ValueError(f"--power {key}: out of range ({value})")
    return replace(base, **changes)


class PowerMeter:
    """Integrates ``model`` for its GPUs; ``begin``/``end`` bracket each model step (times are ``time.time()``)."""

    def __init__(self, model: PowerModel, *, pass_j: float, speed: float = 1.0, now: float | None = None) -> None:
        if model.gpus < 1:
            raise ValueError("a power meter needs at least one GPU")
        self.model, self.pass_j, self.speed = model, pass_j, speed
        self.gpus = model.gpus
        self.started_s = time.time() if now is None else now
        self._rng = random.Random(f"power:{model.seed}")
        # State since the last point: per-GPU energy then, its time, and the current linear law.
        self._t = self.started_s
        self._energy = [0.0] * self.gpus
        self._busy = 0.0
        self._in_step = False
        self._rate = [model.idle_w * speed] * self.gpus  # W per GPU, in real time
        self._pass = [0.0] * self.gpus  # J per GPU left to spread over the step
        self._planned = 0.0
        self.steps = 0
        self.passes = 0
        # The whole run's totals at every point (exact truth at any instant by linear interpolation), compact.
        self._log_t = array("d", [self.started_s])
        self._log_e = array("d", [0.0])
        # Recent per-GPU points for the averaged gauges: (t, energies, busy).
        self._recent: deque[tuple[float, tuple[float, ...], float]] = deque([(self.started_s, (0.0,) * self.gpus,
                                                                               0.0)])

    # ------------------------------------------------------------ the scheduler's calls

    def begin(self, batch: int, planned_s: float, now: float | None = None, pass_scale: float = 1.0) -> None:
        """A step of ``batch`` requests starts, due to end in ``planned_s`` real seconds (0 or less: at once);
        ``pass_scale``: this step's per-request cost over the launch depth's (a depth schedule's shallower steps)."""
        now = time.time() if now is None else now
        self._point(now)
        m, speed, share = self.model, self.speed, 1.0 / self.gpus
        self._in_step = True
        self._planned = max(planned_s, 1e-9)
        self._rate = [(m.idle_w + m.active_w + m.running_w * batch * share) * speed] * self.gpus
        draws = [1.0 + m.jitter * (2.0 * self._rng.random() - 1.0) for _ in range(self.gpus)]
        self._pass = [self.pass_j * pass_scale * batch * share * d for d in draws]
        self.steps += 1
        self.passes += batch

    def end(self, now: float | None = None) -> None:
        """The step that ``begin`` opened has ended."""
        now = time.time() if now is None else now
        if not self._in_step:
            return
        kink = self._t + self._planned
        if now > kink:  # ran late: the pass energy was all spent by the planned end
            self._point(kink)
        self._point(now)
        if any(self._pass):  # ended early (a timer that fired early): what is left of the pass energy, at once
            self._energy = [e + p for e, p in zip(self._energy, self._pass, strict=True)]
            self._append_point()
        self._in_step = False
        self._rate = [self.model.idle_w * self.speed] * self.gpus
        self._pass = [0.0] * self.gpus

    # ------------------------------------------------------------ reading

    def _advance(self, t: float) -> tuple[list[float], float]:
        """Per-GPU energy and busy seconds at ``t`` >= the last point, by the current law."""
        dt = max(0.0, t - self._t)
        if not self._in_step:
            return [e + r * dt for e, r in zip(self._energy, self._rate, strict=True)], self._busy
        spent = min(1.0, dt / self._planned)
        return ([e + r * dt + p * spent for e, r, p in zip(self._energy, self._rate, self._pass, strict=True)],
                self._busy + dt)

    def _point(self, t: float) -> None:
        t = max(t, self._t)
        energy, busy = self._advance(t)
        if self._in_step:  # the rest of the pass energy, for the remaining planned time
            spent = min(1.0, (t - self._t) / self._planned)
            self._pass = [p * (1.0 - spent) for p in self._pass]
            self._planned = max(self._planned - (t - self._t), 1e-9)
        self._t, self._energy, self._busy = t, energy, busy
        self._append_point()

    def _append_point(self) -> None:
        t = self._t
        self._log_t.append(t)
        self._log_e.append(sum(self._energy))
        self._recent.append((t, tuple(self._energy), self._busy))
        while len(self._recent) > 2 and self._recent[1][0] < t - _RECENT_S:
            self._recent.popleft()

    def energy_j(self, now: float | None = None) -> list[float]:
        """Joules each GPU has drawn since the meter started."""
        return self._advance(time.time() if now is None else now)[0]

    def total_at(self, t: float) -> float:
        """Joules drawn by all GPUs from the start to wall time ``t`` (exact; clamped to [start, now])."""
        if t >= self._t:
            return sum(self._advance(t)[0])
        i = bisect.bisect_right(self._log_t, t)
        if i == 0:
            return 0.0
        t0, e0 = self._log_t[i - 1], self._log_e[i - 1]
        if i == len(self._log_t):
            return e0
        t1, e1 = self._log_t[i], self._log_e[i]
        return e0 if t1 <= t0 else e0 + (e1 - e0) * (t - t0) / (t1 - t0)

    def _recent_at(self, t: float) -> tuple[list[float], float]:
        if t >= self._t:
            return self._advance(t)
        pts = self._recent
        times = [p[0] for p in pts]
        i = bisect.bisect_right(times, t)
        if i == 0:
            return list(pts[0][1]), pts[0][2]
        (ta, ea, ba), (tb, eb, bb) = pts[i - 1], pts[min(i, len(pts) - 1)]
        if tb <= ta:
            return list(ea), ba
        f = (t - ta) / (tb - ta)
        return [a + (b - a) * f for a, b in zip(ea, eb, strict=True)], ba + (bb - ba) * f

    def gauges(self, now: float | None = None) -> tuple[list[float], list[float], list[float]]:
        """(energy J, mean power W, utilisation %) per GPU: power and utilisation over the last ``average_s``."""
        now = time.time() if now is None else now
        energy, busy = self._advance(now)
        span = min(self.model.average_s / self.speed, max(now - self.started_s, 0.0))
        if span <= 0:
            return energy, list(self._rate), [100.0 if self._in_step else 0.0] * self.gpus
        before, busy_before = self._recent_at(now - span)
        power = [(e - b) / span for e, b in zip(energy, before, strict=True)]
        util = min(100.0, max(0.0, 100.0 * (busy - busy_before) / span))
        return energy, power, [util] * self.gpus

    def truth(self, at: Sequence[float] = (), now: float | None = None) -> dict[str, Any]:
        """What ``GET /_emulator/energy`` shows: the model, each GPU's joules now, totals at the times asked."""
        now = time.time() if now is None else now
        energy = self.energy_j(now)
        return {
            "gpus": self.gpus,
            "model": {**self.model.as_dict(), "pass_j": self.pass_j, "speed": self.speed},
            "started_s": self.started_s,
            "now_s": now,
            "joules": energy,
            "total_j": sum(energy),
            "steps": self.steps,
            "passes": self.passes,
            "at": [{"t_s": t, "total_j": self.total_at(min(t, now))} for t in at],
        }
