"""A load process that stands still (SIGSTOP then SIGCONT: what a laptop's sleep or a frozen VM does to it) is
caught and said: its step carries ``client_paused`` with the seconds it missed, summarize warns, and the
comparison gives no verdict at that level. A pause well under the threshold must stay silent.

Before: a run paused for 9 s gave a step of a tenth of its throughput, "Warnings: none" and a verdict.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from specbench.analysis import compare_runs, load_run, summarize_run
from specbench.contract import laghist
from specbench.contract.policy import STALL_MS
from specbench.launch import free_port
from specbench.shapes.pauses import PAUSE_S, PauseWatch
from tests.conftest import locust_cmd, read_jsonl, wait_until
from tests.procs import end_stopped
from tests.test_distributed import master_cmd, worker

pytestmark = pytest.mark.slow

SHORT_S, LONG_S = 0.8, 6.0  # a pause under the threshold, and one well over it


def _first_record_of(out: Path, step: int) -> bool:
    path = out / "records.jsonl"
    if not path.exists():
        return False
    for line in path.read_text().splitlines():
        try:
            if json.loads(line).get("step") == step:
                return True
        except ValueError:
            continue
    return False


def _pause(proc: subprocess.Popen[str], seconds: float) -> None:
    proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        proc.send_signal(signal.SIGCONT)


def test_a_paused_load_process_flags_its_step_and_withholds_the_verdict(tmp_path: Path, emulator) -> None:
    emu = emulator("baseline", speed=10)
    out = tmp_path / "run"
    cmd = locust_cmd(emu.url, out, "--ladder", "2,4", "--max-tokens", "64", "--min-step-time", "8",
                     "--max-step-time", "40", "--step-ci", "0", "--min-requests", "8")
    proc = subprocess.Popen(cmd, cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: _first_record_of(out, 0), timeout_s=60, poll_s=0.1, what="a record of the first step")
        _pause(proc, SHORT_S)
        wait_until(lambda: _first_record_of(out, 1), timeout_s=90, poll_s=0.1, what="a record of the second step")
        _pause(proc, LONG_S)
        _out, err = proc.communicate(timeout=120)
    finally:
        end_stopped(proc)
    assert proc.returncode in (0, 1), err[-2000:]
    steps = {s["index"]: s for s in read_jsonl(out / "steps.jsonl")}
    assert "client_paused" not in steps[0]["flags"] and "paused_s" not in steps[0], steps[0]
    assert "client_paused" in steps[1]["flags"], steps[1]
    assert LONG_S - PAUSE_S / 2 <= steps[1]["paused_s"] <= LONG_S + 1.5, steps[1]
    assert "stood still" in err
    summary = summarize_run(load_run(out))
    paused = [w for w in summary.warnings if w.code == "client_paused"]
    assert [w.target_c for w in paused] == [4] and "no verdict at this level" in paused[0].message
    comparison = compare_runs(load_run(out), load_run(out), n_boot=100)
    withheld = [w for w in comparison.warnings if w.code == "client_paused" and w.run is None]
    assert [w.target_c for w in withheld] == [4] and "no verdict at this level" in withheld[0].message


def test_a_paused_worker_flags_its_step(tmp_path: Path, emulator) -> None:
    """Before: only the master's own tick was watched, so a worker process stopped for 2 s (under Locust's ~3 s
    missing-worker limit) left no trace. Its event-loop histogram shows one tick that late; 0.5 s stays silent."""
    emu = emulator("baseline", speed=10)
    port, token, out = free_port(), "a-token", tmp_path / "run"
    master = subprocess.Popen(master_cmd(emu.url, out, port, token, 1, "--ladder", "2,4", "--max-tokens", "64",
                                         "--min-step-time", "8", "--max-step-time", "40", "--step-ci", "0",
                                         "--min-requests", "8"),
                              cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lone = worker(tmp_path / "machine1", port, token)
    try:
        wait_until(lambda: _first_record_of(out, 0), timeout_s=60, poll_s=0.1, what="a record of the first step")
        _pause(lone, 0.5)
        wait_until(lambda: _first_record_of(out, 1), timeout_s=90, poll_s=0.1, what="a record of the second step")
        time.sleep(1.0)
        _pause(lone, 2.0)
        _out, err = master.communicate(timeout=120)
    finally:
        end_stopped(master, lone)
    assert master.returncode in (0, 1), err[-2000:]
    steps = {s["index"]: s for s in read_jsonl(out / "steps.jsonl")}
    assert "client_paused" not in steps[0]["flags"] and "paused_s" not in steps[0], steps[0]
    assert "client_paused" in steps[1]["flags"] and "worker_lost" not in steps[1]["flags"], steps[1]
    assert STALL_MS / 1000 <= steps[1]["paused_s"] <= 2.5, steps[1]
    assert "stood still" in err


def test_the_histogram_reads_a_stall_as_its_bins_floor() -> None:
    counts = laghist.empty()
    for lag_ms in (0.3, 1.2, 900.0):  # ordinary lateness and a near miss: no stall
        counts[laghist.bin_of(lag_ms)] += 1
    assert laghist.stalled_s(counts, STALL_MS) == 0.0
    counts[laghist.bin_of(2000.0)] += 1
    counts[laghist.bin_of(9000.0)] += 1  # the last bin: read as its lower edge, about 3.8 s
    assert 1.0 + 3.7 <= laghist.stalled_s(counts, STALL_MS) <= 2.0 + 3.8


def test_the_watch_counts_only_gaps_beyond_its_threshold() -> None:
    watch = PauseWatch()
    assert watch.observe(100.0, 10.0) == 0.0
    assert watch.observe(103.0, 11.0 + PAUSE_S) == 0.0  # a tick late by exactly the threshold: silent
    assert watch.observe(110.0, 21.0 + PAUSE_S) == pytest.approx(9.0)  # 10 s after the last tick: 9 s missed
    assert watch.paused_s(103.0, 110.0) == pytest.approx(9.0)  # it began at the tick before (wall clock 103)
    assert watch.paused_s(110.0, 200.0) == 0.0 and watch.paused_s(90.0, 103.0) == 0.0
