"""Open loop in real headless Locust runs against the emulator: rates held, Poisson gaps, no drift, drops."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pytest

from specbench.contract.rundir import read_run
from tests.conftest import LOCUSTFILE, run_flags, run_locust
from tests.workloads.kstest import ks_exponential, passes_at_1pct

FAST = ("--min-step-time", "2", "--max-step-time", "60", "--max-tokens", "16", "--step-ci", "0")


def _sends(records, step):
    return sorted(r for r in records if r["step"] == step)


@pytest.mark.serial  # judges send timing: runs alone (pyproject.toml)
def test_constant_rates_are_held_within_2_percent_and_sent_on_schedule(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--rate-ladder", "20,40", "--arrivals", "constant", "--min-requests", "100",
                      *FAST, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    assert [s["target_rate"] for s in run.steps] == [20.0, 40.0]
    assert all(s["target_c"] == 0 and s["dropped"] == 0 and not run_flags(s) for s in run.steps), run.steps
    assert "rate=40/s: ended" in proc.stderr
    for step in run.steps:
        rate = step["target_rate"]
        # the step's own figure: sends in the window / window length
        assert abs(step["achieved_rate"] / rate - 1) < 0.02, step
        mine = [r for r in run.records if r["step"] == step["index"]]
        assert all(r["target_rate"] == rate and r["scheduled_s"] is not None for r in mine)
        starts = sorted(r["start_s"] for r in mine)
        assert abs((len(starts) - 1) / (starts[-1] - starts[0]) / rate - 1) < 0.02
        scheduled = sorted(r["scheduled_s"] for r in mine)
        gaps = [b - a for a, b in itertools.pairwise(scheduled)]
        assert max(abs(g - 1 / rate) for g in gaps) < 1e-6  # constant: every gap exactly 1/rate
        late = sorted(r["start_s"] - r["scheduled_s"] for r in mine)
        # sent when due: typically ~1 ms late; the bounds leave room for a loaded shared machine
        assert late[0] >= 0 and late[len(late) // 2] < 0.01 and late[int(0.99 * len(late))] < 0.1, late[-5:]


def test_a_faster_step_after_a_slow_one_sends_its_whole_rate(tmp_path, emulator):
    """Every user of the pool shares one pacer lock. When users could each make a lock of their own (the lock's
    making once yielded to the event loop), 48 of them claimed the slow step's schedule seconds ahead, and the
    next step, at 16 req/s, sent 8.6-9.8 req/s and dropped about 50 arrivals with most of its 256 users idle."""
    emu = emulator("baseline", speed=20)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--rate-ladder", "4,16", "--arrivals", "constant", "--min-requests", "30",
                      *FAST, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    assert [s["target_rate"] for s in run.steps] == [4.0, 16.0]
    for step in run.steps:
        assert step["dropped"] == 0 and step["achieved_rate"] >= 0.9 * step["target_rate"], step


@pytest.mark.serial  # judges send timing: runs alone (pyproject.toml)
def test_poisson_gaps_pass_ks_and_a_stalled_server_does_not_delay_arrivals(tmp_path, emulator):
    # Every stream stalls 1 s (20 s at speed 20) half-way: a closed loop would slow to a crawl; the schedule
    # must not, so requests pile up in flight and are still sent when due.
    emu = emulator("baseline", speed=20, extra=["--fault-stall", "1", "--stall-s", "20"])
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--rate-ladder", "50", "--arrivals", "poisson", "--seed", "7",
                      "--min-requests", "200", *FAST, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    (step,) = run.steps
    assert step["dropped"] == 0 and "low_rate" not in step["flags"], step
    assert step["achieved_c"] > 40, step  # about rate x 1 s of stall in flight: arrivals did not wait
    mine = [r for r in run.records if r["step"] == 0]
    assert all(r["e2e_s"] >= 1.0 for r in mine if r["status"] == "ok")
    scheduled = sorted(r["scheduled_s"] for r in mine)
    starts = sorted(r["start_s"] for r in mine)
    for times in (scheduled, starts):  # the schedule, and what was actually sent
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert len(gaps) >= 200
        assert passes_at_1pct(gaps, 50.0), ks_exponential(gaps, 50.0)
    # the same test rejects gaps that are not exponential (it can fail)
    assert not passes_at_1pct([1 / 50.0] * 200, 50.0)
    assert not passes_at_1pct([random.Random(1).uniform(0, 2 / 50.0) for _ in range(300)], 50.0)
    late = sorted(r["start_s"] - r["scheduled_s"] for r in mine)
    assert late[len(late) // 2] < 0.01 and late[int(0.99 * len(late))] < 0.1, late[-5:]  # no drift: ~1 ms late
    # achieved rate: the count in a window is Poisson, so it is held within three standard deviations
    expected = 50.0 * (step["end_s"] - step["steady_start_s"])
    assert abs(step["achieved_rate"] / 50.0 - 1) < 3 / expected ** 0.5, step


def test_requests_due_while_every_user_is_busy_are_dropped_counted_and_flagged(tmp_path, emulator):
    emu = emulator("baseline", speed=20, extra=["--fault-stall", "1", "--stall-s", "20"])
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--rate-ladder", "20", "--max-in-flight", "4", "--min-requests", "10",
                      "--min-step-time", "2", "--max-step-time", "4", "--max-tokens", "16", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    (step,) = run.steps
    assert step["dropped"] > 10 and "dropped_requests" in step["flags"], step
    assert max(r["start_s"] - r["scheduled_s"] for r in run.records) < 0.2  # dropped, never sent late instead
    assert "dropped_requests" in proc.stderr


def test_bad_rate_ladder_and_slo_are_one_clear_line(tmp_path):
    for flag, value, expected in [("--rate-ladder", "1,fast", "--rate-ladder: expected comma-separated positive"),
                                  ("--slo", "ttft=2", "--slo: ttft expects a positive time with unit s or ms"),
                                  ("--slo", "latency=2s", "--slo: expected KEY=VALUE with KEY one of")]:
        proc = subprocess.run([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host",
                               "http://127.0.0.1:9", flag, value], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr[-1500:]
        assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-1500:]
