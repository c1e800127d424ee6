"""``--gpu-metrics nvml``: the suite's NVML path against an emulated libnvidia-ml.so.1, with no GPU and no driver.

pynvml (nvidia-ml-py) loads the driver's library by its bare name (``CDLL("libnvidia-ml.so.1")`` on Linux), so
tests/nvml_emulator/fake_nvml.c, compiled here with gcc, stands in for it in any process started with
``LD_LIBRARY_PATH`` pointing at it. Its GPUs draw a constant power set per GPU (``FAKE_NVML_WATTS``) and its
energy counter follows the system's monotonic clock, so every window's joules are known: watts x seconds. Nothing
of ours is replaced: the real command line, the real Locust run against the built-in emulator, the real analysis.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis import load_run, summarize_run
from specbench.contract.gpu_metrics import read_gpu_metrics
from specbench.contract.rundir import GPU_METRICS_FILE
from specbench.launch import free_port
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import REPO, energy_slack, ledger, ledger_window_tok_s, read_jsonl, run_locust

SOURCE = REPO / "tests" / "nvml_emulator" / "fake_nvml.c"
WATTS = (300.0, 150.0)
ALL_FIELDS = {"energy_mj", "power_w", "util_pct", "mem_used_mib", "sm_clock_mhz"}


@pytest.fixture(scope="module")
def fake_nvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding the emulated libnvidia-ml.so.1, compiled for this run."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found: the emulated libnvidia-ml.so.1 (tests/nvml_emulator/fake_nvml.c) is compiled "
                    "at test time")
    folder = tmp_path_factory.mktemp("nvml")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(folder / "libnvidia-ml.so.1"),
                    str(SOURCE)], check=True, capture_output=True, timeout=60)
    return folder


def nvml_env(folder: Path, **extra: str) -> dict[str, str]:
    return {"LD_LIBRARY_PATH": str(folder), "FAKE_NVML_WATTS": ",".join(map(str, WATTS)), **extra}


def _specbench_run(tmp_path: Path, env: dict[str, str], *, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """``specbench run`` aimed where nothing listens: a request would end in 'not reachable', not in the NVML line."""
    argv = ["run", "--host", f"http://127.0.0.1:{free_port()}", "--label", "x", "--gpu-metrics", "nvml",
            "--out", str(tmp_path / "out")]
    code = f"import sys\n{prelude}\nfrom specbench.cli import main\nsys.exit(main({argv!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, **env})


def _assert_refused(proc: subprocess.CompletedProcess[str], said: str, tmp_path: Path) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and lines[0].startswith("specbench: error: --gpu-metrics nvml"), lines
    assert "Traceback" not in proc.stderr and "reachable" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_no_driver_is_one_line_and_exit_2_before_any_request(fake_nvml: Path, tmp_path: Path) -> None:
    """The emulated library answers nvmlInit with NVML_ERROR_DRIVER_NOT_LOADED (9)."""
    proc = _specbench_run(tmp_path, nvml_env(fake_nvml, FAKE_NVML_INIT_ERROR="9"))
    _assert_refused(proc, "no NVIDIA driver found (Driver Not Loaded)", tmp_path)


def test_no_nvml_library_is_one_line_and_exit_2_before_any_request(tmp_path: Path) -> None:
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("this machine has a real libnvidia-ml: the library is found")
    proc = _specbench_run(tmp_path, {"LD_LIBRARY_PATH": str(tmp_path)})
    _assert_refused(proc, "no NVIDIA driver found (NVML Shared Library Not Found)", tmp_path)


def test_no_nvidia_ml_py_names_what_to_install(tmp_path: Path) -> None:
    """The package absent (``sys.modules['pynvml'] = None`` makes its import fail, as when it is not installed)."""
    proc = _specbench_run(tmp_path, {}, prelude="sys.modules['pynvml'] = None")
    _assert_refused(proc, "nvidia-ml-py is not installed; pip install 'locust-specbench[nvml]'", tmp_path)


def test_an_index_nvml_does_not_see_is_refused(fake_nvml: Path, tmp_path: Path) -> None:
    """In the suite's options and in compare's own per-run options (checked there too, before any run)."""
    code = ("from specbench.inputs import InputError, check_load_options\n"
            "from specbench.exporters import run_exporters\n"
            "print(check_load_options(['--gpu-metrics', 'nvml:1']).gpu_metrics)\n"
            "print(run_exporters('nvml:0', ['nvml:1'], 'baseline', ['spec'], []))\n"
            "for bad in (lambda: check_load_options(['--gpu-metrics', 'nvml:0,2']),\n"
            "            lambda: run_exporters('nvml:3', None, 'baseline', ['spec'], ['nvml'])):\n"
            "    try:\n        bad()\n    except InputError as exc:\n        print(exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, **nvml_env(fake_nvml)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "['nvml:1']", "{'baseline': 'nvml:0', 'spec': 'nvml:1'}",
        "--gpu-metrics nvml:0,2: NVML sees 2 GPU(s) (indices 0-1); no GPU 2",
        "--baseline-gpu-metrics nvml:3: NVML sees 2 GPU(s) (indices 0-1); no GPU 3"]


def test_the_sampler_writes_an_exporters_lines_without_unsupported_fields(fake_nvml: Path, tmp_path: Path) -> None:
    """Two reads of GPU 1 through the real sampler: the contract's lines, power in W, energy in mJ rising by
    watts x seconds, and the fields the library does not support absent (never zero)."""
    code = ("import sys, time\nfrom pathlib import Path\n"
            "from specbench.locustfiles.gpu_sampler import GpuMetricsSampler\n"
            "s = GpuMetricsSampler(['nvml:1'], Path(sys.argv[1]), 0.2)\n"
            "assert s.sample_once(s.exporters[0]); time.sleep(0.5); assert s.sample_once(s.exporters[0])\n"
            "s._appender.close(); s.exporters[0].close()\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ,
                                         **nvml_env(fake_nvml, FAKE_NVML_UNSUPPORTED="clock,util")})
    assert proc.returncode == 0, proc.stderr
    samples, torn = read_gpu_metrics(tmp_path / GPU_METRICS_FILE)
    assert torn == 0 and len(samples) == 2
    first, second = (s["gpus"]["1"] for s in samples)
    assert all(set(s["gpus"]) == {"1"} and s["source"] == 0 and s["read_s"] >= 0 for s in samples)
    assert set(first) == {"energy_mj", "power_w", "mem_used_mib"}  # clock and utilisation: not supported
    assert first["power_w"] == WATTS[1] and first["mem_used_mib"] == 2048.0
    joules = (second["energy_mj"] - first["energy_mj"]) / 1000.0
    assert joules == pytest.approx(WATTS[1] * (samples[1]["t_s"] - samples[0]["t_s"]), rel=0.05)


# -- real runs: energy per token against the known power ---------------------------------------------------------

SPEED = 10
LEVELS = (4, 16)
ARGS = ("--ladder", ",".join(map(str, LEVELS)), "--max-tokens", "64", "--min-requests", "40", "--min-step-time", "5",
        "--max-step-time", "60", "--step-ci", "0", "--server-metrics-interval", "0.25")


def _nvml_run(root: Path, name: str, fake_nvml: Path, **extra: str) -> dict[str, Any]:
    """A headless run of the emulator read through ``--gpu-metrics nvml``; the truth per level: the GPUs' constant
    watts x the step's window per output token the emulator wrote in it (its ledger's chunk times)."""
    emu = start_emulator_process("eagle3", speed=SPEED, extra=["--ledger-chunk-times"])
    try:
        out = root / name
        proc = run_locust(emu.url, out, *ARGS, "--gpu-metrics", "nvml", timeout=240,
                          env=nvml_env(fake_nvml, **extra))
        assert proc.returncode == 0, proc.stderr[-3000:]
        entries = ledger(emu.url)
    finally:
        emu.stop()
    truth = {}
    for step in read_jsonl(out / "steps.jsonl"):
        t0, t1 = step["steady_start_s"], step["end_s"]
        truth[step["target_c"]] = sum(WATTS) * (t1 - t0) / (ledger_window_tok_s(entries, t0, t1) * (t1 - t0))
    return {"dir": out, "truth": truth}


@pytest.mark.slow
@pytest.mark.parametrize(("unsupported", "source", "fields"), [
    ("", "counter", ALL_FIELDS),
    ("energy", "power", ALL_FIELDS - {"energy_mj"}),
])
def test_energy_per_token_through_nvml_matches_the_known_power(fake_nvml: Path, tmp_path: Path, unsupported: str,
                                                              source: str, fields: set[str]) -> None:
    """Counter mode with the energy counter; power integration where nvmlDeviceGetTotalEnergyConsumption answers
    NOT_SUPPORTED. Either way each level's J/token within 2% of watts x window / tokens, and the mode said."""
    run = _nvml_run(tmp_path, source, fake_nvml, FAKE_NVML_UNSUPPORTED=unsupported)
    samples, torn = read_gpu_metrics(run["dir"] / GPU_METRICS_FILE)
    assert torn == 0 and len(samples) > 20
    assert all(set(s["gpus"]) == {"0", "1"} and s["source"] == 0 for s in samples)
    assert all(set(reading) == fields for s in samples for reading in s["gpus"].values())
    meta = json.loads((run["dir"] / "meta.json").read_text())
    assert meta["settings"]["gpu_metrics"] == ["nvml"]
    rows = summarize_run(load_run(run["dir"])).rows
    assert [r.target_c for r in rows] == list(LEVELS)
    for row in rows:
        assert row.gpus == 2 and row.energy_source == source, (row.target_c, row.energy_note)
        assert row.energy_per_token_j == pytest.approx(run["truth"][row.target_c],
                                                       rel=0.02 + energy_slack(samples, row)), row.target_c
        assert row.gpu_power_w == pytest.approx(sum(WATTS), rel=0.01) and row.gpu_util_pct == 87.0
    cli = subprocess.run([sys.executable, "-m", "specbench.analysis", "summarize", str(run["dir"]), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert [s["energy_source"] for s in json.loads(cli.stdout)["steps"]] == [source] * len(LEVELS)
