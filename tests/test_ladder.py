"""The concurrency ladder in real headless and web-UI Locust runs against the emulator."""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from specbench.analysis import compare_runs, load_run
from specbench.contract.rundir import read_run
from specbench.launch import free_port
from tests.conftest import (
    LOCUSTFILE,
    ledger,
    ledger_window_tok_s,
    locust_cmd,
    read_jsonl,
    run_flags,
    run_locust,
    wait_answering,
    wait_until,
)

LADDER = [1, 2, 4, 8, 16, 32, 64]
SPEED = 4.0
MAX_TOKENS = 64


def test_ladder_1_to_64_steps_in_order_concurrency_and_throughput_match_what_the_server_served(tmp_path, emulator):
    emu = emulator("baseline", speed=SPEED, extra=["--ledger-chunk-times"])
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--ladder", ",".join(map(str, LADDER)), "--max-tokens", str(MAX_TOKENS),
                      "--min-step-time", "2", "--max-step-time", "60", "--step-ci", "0", timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    steps = run.steps
    assert [s["target_c"] for s in steps] == LADDER
    assert all(not run_flags(s) for s in steps), [(s["target_c"], s["flags"]) for s in steps]
    # progress: one line when each step starts and one when its books close
    assert proc.stderr.count(": started (measures") == len(LADDER)
    closed = re.findall(r"step \d+/\d+ C=\d+: ended \(\w+\) after [\d.]+ s window; achieved C [\d.]+; "
                        r"ok/total \d+/\d+; tok/s [\d.]+", proc.stderr)
    assert len(closed) == len(LADDER), proc.stderr[-3000:]

    truth = ledger(emu.url)
    for prev, step in itertools.pairwise(steps):
        assert prev["end_s"] <= step["start_s"] + 1e-6, "a window must end before the next step's users start"
    for step in steps:
        assert step["start_s"] < step["steady_start_s"] < step["end_s"]
        # warm-up: every user finished one request before the window opened
        assert not any(r["step"] == step["index"] and r["phase"] == "warmup"
                       and r["start_s"] >= step["steady_start_s"] for r in run.records)
        assert abs(step["achieved_c"] - step["target_c"]) <= 0.05 * step["target_c"], step
        # the step's throughput is what the server wrote in its window (the ledger: the same run's truth, which a
        # busy machine cannot move away from the measurement as it moves the emulator away from its cost model)
        served = ledger_window_tok_s(truth, step["steady_start_s"], step["end_s"])
        assert abs(step["throughput_tok_s"] / served - 1) < 0.03, (step["target_c"], step["throughput_tok_s"], served)


def test_a_step_too_short_for_its_concurrency_is_flagged(tmp_path, emulator):
    emu = emulator("baseline", speed=2)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--ladder", "2,16", "--max-tokens", "256", "--min-requests", "5",
                      "--min-step-time", "1", "--max-step-time", "1.5", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = read_run(out).steps
    short = steps[-1]
    assert short["target_c"] == 16 and short["ended_by"] == "max_time"
    assert "too_few_requests" in short["flags"]
    assert "FLAGS: " in proc.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stopping_mid_step_leaves_valid_records_and_steps(tmp_path, emulator, signum):
    emu = emulator("baseline", speed=10)
    out = tmp_path / "run"
    # Each step ends on --max-step-time (200 requests take longer): the first after 5 s, and the second, stopped
    # 1 s after it started, had 4 s left. (On --min-requests alone the C=2 step took three times the C=6 one.)
    proc = subprocess.Popen(locust_cmd(emu.url, out, "--ladder", "2,6", "--max-tokens", "64", "--min-requests",
                                       "200", "--min-step-time", "1", "--max-step-time", "5"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    steps_file = out / "steps.jsonl"
    wait_until(lambda: steps_file.exists() and steps_file.read_text().strip(), timeout_s=90, poll_s=0.2,
               what="the first step's line")
    time.sleep(1.0)  # inside the second step
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err[err.find("Traceback") - 200:][:3000]
    run = read_run(out)  # every file parses
    assert run.skipped_lines == 0
    assert [s["target_c"] for s in run.steps] == [2, 6]
    assert run.steps[-1]["ended_by"] == "stopped" and "stopped" in run.steps[-1]["flags"]
    assert run.meta.partial is True
    assert {r["step"] for r in run.records} == {0, 1}


def test_web_ui_two_starts_both_run_the_full_ladder(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    port = free_port()
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--web-host", "127.0.0.1", "--web-port",
           str(port), "--host", emu.url, "--label", "ui", "--ladder", "1,3", "--max-tokens", "16",
           "--min-requests", "6", "--min-step-time", "1", "--max-step-time", "30", "--step-ci", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
                            env={**os.environ})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(base + "/", timeout_s=30, what="the web UI")
        for _ in range(2):
            resp = requests.post(base + "/swarm", data={"user_count": 1, "spawn_rate": 1, "host": emu.url},
                                 headers={"Origin": base}, timeout=10)  # as the UI's page sends it (#53)
            assert resp.status_code == 200, resp.text
            time.sleep(2.5)  # the stats view is cached for 2 s
            wait_until(lambda: requests.get(base + "/stats/requests", timeout=5).json().get("state") == "stopped",
                       timeout_s=90, poll_s=0.5, what="the web UI's state 'stopped'")
            time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2, runs
    for run_dir in runs:
        steps = read_jsonl(Path(run_dir) / "steps.jsonl")
        assert [s["target_c"] for s in steps] == [1, 3], run_dir
        assert all(s["requests_measured"] >= 6 for s in steps)


def test_step_ci_ends_a_step_once_precise_enough_and_never_before_the_minimum(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    # Both runs at once, on one emulator (each judges only when and why its own step ended).
    runs = {name: subprocess.Popen(locust_cmd(emu.url, tmp_path / name, "--ladder", "4", "--max-tokens", "32",
                                              "--min-requests", "12", "--min-step-time", "2", *extra),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
            for name, extra in (("loose", ("--max-step-time", "40", "--step-ci", "0.5")),
                                ("strict", ("--max-step-time", "5", "--step-ci", "0.0001")))}
    errs = {name: proc.communicate(timeout=180)[1] for name, proc in runs.items()}
    assert all(proc.returncode == 0 for proc in runs.values()), errs["loose"][-2000:] + errs["strict"][-2000:]
    (loose_step,) = read_run(tmp_path / "loose").steps
    (strict_step,) = read_run(tmp_path / "strict").steps
    assert loose_step["ended_by"] == "ci" and loose_step["requests_measured"] >= 12
    assert loose_step["end_s"] - loose_step["steady_start_s"] >= 2.0
    assert strict_step["ended_by"] == "max_time"
    # a step ended for precision is long enough for the report's interval (batches of one median request)
    (level,) = compare_runs(load_run(tmp_path / "loose"), load_run(tmp_path / "loose")).levels
    assert level.ratio_low is not None and level.ratio_high is not None


def test_distributed_processes_share_the_masters_steps_and_one_run_directory(tmp_path, emulator):
    """Smoke test of the distributed design (exactness: tests/test_distributed.py): master + 2 workers."""
    emu = emulator("baseline", speed=20)
    out = tmp_path / "run"
    port = free_port()
    proc = run_locust(emu.url, out, "--processes", "2", "--master-bind-port", str(port), "--master-port", str(port),
                      "--ladder", "2,6", "--max-tokens", "32", "--min-requests", "12", "--min-step-time", "1",
                      "--max-step-time", "60", "--step-ci", "0", timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    assert [s["target_c"] for s in run.steps] == [2, 6]
    assert {r["worker"] for r in run.records} == {0, 1}, "both workers' records reached the master's file"
    assert {r["step"] for r in run.records} == {0, 1}
    for rec in run.records:  # the global step index, not each worker's share of the users
        assert rec["target_c"] == [2, 6][rec["step"]]
    assert len({r["request_id"] for r in run.records}) == len(run.records)
    assert all(r["status"] == "ok" for r in run.records)
    for step in (0, 1):  # the master numbers each level's requests: no number used twice
        seqs = [r["prompt_seq"] for r in run.records if r["step"] == step]
        assert len(set(seqs)) == len(seqs), "workers repeated prompt numbers"
    # The master alone samples /metrics: one read a second, not one per process.
    times = [s["t_s"] for s in run.server_samples]
    assert len(times) >= 3 and min(b - a for a, b in itertools.pairwise(times)) > 0.5
