"""Energy, power and GPU use over a step's window, from the DCGM exporters' samples (gpu_metrics.jsonl).

Per GPU (each exporter's each ``gpu`` label), the energy drawn over a window [t0, t1] comes from:

* ``counter``: the ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` counter, read at t0 and at t1 by linear interpolation
  between the two samples around each instant (so a window's energy is exact up to how the power moved inside
  those two sampling intervals); a counter that fell in between (a driver reload) is not used;
* ``power``: else the ``DCGM_FI_DEV_POWER_USAGE`` gauge integrated over the window by the trapezoid rule over the
  samples, interpolated at t0 and t1.

Readings are evidence (``contract.gpu_metrics.reading_problem``): a value that is not finite, negative, or a power
above ``MAX_GPU_POWER_W`` is left out and counted (``GpuSeries.rejected``), as are those the sampler already
refused (a reading's ``rejected`` list). Where both cover a window, the counter and the gauge must agree within
``COUNTER_GAUGE_FACTOR``; a counter whose mean power over the window is above the bound is not used; two that
disagree leave the GPU not measured, with a note naming both figures.

The step's energy is the sum over every GPU the run's samples name; its ``energy_source`` says which of the two
gave it ("counter", "power", or "counter+power" when GPUs differ). A GPU without a sample within ``max_gap``
of each edge (a power integral: between any two samples inside) was not watched over the window: the step's
energy figures are then None, "not measured", never zero, and ``energy_note`` says why. Mean power is the energy
over the window's length; GPU use the mean of each GPU's utilisation samples inside the window, averaged over
GPUs; energy per token the energy over the output tokens that arrived in the window (the throughput's tokens);
cost per million output tokens, with ``--gpu-hour-price``, the GPUs' hours over the window at that price per
those tokens.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from specbench.analysis.records.steprow import StepRow
from specbench.contract.gpu_metrics import MAX_GPU_POWER_W, REJECTED, GpuMetricsSample, reading_problem

COUNTER, POWER = "counter", "power"
GAP_FACTOR = 4.0  # a gap between two samples longer than this many median sampling intervals loses the GPU
MIN_GAP_S = 1.0  # ... and never shorter than this
# The counter's energy and the gauge's integral over one window may differ by sampling (a gauge read every second
# or so misses short swings; NVIDIA's gauge itself averages over part of each interval): tens of percent at worst
# on windows of seconds. Beyond a factor of 2 one of the two is wrong (mJ read as J is 1000x), so neither is used.
COUNTER_GAUGE_FACTOR = 2.0
_SLACK_W = 1.0  # below this mean power the two are both about nothing; no ratio is judged
_FIELDS = ("energy_mj", "power_w", "util_pct")

Point = tuple[float, float]  # (t_s, value)


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's readings over the run, in time order: energy counter in J, power in W, utilisation in %."""

    key: str  # "SOURCE:GPU"
    times: tuple[float, ...]
    energy_j: tuple[Point, ...]
    power_w: tuple[Point, ...]
    util_pct: tuple[Point, ...]
    max_gap_s: float
    rejected: int = 0  # readings that cannot be true (reading_problem), here or at the sampler, left out


@dataclass(frozen=True)
class WindowEnergy:
    """The GPUs' figures over one window; ``energy_j`` None: not measured (``note`` says why)."""

    energy_j: float | None
    source: str | None
    gpus: int  # GPUs the run's samples name
    power_w: float | None  # mean, summed over the GPUs
    util_pct: float | None  # mean over the GPUs
    note: str | None = None
    disputed: int = 0  # GPUs whose counter and gauge disagreed (or whose counter was impossible) over the window


def gpu_series(samples: Sequence[GpuMetricsSample]) -> list[GpuSeries]:
    """Each GPU's series from the run's samples (one exporter's GPUs keyed by its place in --gpu-metrics), every
    reading that cannot be true left out and counted."""
    raw: dict[str, dict[str, list[Point]]] = {}
    times: dict[str, list[float]] = {}
    rejected: dict[str, int] = {}
    for s in samples:
        for gpu, reading in s["gpus"].items():
            key = f"{s.get('source', 0)}:{gpu}"
            times.setdefault(key, []).append(float(s["t_s"]))
            fields = raw.setdefault(key, {name: [] for name in _FIELDS})
            refused = reading.get(REJECTED)
            bad = len(refused) if isinstance(refused, list) else 0
            for name, points in fields.items():
                value = reading.get(name)
                if value is None:
                    continue
                if reading_problem(name, value) is None:
                    points.append((float(s["t_s"]), float(value)))  # type: ignore[arg-type]  # checked: a number
                else:
                    bad += 1
            rejected[key] = rejected.get(key, 0) + bad
    out = []
    for key in sorted(raw):
        ts = sorted(times[key])
        gaps = np.diff(ts)
        typical = float(np.median(gaps)) if len(gaps) else 0.0
        out.append(GpuSeries(
            key=key, times=tuple(ts),
            energy_j=tuple((t, v / 1000.0) for t, v in sorted(raw[key]["energy_mj"])),
            power_w=tuple(sorted(raw[key]["power_w"])),
            util_pct=tuple(sorted(raw[key]["util_pct"])),
            max_gap_s=max(GAP_FACTOR * typical, MIN_GAP_S),
            rejected=rejected.get(key, 0),
        ))
    return out


def _bracket(points: Sequence[Point], t: float, max_gap: float) -> tuple[int, int] | None:
    """Indices (a, b) of the samples around ``t`` (a == b when one falls on it), if no more than ``max_gap``
    apart; None when ``t`` lies outside the samples or in a longer gap."""
    times = [p[0] for p in points]
    i = bisect.bisect_left(times, t)
    if i < len(points) and points[i][0] == t:
        return i, i
    if i == 0 or i == len(points):
        return None
    return (i - 1, i) if points[i][0] - points[i - 1][0] <= max_gap else None


def _at(points: Sequence[Point], a: int, b: int, t: float) -> float:
    (ta, va), (tb, vb) = points[a], points[b]
    return va if tb <= ta else va + (vb - va) * (t - ta) / (tb - ta)


def counter_energy(series: GpuSeries, t0: float, t1: float) -> float | None:
    """Joules by the energy counter over [t0, t1]; None without samples around both edges or after a reset."""
    pts = series.energy_j
    first, last = _bracket(pts, t0, series.max_gap_s), _bracket(pts, t1, series.max_gap_s)
    if first is None or last is None:
        return None
    values = [v for _, v in pts[first[0]:last[1] + 1]]
    if any(b < a for a, b in itertools.pairwise(values)):
        return None  # the counter restarted in between
    return _at(pts, *last, t1) - _at(pts, *first, t0)


def power_energy(series: GpuSeries, t0: float, t1: float) -> float | None:
    """Joules by integrating the power gauge over [t0, t1] (trapezoids); None where a gap is too long."""
    pts = series.power_w
    first, last = _bracket(pts, t0, series.max_gap_s), _bracket(pts, t1, series.max_gap_s)
    if first is None or last is None:
        return None
    inner = list(pts[first[1]:last[0] + 1]) if first[1] <= last[0] else []
    knots = [(t0, _at(pts, *first, t0)), *[p for p in inner if t0 < p[0] < t1], (t1, _at(pts, *last, t1))]
    if any(b[0] - a[0] > series.max_gap_s for a, b in itertools.pairwise(knots)):
        return None
    return sum((b[0] - a[0]) * (a[1] + b[1]) / 2.0 for a, b in itertools.pairwise(knots))


@dataclass(frozen=True)
class GpuEnergy:
    """One GPU over a window: joules and their source, or None and why (``problem``, also set when the counter was
    impossible and the gauge stood in)."""

    joules: float | None
    source: str | None
    problem: str | None = None


def gpu_energy(series: GpuSeries, t0: float, t1: float, *, cross_check: bool = True) -> GpuEnergy:
    """One GPU over [t0, t1]: the counter where it covers the window, else the power; a counter that rises faster
    than any GPU draws is not used, and (``cross_check``) one that disagrees with the gauge beyond
    ``COUNTER_GAUGE_FACTOR`` leaves the GPU not measured."""
    span = t1 - t0
    counter, power = counter_energy(series, t0, t1), power_energy(series, t0, t1)
    problem = None
    if counter is not None and counter / span > MAX_GPU_POWER_W:
        problem = (f"GPU {series.key}'s energy counter rose at {counter / span:.3g} W over the window, above the "
                   f"{MAX_GPU_POWER_W:.0f} W any GPU draws; not used")
        counter = None
    if cross_check and counter is not None and power is not None and _disagree(counter / span, power / span):
        return GpuEnergy(None, None, f"GPU {series.key}'s energy counter ({counter / span:.0f} W mean) and power "
                         f"gauge ({power / span:.0f} W mean) disagree by more than {COUNTER_GAUGE_FACTOR:g}x: one of "
                         "the two is wrong")
    if counter is not None:
        return GpuEnergy(counter, COUNTER, problem)
    return GpuEnergy(power, POWER if power is not None else None, problem)


def _disagree(a_w: float, b_w: float) -> bool:
    return max(a_w, b_w) > COUNTER_GAUGE_FACTOR * min(a_w, b_w) + _SLACK_W


def _why_missed(series: GpuSeries, t0: float, t1: float) -> str:
    """Why a GPU has no energy over [t0, t1]: its exporter missed the window, or answered with nothing usable."""
    answered = [(t, 0.0) for t in series.times]
    if _bracket(answered, t0, series.max_gap_s) is None or _bracket(answered, t1, series.max_gap_s) is None:
        return f"no telemetry around the window's edges for GPU {series.key} (an exporter missed this step)"
    if series.rejected:
        return (f"GPU {series.key}'s exporter answered, but with no usable power or energy reading around the "
                f"window ({series.rejected} reading(s) over the run rejected: not a finite number, negative, or a "
                f"power above {MAX_GPU_POWER_W:.0f} W)")
    return f"GPU {series.key}'s exporter answered without power or energy readings around the window's edges"


def window_energy(series: Sequence[GpuSeries], t0: float, t1: float, *, cross_check: bool = True) -> WindowEnergy:
    """Every GPU's energy over [t0, t1] summed, with mean power and GPU use; None where any GPU was not watched, or
    its counter and gauge disagree."""
    if not series or t1 <= t0:
        return WindowEnergy(None, None, len(series), None, None, "no GPU telemetry" if not series else None)
    total, sources, notes, disputed = 0.0, set(), [], 0
    measured = True
    for s in series:
        found = gpu_energy(s, t0, t1, cross_check=cross_check)
        disputed += found.problem is not None
        if found.joules is None:
            measured = False
            notes.append(found.problem or _why_missed(s, t0, t1))
            continue
        total += found.joules
        sources.add(found.source)
        if found.problem:
            notes.append(found.problem)
    utils = [u for u in (_mean_inside(s.util_pct, t0, t1) for s in series) if u is not None]
    util = sum(utils) / len(utils) if utils else None
    note = "; ".join(notes) or None
    if not measured:
        return WindowEnergy(None, None, len(series), None, util, f"not measured: {note}", disputed)
    source = "+".join(k for k in (COUNTER, POWER) if k in sources)
    return WindowEnergy(total, source, len(series), total / (t1 - t0), util, note, disputed)


def _mean_inside(points: Sequence[Point], t0: float, t1: float) -> float | None:
    inside = [v for t, v in points if t0 <= t <= t1]
    return sum(inside) / len(inside) if inside else None


def batch_energies(series: Sequence[GpuSeries], t0: float, t1: float, n: int) -> np.ndarray | None:
    """Energy of all GPUs in each of ``n`` equal slices of [t0, t1]; None when any slice is not measured."""
    if n < 1 or not series:
        return None
    edges = np.linspace(t0, t1, n + 1)
    out = []
    for a, b in itertools.pairwise(edges):
        found = window_energy(series, float(a), float(b), cross_check=False)  # slices: the window was checked
        if found.energy_j is None:
            return None
        out.append(found.energy_j)
    return np.asarray(out)


J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class Prices:
    """Prices to cost a run's steps at, to price a finished run again; None: the run's own setting."""

    gpu_hour: float | None = None  # USD per GPU-hour
    kwh: float | None = None  # USD per kWh

    def for_run(self, settings: object | None) -> tuple[float, float]:
        """(USD per GPU-hour, USD per kWh): each given price, else the run's ``--gpu-hour-price`` /
        ``--kwh-price``, else 0 (no cost figure)."""
        own_hour = float(getattr(settings, "gpu_hour_price", 0.0) or 0.0)
        own_kwh = float(getattr(settings, "kwh_price", 0.0) or 0.0)
        return (own_hour if self.gpu_hour is None else self.gpu_hour, own_kwh if self.kwh is None else self.kwh)


def with_energy(row: StepRow, series: Sequence[GpuSeries], gpu_hour_price: float = 0.0,
                kwh_price: float = 0.0) -> StepRow:
    """The row with its energy figures over its window (unchanged when the run has no GPU telemetry); a price
    of 0 leaves its cost figure out (None), never zero."""
    if not series or row.window_start_s is None or row.window_end_s is None or not row.window_s:
        return row
    t0, t1 = row.window_start_s, row.window_end_s
    found = window_energy(series, t0, t1)
    tokens = row.throughput_tok_s * row.window_s if row.throughput_tok_s else None
    per_token = found.energy_j / tokens if found.energy_j is not None and tokens else None
    cost = (gpu_hour_price * found.gpus * row.window_s / 3600.0 / tokens * 1e6
            if gpu_hour_price > 0 and tokens else None)
    energy_cost = per_token * 1e6 / J_PER_KWH * kwh_price if kwh_price > 0 and per_token is not None else None
    return replace(row, gpus=found.gpus, energy_j=found.energy_j, energy_source=found.source,
                   energy_per_token_j=per_token, gpu_power_w=found.power_w, gpu_util_pct=found.util_pct,
                   energy_note=found.note, energy_disputed=found.disputed, cost_per_mtok_usd=cost,
                   energy_cost_per_mtok_usd=energy_cost)
