"""Energy per token per level, proven end to end against the emulator's power model (which knows every joule).

Real headless Locust runs (baseline and ``eagle3``, ladder 4,16, speed 10) against emulators with two emulated GPUs
(``--gpu-telemetry 2``, gauges averaged over 0.25 s), their dcgm-exporter text read every 0.25 s through
``--gpu-metrics``. Each step's energy
per output token must be within 2% of the truth: the emulator's joules over the step's window
(``GET /_emulator/energy?at=...``) per output token it wrote in that window (its ledger's chunk times). Once with
the energy counter exported (``energy_source`` counter), once with only the power gauge (integrated). A third run
stops its exporter after the first step: that step is measured, the next is "not measured" (None, never zero),
and nothing else of the run is lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from matplotlib.image import imread

from specbench.analysis import compare_many, compare_runs, load_run, render_comparison, summarize_run
from specbench.analysis.outputs import write_comparison_outputs
from specbench.analysis.records.energy import Prices
from specbench.analysis.reporting.brief import brief_comparison
from specbench.analysis.reporting.multi_render import render_multi, render_multi_report
from specbench.analysis.reporting.multi_serialize import multi_json
from specbench.analysis.reporting.serialize import comparison_json
from specbench.contract.gpu_metrics import read_gpu_metrics
from specbench.contract.rundir import GPU_METRICS_FILE
from specbench.launch import free_port
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import energy_slack, ledger, ledger_window_tok_s, read_jsonl, run_locust, wait_until

pytestmark = pytest.mark.slow

SPEED = 10
LEVELS = (4, 16)
ARGS = ("--ladder", ",".join(map(str, LEVELS)), "--max-tokens", "64", "--min-requests", "40", "--min-step-time", "5",
        "--max-step-time", "60", "--step-ci", "0", "--server-metrics-interval", "0.25", "--gpu-hour-price", "2",
        "--kwh-price", "0.15")
# The emulated gauges average over the sampling interval (2.5 s at speed 1 = 0.25 s at speed 10), as a dcgm-exporter
# whose collection interval matches the suite's cadence does (docs/guides/energy.md): the power samples then tile
# time, and integrating them misses no stretch of it.
EMULATOR = ("--gpu-telemetry", "2", "--power", "average_s=2.5", "--ledger-chunk-times")
DCGM_PATH = "/_emulator/dcgm/metrics"


def _truth(url: str, steps: list[dict[str, Any]]) -> dict[int, float]:
    """Per level: the emulator's joules over the step's window per output token it wrote in the window."""
    edges = [(s["steady_start_s"], s["end_s"]) for s in steps]
    at = ",".join(repr(t) for pair in edges for t in pair)
    totals = [p["total_j"] for p in requests.get(f"{url}/_emulator/energy?at={at}", timeout=10).json()["at"]]
    entries = ledger(url)
    out = {}
    for i, (step, (t0, t1)) in enumerate(zip(steps, edges, strict=True)):
        tokens = ledger_window_tok_s(entries, t0, t1) * (t1 - t0)
        out[step["target_c"]] = (totals[2 * i + 1] - totals[2 * i]) / tokens
    return out


def _run(root: Path, name: str, profile: str, fields: str = "power,energy,util",
         during: Any = None) -> dict[str, Any]:
    emu = start_emulator_process(profile, speed=SPEED, extra=[*EMULATOR, "--gpu-telemetry-fields", fields])
    try:
        out = root / name
        watcher = threading.Thread(target=during, args=(emu.url, out), daemon=True) if during else None
        if watcher is not None:
            watcher.start()
        proc = run_locust(emu.url, out, *ARGS, "--gpu-metrics", emu.url + DCGM_PATH, timeout=240)
        assert proc.returncode == 0, proc.stderr[-3000:]
        if watcher is not None:
            watcher.join(timeout=30)
        steps = read_jsonl(out / "steps.jsonl")
        return {"dir": out, "truth": _truth(emu.url, steps), "stderr": proc.stderr}
    finally:
        emu.stop()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("energy")
    return {
        "base": _run(root, "base", "baseline"),
        "spec": _run(root, "spec", "eagle3"),
        "base_power": _run(root, "base_power", "baseline", fields="power,util"),
        "spec_power": _run(root, "spec_power", "eagle3", fields="power,util"),
    }


@pytest.mark.parametrize(("name", "source"), [("base", "counter"), ("spec", "counter"), ("base_power", "power"),
                                              ("spec_power", "power")])
def test_energy_per_token_matches_the_power_model(runs: dict[str, dict[str, Any]], name: str, source: str) -> None:
    run = runs[name]
    samples, torn = read_gpu_metrics(run["dir"] / GPU_METRICS_FILE)
    assert torn == 0 and len(samples) > 20 and all(set(s["gpus"]) == {"0", "1"} for s in samples)
    rows = summarize_run(load_run(run["dir"])).rows
    assert [r.target_c for r in rows] == list(LEVELS)
    for row in rows:
        truth = run["truth"][row.target_c]
        assert row.gpus == 2 and row.energy_source == source, (name, row.target_c, row.energy_note)
        slack = energy_slack(samples, row)
        assert row.energy_per_token_j == pytest.approx(truth, rel=0.02 + slack), (name, row.target_c, slack)
        assert row.gpu_power_w is not None and row.gpu_power_w > 0
        assert (row.gpu_util_pct is not None and 50 < row.gpu_util_pct <= 100), row.gpu_util_pct
        # $2 per GPU-hour: two GPUs' hours over the window per million of its tokens.
        assert row.cost_per_mtok_usd == pytest.approx(2 * 2 * row.window_s / 3600 / (row.throughput_tok_s *
                                                                                      row.window_s) * 1e6)
        # $0.15 per kWh: the measured joules of a million tokens (3.6 MJ per kWh).
        assert row.energy_cost_per_mtok_usd == pytest.approx(row.energy_per_token_j * 1e6 / 3.6e6 * 0.15)
    # A finished run priced again: given prices replace the run's own, 0 leaves a cost out (None, never $0).
    again = summarize_run(load_run(run["dir"]), prices=Prices(gpu_hour=4.0, kwh=0.0)).rows
    for row, was in zip(again, rows, strict=True):
        assert row.cost_per_mtok_usd == pytest.approx(2 * was.cost_per_mtok_usd)
        assert row.energy_cost_per_mtok_usd is None and row.energy_per_token_j == was.energy_per_token_j
    cli = subprocess.run([sys.executable, "-m", "specbench.analysis", "summarize", str(run["dir"]),
                          "--kwh-price", "0.3", "--json"], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    steps = json.loads(cli.stdout)["steps"]
    assert [s["energy_cost_per_mtok_usd"] for s in steps] == pytest.approx(
        [2 * r.energy_cost_per_mtok_usd for r in rows])


def test_the_comparison_says_how_much_energy_speculation_costs(runs: dict[str, dict[str, Any]],
                                                               tmp_path: Path) -> None:
    for base, spec in (("base", "spec"), ("base_power", "spec_power")):
        comparison = compare_runs(load_run(runs[base]["dir"]), load_run(runs[spec]["dir"]))
        samples = {name: read_gpu_metrics(runs[name]["dir"] / GPU_METRICS_FILE)[0] for name in (base, spec)}
        for lv in comparison.levels:
            truth = runs[spec]["truth"][lv.target_c] / runs[base]["truth"][lv.target_c]
            energy = lv.energy
            slack = energy_slack(samples[base], lv.baseline) + energy_slack(samples[spec], lv.spec)
            assert energy is not None and energy.ratio == pytest.approx(truth, rel=0.03 + slack), (base, lv.target_c)
            assert energy.ratio_low is not None and energy.ratio_high is not None, energy.note
            assert energy.ratio_low < energy.ratio < energy.ratio_high
            assert energy.sentence.startswith(f"C={lv.target_c}: speculation uses {energy.ratio:.2f}x the energy "
                                              "per token (95% CI")
        text = render_comparison(comparison)
        assert "Energy per output token (spec / baseline" in text and "Cost per million output tokens" in text
        assert "Energy cost per million output tokens (--kwh-price): C=4: spec $" in text
        assert "Energy: at C=" in brief_comparison(comparison)
        data = json.loads(json.dumps(comparison_json(comparison)))
        level = data["levels"][0]
        assert level["energy_ratio"] == comparison.levels[0].energy.ratio  # type: ignore[union-attr]
        assert level["spec_energy_source"] in ("counter", "power") and level["spec_cost_per_mtok_usd"] > 0
        assert level["spec_energy_cost_per_mtok_usd"] == pytest.approx(
            comparison.levels[0].spec.energy_per_token_j * 1e6 / 3.6e6 * 0.15)
        assert [lv["target_c"] for lv in data["energy"]["levels"]] == list(LEVELS)
        _assert_energy_plot(comparison, tmp_path / base)


def test_a_many_configuration_comparison_gives_each_configurations_energy(runs: dict[str, dict[str, Any]]) -> None:
    """Two configurations against one baseline: each one's energy sentences are its own pair's, in the terminal
    text, report.md and comparison.json; a configuration whose runs had no telemetry gets none (never zeros)."""
    base = load_run(runs["base"]["dir"])
    multi = compare_many(base, [("counter", load_run(runs["spec"]["dir"])),
                                ("power", load_run(runs["spec_power"]["dir"]))])
    text, report, data = render_multi(multi), render_multi_report(multi), multi_json(multi)
    assert "Energy per output token, per configuration" in text and "## Energy per output token" in report
    for name, pair in zip(multi.names, multi.pairs, strict=True):
        sentences = [lv.energy.sentence for lv in pair.levels if lv.energy is not None]
        assert len(sentences) == len(LEVELS) and all("speculation uses" in s for s in sentences)
        assert all(s in text and s in report for s in sentences), name
        config = next(c for c in data["configurations"] if c["name"] == name)
        assert [lv["sentence"] for lv in config["energy"]["levels"]] == sentences
    bare = load_run(runs["base"]["dir"])
    bare.gpu_samples.clear()
    without = compare_many(bare, [("nogpu", bare)])
    assert "Energy per output token" not in render_multi(without)
    assert multi_json(without)["configurations"][0].get("energy") is None


ENERGY_CAPTION = "GPU energy per output token against concurrency"


def _assert_energy_plot(comparison: Any, out: Path) -> None:
    """energy_vs_c.png written beside the other plots, a real picture, in report.md and inlined in report.html."""
    written = {p.name for p in write_comparison_outputs(comparison, out)}
    assert "energy_vs_c.png" in written and "throughput_vs_c.png" in written
    image = imread(out / "energy_vs_c.png")
    assert image.shape[0] >= 300 and image.shape[1] >= 500 and float(np.std(image[..., :3])) > 0.02
    assert f"![{ENERGY_CAPTION}" in (out / "report.md").read_text() and "](energy_vs_c.png)" in (
        out / "report.md").read_text()
    assert f'<img alt="{ENERGY_CAPTION}' in (out / "report.html").read_text()


def _stop_after_first_step(url: str, out: Path) -> None:
    """The exporter goes away as soon as the first step's line is written."""
    wait_until(lambda: (out / "steps.jsonl").exists() and (out / "steps.jsonl").read_text().strip(),
               timeout_s=120, what="the first step's line", poll_s=0.05)
    requests.post(url + "/_emulator/dcgm/stop", timeout=10)


def test_an_exporter_that_goes_away_leaves_later_steps_not_measured_and_loses_nothing_else(
        tmp_path: Path) -> None:
    run = _run(tmp_path, "away", "eagle3", during=_stop_after_first_step)
    data = load_run(run["dir"])
    first, second = summarize_run(data).rows
    assert first.energy_per_token_j == pytest.approx(run["truth"][first.target_c],
                                                     rel=0.02 + energy_slack(data.gpu_samples, first))
    assert second.energy_j is None and second.energy_per_token_j is None and second.gpu_power_w is None
    assert second.energy_source is None and second.gpus == 2
    assert "not measured" in (second.energy_note or "")
    assert "GPU metrics: GET" in run["stderr"] and "ConnectionError" in run["stderr"]
    # Nothing else lost: both steps complete, every record written, the server's /metrics sampled to the end.
    assert [s["target_c"] for s in data.steps] == list(LEVELS)
    assert second.requests_ok >= 40 and second.throughput_tok_s and second.server_samples >= 10
    assert data.server_samples[-1]["t_s"] >= second.window_end_s  # type: ignore[operator]
    last_read = max(s["t_s"] for s in data.gpu_samples)  # the exporter went away around the second window's start
    assert first.window_end_s < last_read < second.window_end_s  # type: ignore[operator]
    comparison = compare_runs(data, data)
    assert comparison.levels[1].energy is not None and comparison.levels[1].energy.ratio is None
    assert "not measured" in comparison.levels[1].energy.sentence


def test_compare_reads_each_servers_own_exporter(tmp_path: Path) -> None:
    """``specbench compare --baseline-gpu-metrics A --spec-gpu-metrics B``: two emulators, each with its own exporter
    (2 and 3 GPUs, so a sample tells whose it is), and a shared ``--gpu-metrics`` that no run may read (nothing
    listens there). Each run's gpu_metrics.jsonl holds only its own exporter's GPUs, each step's energy per token
    is its own emulator's truth, and the report's spec / baseline ratio is the ratio of the two truths."""
    dead = f"http://127.0.0.1:{free_port()}"
    with start_emulator_process("baseline", speed=SPEED, extra=[*EMULATOR, "--gpu-telemetry", "2"]) as base, \
            start_emulator_process("eagle3", speed=SPEED, extra=[*EMULATOR, "--gpu-telemetry", "3"]) as spec:
        out = tmp_path / "report"
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec",
                               spec.url, "--out", str(out), "--no-refine", *ARGS, "--gpu-metrics", dead,
                               "--baseline-gpu-metrics", base.url + DCGM_PATH,
                               "--spec-gpu-metrics", spec.url + DCGM_PATH],
                              capture_output=True, text=True, timeout=400)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        truth = {name: _truth(url, read_jsonl(out / name / "steps.jsonl"))
                 for name, url in (("baseline", base.url), ("spec", spec.url))}
    assert f"baseline: GPU metrics from {base.url}{DCGM_PATH}" in proc.stdout
    slack: dict[str, dict[int, float]] = {}
    for name, url, gpus in (("baseline", base.url, {"0", "1"}), ("spec", spec.url, {"0", "1", "2"})):
        meta = json.loads((out / name / "meta.json").read_text())
        assert meta["settings"]["gpu_metrics"] == [url + DCGM_PATH], name  # its own, not the shared one
        samples, torn = read_gpu_metrics(out / name / GPU_METRICS_FILE)
        assert torn == 0 and len(samples) > 20 and all(set(s["gpus"]) == gpus for s in samples), name
        slack[name] = {}
        for row in summarize_run(load_run(out / name)).rows:
            assert row.gpus == len(gpus) and row.energy_source == "counter", (name, row.energy_note)
            slack[name][row.target_c] = energy_slack(samples, row)
            assert row.energy_per_token_j == pytest.approx(truth[name][row.target_c],
                                                           rel=0.02 + slack[name][row.target_c]), name
    report = json.loads((out / "comparison.json").read_text())
    assert [lv["target_c"] for lv in report["levels"]] == list(LEVELS)
    for level in report["levels"]:
        c = level["target_c"]
        assert level["energy_ratio"] == pytest.approx(truth["spec"][c] / truth["baseline"][c],
                                                      rel=0.03 + slack["spec"][c] + slack["baseline"][c]), c
        assert level["energy_ratio_low"] < level["energy_ratio"] < level["energy_ratio_high"]
    assert "ConnectionError" not in proc.stdout + proc.stderr  # the shared exporter was never asked
    assert (out / "energy_vs_c.png").exists() and "](energy_vs_c.png)" in (out / "report.md").read_text()
