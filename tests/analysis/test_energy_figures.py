"""The energy figures of a window (``analysis.records.energy``) on samples whose truth is worked out by hand.

Two GPUs draw a known power law; samples every 0.5 s carry the counter and the gauge as an exporter would. The
window's energy by the counter and by the power integral must match the law's integral; a GPU whose exporter
stopped, a gap or a counter reset must give "not measured" (None), never zero; the interval of the energy ratio
must hold the true ratio.
"""

from __future__ import annotations

import numpy as np
import pytest

from specbench.analysis.records.energy import COUNTER, POWER, batch_energies, gpu_series, window_energy
from specbench.analysis.stats.ratio_of_sums import ratio_of_sums_interval
from specbench.contract.gpu_metrics import GPU_METRICS_SCHEMA, GpuMetricsSample


def _power(gpu: int, t: float) -> float:
    return 100.0 + 50.0 * gpu + 20.0 * np.sin(t / 3.0)  # W


def _energy(gpu: int, t: float) -> float:
    return (100.0 + 50.0 * gpu) * t - 60.0 * (np.cos(t / 3.0) - 1.0)  # J since t = 0


def _samples(until: float = 30.0, every: float = 0.5, fields: tuple[str, ...] = ("energy_mj", "power_w", "util_pct"),
             stop: dict[int, float] | None = None) -> list[GpuMetricsSample]:
    out = []
    for t in np.arange(0.0, until + 1e-9, every):
        gpus = {}
        for gpu in (0, 1):
            if stop and gpu in stop and t > stop[gpu]:
                continue
            reading = {"energy_mj": 7e9 + _energy(gpu, t) * 1000.0, "power_w": _power(gpu, t), "util_pct": 50.0}
            gpus[str(gpu)] = {k: v for k, v in reading.items() if k in fields}
        out.append(GpuMetricsSample(schema=GPU_METRICS_SCHEMA, t_s=float(t), source=0, gpus=gpus))  # type: ignore[typeddict-item]
    return out


def test_counter_and_power_integration_give_the_laws_energy() -> None:
    truth = sum(_energy(g, 22.3) - _energy(g, 4.1) for g in (0, 1))
    found = window_energy(gpu_series(_samples()), 4.1, 22.3)
    assert found.source == COUNTER and found.gpus == 2 and found.energy_j == pytest.approx(truth, rel=1e-3)
    assert found.power_w == pytest.approx(truth / (22.3 - 4.1), rel=1e-3) and found.util_pct == 50.0
    by_power = window_energy(gpu_series(_samples(fields=("power_w",))), 4.1, 22.3)
    assert by_power.source == POWER and by_power.energy_j == pytest.approx(truth, rel=1e-3)
    assert by_power.util_pct is None


def test_a_gpu_that_stopped_reporting_makes_the_window_not_measured() -> None:
    series = gpu_series(_samples(stop={1: 15.0}))
    early, late = window_energy(series, 2.0, 12.0), window_energy(series, 16.0, 25.0)
    assert early.energy_j is not None and early.gpus == 2
    assert late.energy_j is None and late.power_w is None and "GPU 0:1" in (late.note or "")
    # A gap longer than a few sampling intervals inside the window: the power integral refuses it, the counter not.
    gappy = [s for s in _samples() if not 10.0 < s["t_s"] < 14.0]
    assert window_energy(gpu_series(gappy), 5.0, 20.0).source == COUNTER
    assert window_energy(gpu_series([{**s, "gpus": {g: {"power_w": r["power_w"]} for g, r in s["gpus"].items()}}
                                     for s in gappy]), 5.0, 20.0).energy_j is None  # type: ignore[misc]


def test_a_counter_reset_falls_back_to_power() -> None:
    samples = _samples()
    for s in samples:
        if s["t_s"] >= 10.0:
            s["gpus"]["0"]["energy_mj"] -= 6e9
    found = window_energy(gpu_series(samples), 5.0, 20.0)
    assert found.source == "counter+power"
    assert found.energy_j == pytest.approx(sum(_energy(g, 20.0) - _energy(g, 5.0) for g in (0, 1)), rel=1e-3)


def test_no_telemetry_is_none_not_zero() -> None:
    found = window_energy([], 0.0, 10.0)
    assert found.energy_j is None and found.gpus == 0


def test_batch_energies_add_up_and_the_ratio_interval_holds_the_truth() -> None:
    series = gpu_series(_samples())
    batches = batch_energies(series, 2.0, 28.0, 8)
    assert batches is not None and len(batches) == 8
    assert batches.sum() == pytest.approx(window_energy(series, 2.0, 28.0).energy_j, rel=1e-9)
    rng = np.random.default_rng(0)
    tokens_base = rng.uniform(900, 1100, 8)
    tokens_spec = rng.uniform(450, 550, 8)
    found = ratio_of_sums_interval(batches, tokens_base, batches * 1.1, tokens_spec, rng=rng, n_boot=2000)
    truth = (batches.sum() * 1.1 / tokens_spec.sum()) / (batches.sum() / tokens_base.sum())
    assert found is not None and found[0] < truth < found[1]
    assert ratio_of_sums_interval(batches[:4], tokens_base[:4], batches, tokens_spec, rng=rng) is None
