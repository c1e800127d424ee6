"""The emulated GPUs' power (``emulator.power``) and their dcgm-exporter text (``emulator.dcgm``).

The meter is checked against the model worked out by hand on explicit times; the exporter on a real emulator
process under load: its energy counters rise by exactly what the truth route says, its text parses as
Prometheus, a subset of fields can be exported, and a stopped exporter closes connections.
"""

from __future__ import annotations

import concurrent.futures as cf
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from specbench.emulator.dcgm import build_telemetry, parse_fields
from specbench.emulator.power import PowerMeter, PowerModel, parse_power
from specbench.emulator.profile import load_profile
from specbench.locustfiles.target import start_emulator_process


def test_meter_integrates_the_stated_model_exactly() -> None:
    model = PowerModel(gpus=2, idle_w=50.0, active_w=10.0, running_w=4.0, jitter=0.0)
    meter = PowerMeter(model, pass_j=3.0, speed=1.0, now=100.0)
    # 1 s idle: 2 x 50 W.
    assert sum(meter.energy_j(101.0)) == pytest.approx(100.0)
    meter.begin(4, 0.5, now=101.0)  # 4 requests, due in 0.5 s
    # Half-way: idle + active for 0.25 s on both GPUs, running 4 x 4 W, half of the 4 x 3 J pass energy.
    assert sum(meter.energy_j(101.25)) == pytest.approx(100.0 + 0.25 * (2 * 60.0 + 16.0) + 6.0)
    meter.end(now=101.75)  # ran 0.25 s late: watts for the extra time, no more pass energy
    step = 0.75 * (2 * 60.0 + 16.0) + 12.0
    assert sum(meter.energy_j(101.75)) == pytest.approx(100.0 + step)
    assert meter.total_at(101.25) == pytest.approx(100.0 + 0.25 * 136.0 + 6.0)  # the log gives the same instant
    assert meter.total_at(102.75) == pytest.approx(100.0 + step + 100.0)  # idle again
    meter.begin(2, 1.0, now=103.0)
    meter.end(now=103.5)  # ended early: the rest of the pass energy at its end
    assert sum(meter.energy_j(103.5)) == pytest.approx(100.0 + step + 125.0 + 0.5 * 128.0 + 6.0)
    assert meter.steps == 2 and meter.passes == 6
    # The gauges average over the last second: 103.5 - 1 = 102.5 .. 103.5 holds 0.5 s idle and the short step.
    _energy, power, util = meter.gauges(now=103.5)
    assert sum(power) == pytest.approx(0.5 * 100.0 + 0.5 * 128.0 + 6.0)
    assert util == [pytest.approx(50.0)] * 2


def test_jitter_is_seeded_and_speed_scales_watts_not_joules() -> None:
    def run(seed: int, speed: float) -> list[float]:
        meter = PowerMeter(PowerModel(gpus=2, jitter=0.2, seed=seed), pass_j=5.0, speed=speed, now=0.0)
        t = 0.0
        for _ in range(20):
            meter.begin(8, 0.01 / speed, now=t)
            t += 0.01 / speed
            meter.end(now=t)
        return meter.energy_j(t)

    assert run(1, 1.0) == run(1, 1.0)
    assert run(1, 1.0) != run(2, 1.0)
    assert sum(run(1, 10.0)) == pytest.approx(sum(run(1, 1.0)))  # same modelled work, same joules
    gpu0, gpu1 = run(1, 1.0)
    assert gpu0 != gpu1  # each GPU's share of a pass is jittered on its own


def test_power_and_fields_options() -> None:
    model = parse_power("idle_w=60, pass_j=2.5,seed=3", PowerModel(gpus=4))
    assert (model.gpus, model.idle_w, model.pass_j, model.seed) == (4, 60.0, 2.5, 3)
    for bad in ("idle=3", "idle_w=x", "jitter=1", "gpus=2"):
        with pytest.raises(ValueError, match="--power"):
            parse_power(bad, PowerModel())
    assert parse_fields("power,util") == ("power", "util")
    with pytest.raises(ValueError, match="--gpu-telemetry-fields"):
        parse_fields("power,temp")
    # The pass energy follows the profile's per-request step cost: a verify pass costs more than a decode step.
    base = build_telemetry(load_profile("baseline"), 1).meter.pass_j
    spec = build_telemetry(load_profile("eagle3"), 1).meter.pass_j
    assert spec > 5 * base > 0


def _families(text: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(family.name, {})[sample.labels["gpu"]] = sample.value  # a counter's sample gets _total
    return out


@pytest.mark.slow
def test_exporter_counts_what_the_truth_says() -> None:
    emu = start_emulator_process("eagle3", speed=10, extra=["--gpu-telemetry", "2"])
    try:
        url = emu.url
        first = _families(requests.get(url + "/_emulator/dcgm/metrics", timeout=10).text)
        t0 = time.time()

        def one(i: int) -> int:
            body = {"text": f"prompt {i}", "sampling_params": {"max_new_tokens": 48, "ignore_eos": True}}
            return requests.post(url + "/generate", json=body, timeout=60).status_code

        with cf.ThreadPoolExecutor(8) as pool:
            assert set(pool.map(one, range(16))) == {200}
        mid = requests.get(url + "/_emulator/dcgm/metrics", timeout=10)
        assert mid.headers["content-type"].startswith("text/plain")
        t1 = time.time()
        second = _families(mid.text)
        truth = requests.get(url + f"/_emulator/energy?at={t0!r},{t1!r}", timeout=10).json()
        assert truth["gpus"] == 2 and truth["passes"] >= 16 * 47 / 4  # at most 4 tokens a verify pass
        energy = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
        assert set(second[energy]) == {"0", "1"}
        rise_j = sum(second[energy][g] - first[energy][g] for g in ("0", "1")) / 1000.0
        # The counter rose by the truth's joules between the two reads (t0 and t1 bracket them within ms).
        between = truth["at"][1]["total_j"] - truth["at"][0]["total_j"]
        assert rise_j == pytest.approx(between, rel=0.02)
        assert all(second["DCGM_FI_DEV_POWER_USAGE"][g] > 0 for g in ("0", "1"))
        assert all(0 <= second["DCGM_FI_DEV_GPU_UTIL"][g] <= 100 for g in ("0", "1"))
        # The exporter goes away: connections close unanswered; the truth still answers.
        assert requests.post(url + "/_emulator/dcgm/stop", timeout=10).status_code == 200
        with pytest.raises(requests.ConnectionError):
            requests.get(url + "/_emulator/dcgm/metrics", timeout=10)
        assert requests.get(url + "/_emulator/energy", timeout=10).json()["stopped"] is True
        assert requests.get(url + "/_emulator/energy?at=x", timeout=10).status_code == 400
    finally:
        emu.stop()


@pytest.mark.slow
def test_a_subset_of_fields_and_no_telemetry_by_default() -> None:
    emu = start_emulator_process("baseline", speed=10, extra=["--gpu-telemetry", "1",
                                                              "--gpu-telemetry-fields", "power,util"])
    plain = start_emulator_process("baseline", speed=10)
    try:
        names = _families(requests.get(emu.url + "/_emulator/dcgm/metrics", timeout=10).text)
        assert set(names) == {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL"}
        assert requests.get(plain.url + "/_emulator/dcgm/metrics", timeout=10).status_code == 404
        assert requests.get(plain.url + "/_emulator/energy", timeout=10).status_code == 404
    finally:
        emu.stop()
        plain.stop()
