"""``--gpu-metrics``: the option's URLs, and the sampler against a real emulated dcgm-exporter on 127.0.0.1.

The sampler writes one line per read in the contract's shape; an exporter that goes away costs its own samples
only (one warning, then one line when it is back), and one that never answered leaves no file.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import requests

from specbench.contract.gpu_metrics import (
    GPU_METRICS_SCHEMA,
    parse_dcgm,
    parse_exporter_urls,
    read_gpu_metrics,
)
from specbench.contract.rundir import GPU_METRICS_FILE
from specbench.contract.urls import UrlError
from specbench.inputs import InputError, check_load_options
from specbench.locustfiles.gpu_sampler import GpuMetricsSampler


def test_urls_get_dcgm_exporters_path_and_are_checked() -> None:
    settings = check_load_options(["--gpu-metrics", "http://gpu-a:9400, http://gpu-b:9400/custom/path/"])
    assert settings.gpu_metrics == ["http://gpu-a:9400/metrics", "http://gpu-b:9400/custom/path"]
    assert check_load_options([]).gpu_metrics == []
    for bad in ("gpu-a:9400", "http://gpu-a:9400,http://gpu-a:9400/metrics", "ftp://x", "http://x:9400/m?a=1"):
        with pytest.raises(InputError, match="--gpu-metrics"):
            check_load_options(["--gpu-metrics", bad])
    assert check_load_options(["--gpu-hour-price", "2.5"]).gpu_hour_price == 2.5
    with pytest.raises(InputError, match="--gpu-hour-price"):
        check_load_options(["--gpu-hour-price", "-1"])


def test_nvml_is_one_entry_given_alone() -> None:
    """``nvml`` / ``nvml:I[,I...]`` parse to one canonical entry (the NVML check itself: tests/test_nvml.py)."""
    assert parse_exporter_urls("nvml") == ["nvml"]
    assert parse_exporter_urls(" NVML:0, 2 ") == ["nvml:0,2"]
    for bad, said in (("nvml:0,0", "given twice"), ("nvml:a", "expected nvml or nvml:INDEX"),
                      ("http://gpu-a:9400,nvml", "given alone"), ("nvml,http://gpu-a:9400", "expected nvml")):
        with pytest.raises(UrlError, match=said):
            parse_exporter_urls(bad)


def test_parse_keeps_the_dcgm_fields_per_gpu() -> None:
    text = ('# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} 312.5\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b"} 100\n'
            '# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n'
            'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a"} 123456789\n'
            '# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n'
            'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-a"} 1980\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",GPU_I_ID="3"} 40\n')
    sample = parse_dcgm(text, 5.0, 1)
    assert sample["schema"] == GPU_METRICS_SCHEMA and sample["source"] == 1
    assert sample["gpus"] == {"0": {"power_w": 312.5, "energy_mj": 123456789.0, "sm_clock_mhz": 1980.0},
                              "1": {"power_w": 100.0}, "0/3": {"util_pct": 40.0}}


@pytest.mark.slow
def test_an_exporter_that_goes_away_costs_only_its_samples(emulator, tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    emu = emulator("baseline", speed=10, extra=["--gpu-telemetry", "2"])
    url = emu.url + "/_emulator/dcgm/metrics"
    never = emu.url + "/no/such/exporter"
    sampler = GpuMetricsSampler([url, never], tmp_path, 0.2, timeout_s=2.0)
    good, bad = sampler.exporters
    assert sampler.sample_once(good) and sampler.sample_once(good)
    assert not sampler.sample_once(bad) and not sampler.sample_once(bad)
    requests.post(emu.url + "/_emulator/dcgm/stop", timeout=10)
    assert not sampler.sample_once(good) and not sampler.sample_once(good)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings  # one per exporter, not one per failed read
    assert any("HTTP 404" in w and "no/such/exporter" in w for w in warnings)
    assert any("ConnectionError" in w for w in warnings)
    sampler._appender.close()  # type: ignore[union-attr]
    samples, torn = read_gpu_metrics(tmp_path / GPU_METRICS_FILE)
    assert torn == 0 and len(samples) == 2
    assert all(set(s["gpus"]) == {"0", "1"} and s["source"] == 0 for s in samples)
    assert set(samples[0]["gpus"]["0"]) == {"power_w", "energy_mj", "util_pct"}
    assert samples[1]["gpus"]["0"]["energy_mj"] >= samples[0]["gpus"]["0"]["energy_mj"]
