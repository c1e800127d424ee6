"""GPU telemetry is evidence (#53): a power that no GPU draws is left out and counted, a counter is checked against
the gauge beside it, two hosts' GPU 0 are two GPUs, and a GPU whose exporter answered with nothing usable reads
"not measured" for that reason, not for a missed exporter."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from synthetic_runs import small_pair, write_run

from specbench.analysis.records.energy import COUNTER, POWER, gpu_series, window_energy
from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import summarize_run
from specbench.analysis.reporting.render import render_summary_table
from specbench.analysis.reporting.report import render_report
from specbench.analysis.verdicts.compare import compare_runs
from specbench.contract.gpu_metrics import GPU_METRICS_SCHEMA, MAX_GPU_POWER_W, GpuMetricsSample, parse_dcgm

POWER_FAMILY = "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
ENERGY_FAMILY = "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"


def _dcgm(power: str, hosts: tuple[str, ...] = ("node-a",), energy_mj: float | None = None) -> str:
    text = POWER_FAMILY + "".join(f'DCGM_FI_DEV_POWER_USAGE{{gpu="0",Hostname="{h}"}} {power}\n' for h in hosts)
    if energy_mj is not None:
        text += ENERGY_FAMILY + "".join(
            f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="0",Hostname="{h}"}} {energy_mj:.0f}\n' for h in hosts)
    return text


@pytest.mark.parametrize("power", ["NaN", "-300", "1e300", "+Inf", str(MAX_GPU_POWER_W + 1)])
def test_the_sampler_rejects_a_power_no_gpu_draws(power: str) -> None:
    sample = parse_dcgm(_dcgm(power), 1.0, 0)
    assert sample["gpus"] == {"0": {"rejected": ["power_w"]}}
    assert parse_dcgm(_dcgm("312.5"), 1.0, 0)["gpus"] == {"0": {"power_w": 312.5}}


def test_two_hosts_gpu_0_are_two_gpus() -> None:
    samples = [parse_dcgm(_dcgm("300", ("node-a", "node-b"), energy_mj=1e9 + 300_000 * t), float(t), 0)
               for t in range(0, 21)]
    assert set(samples[0]["gpus"]) == {"0@node-a", "0@node-b"}
    found = window_energy(gpu_series(samples), 2.0, 12.0)
    assert found.gpus == 2 and found.energy_j == pytest.approx(2 * 300.0 * 10.0)  # the last host no longer wins
    assert set(parse_dcgm(_dcgm("300"), 1.0, 0)["gpus"]) == {"0"}  # one host: the key it always had


def _series(power_w: float | None, energy_w: float | None = None, rejected: bool = False,
            until: int = 30) -> list[GpuMetricsSample]:
    """One GPU sampled every second: a gauge at ``power_w``, a counter rising at ``energy_w``."""
    out = []
    for t in range(until + 1):
        reading: dict[str, object] = {}
        if power_w is not None:
            reading["power_w"] = power_w
        if energy_w is not None:
            reading["energy_mj"] = 5e9 + energy_w * t * 1000.0
        if rejected:
            reading["rejected"] = ["power_w"]
        out.append(GpuMetricsSample(schema=GPU_METRICS_SCHEMA, t_s=float(t), source=0, gpus={"0": reading}))  # type: ignore[typeddict-item]
    return out


@pytest.mark.parametrize("power_w", [-300.0, 1e300, math.nan, math.inf])
def test_an_impossible_power_in_the_file_is_not_measured_for_that_reason(power_w: float) -> None:
    series = gpu_series(_series(power_w))
    assert series[0].rejected == 31 and not series[0].power_w
    found = window_energy(series, 5.0, 20.0)
    assert found.energy_j is None and found.power_w is None
    assert "answered, but with no usable power or energy reading" in (found.note or "")
    assert "missed" not in (found.note or "")


def test_a_nan_power_the_sampler_refused_reads_not_measured_not_a_missed_exporter() -> None:
    found = window_energy(gpu_series(_series(None, rejected=True)), 5.0, 20.0)
    assert found.energy_j is None and "31 reading(s) over the run rejected" in (found.note or "")
    assert "missed" not in (found.note or "")


def test_a_counter_rising_at_gigawatts_is_not_used_beside_a_sane_gauge() -> None:
    found = window_energy(gpu_series(_series(300.0, energy_w=3e9)), 5.0, 20.0)
    assert found.source == POWER and found.energy_j == pytest.approx(300.0 * 15.0)
    assert found.disputed == 1 and f"above the {MAX_GPU_POWER_W:.0f} W any GPU draws" in (found.note or "")


def test_a_counter_and_gauge_apart_beyond_the_factor_leave_the_gpu_not_measured() -> None:
    apart = window_energy(gpu_series(_series(300.0, energy_w=700.0)), 5.0, 20.0)
    assert apart.energy_j is None and apart.disputed == 1
    assert "counter (700 W mean) and power gauge (300 W mean) disagree" in (apart.note or "")
    close = window_energy(gpu_series(_series(300.0, energy_w=450.0)), 5.0, 20.0)  # within 2x: sampling, not a fault
    assert close.source == COUNTER and close.energy_j == pytest.approx(450.0 * 15.0) and close.note is None


def test_a_negative_power_gives_no_negative_energy_or_cost_and_a_counted_warning(tmp_path: Path) -> None:
    spec = small_pair()[1]
    spec.gpu_power_w = -300.0
    spec.settings["gpu_hour_price"] = 2.0
    summary = summarize_run(load_run(write_run(tmp_path / "spec", spec)))
    rows = [r for r in summary.rows if r.window_s]
    assert rows and all(r.energy_j is None and r.energy_per_token_j is None and r.gpu_power_w is None for r in rows)
    assert all("no usable power or energy" in (r.energy_note or "") for r in rows)
    hits = [w for w in summary.warnings if w.code == "gpu_readings_rejected"]
    assert len(hits) == 1 and re.search(r"\d+ GPU reading\(s\) left out", hits[0].message)


def test_a_huge_power_prints_no_huge_figure(tmp_path: Path) -> None:
    base, spec = small_pair()
    base.gpu_power_w, spec.gpu_power_w = 300.0, 1e300
    runs = [load_run(write_run(tmp_path / name, r)) for name, r in (("base", base), ("spec", spec))]
    comparison = compare_runs(*runs, n_boot=200)
    text = render_report(comparison) + render_summary_table(comparison.spec)
    assert not re.search(r"\d{15}", text)
    assert all(r.gpu_power_w is None for r in comparison.spec.rows)
