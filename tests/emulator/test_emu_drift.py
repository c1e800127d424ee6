"""``--drift F``: the emulator's speed changes over wall time exactly as ``emulator.drift`` defines it, so a benchmark's
drift detection has a known truth. Real emulator processes, real streaming HTTP; the step times are the ledger's."""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from specbench.emulator import ProfileError, load_profile
from specbench.emulator.drift import FLOOR, Drift

REPO = Path(__file__).resolve().parents[2]
# A baseline step at speed 2 is ~5.7 ms: 24 tokens are ~0.14 s at start, steps long against timer lateness.
SPEED = "2"
BODY = {"text": "How does a server drift?", "sampling_params": {"max_new_tokens": 24, "ignore_eos": True},
        "stream": True}
EDGE = 5  # requests compared at each end (medians)


@pytest.fixture
def launch(make_http: Any) -> Iterator[Callable[..., Any]]:
    """Starts ``python -m specbench.emulator --port 0 --speed SPEED *args`` and returns a client bound to its URL
    (conftest's ``Http``); every process started is stopped at the end of the test."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> Any:
        proc = subprocess.Popen([sys.executable, "-m", "specbench.emulator", "--port", "0", "--speed", SPEED, *args],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(proc)
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        return make_http(url)

    yield start
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _load(http: Any, started: float, until_s: float, max_requests: int = 150) -> list[float]:
    """One closed-loop client until ``until_s`` after ``started`` (monotonic) or ``max_requests``, whichever first;
    returns each request's duration as the client saw it (s)."""
    durations: list[float] = []
    for _ in range(max_requests):
        sent = time.monotonic()
        if sent - started >= until_s:
            break
        reply = http.stream("/generate", BODY)
        durations.append(time.monotonic() - sent)
        assert reply.status == 200 and reply.complete
    return durations


def _steps(http: Any) -> tuple[list[float], list[float], dict[str, Any]]:
    """Per request, oldest first: mid-time (s after server start) and mean step time (s), from the ledger; and
    ``/_emulator/stats``."""
    start = http.get("/server_info").json()["startup_time"]
    mids, steps = [], []
    for rec in http.get("/_emulator/requests").json():
        assert rec["status"] == 200 and rec["completion_tokens"] == 24
        begin, end = rec["scheduled_s"], rec["left_batch_s"]
        mids.append((begin + end) / 2 - start)
        steps.append((end - begin) / len(rec["tokens_per_step"]))
    return mids, steps, http.get("/_emulator/stats").json()


def _ratio(values: list[float]) -> float:
    """Late over early: the median of the last ``EDGE`` over that of the first ``EDGE`` after a warm-up request."""
    return statistics.median(values[-EDGE:]) / statistics.median(values[1:1 + EDGE])


def test_the_definition() -> None:
    drift = Drift(-0.10, started_s=100.0)
    assert drift.factor(100.0) == 1.0 and drift.factor(160.0) == pytest.approx(0.9)
    assert drift.stretch(1.0, 160.0) == pytest.approx(1 / 0.9)
    assert Drift(+0.10, started_s=0.0).factor(120.0) == pytest.approx(1.2)
    assert Drift(-0.10, started_s=0.0).factor(3600.0) == FLOOR  # clamped: never stops, never runs backwards
    assert Drift(0.0, started_s=0.0).stretch(0.1234567, 1e6) == 0.1234567
    assert load_profile("baseline").drift_per_min == 0.0
    assert load_profile("baseline", overrides={"drift_per_min": -0.25}).drift_per_min == -0.25
    with pytest.raises(ProfileError, match="drift_per_min"):
        load_profile("baseline", overrides={"drift_per_min": float("nan")})


def test_a_negative_drift_slows_every_step_as_defined(launch: Callable[..., Any]) -> None:
    drift = -4.5  # per minute: after 6 s the server runs at 0.55 of its start speed, each step 1.8 times as long
    http = launch("--drift", str(drift))
    durations = _load(http, time.monotonic(), until_s=6.0)
    mids, steps, stats = _steps(http)
    assert len(steps) == len(durations) >= 2 * EDGE + 1
    expected = _ratio([1 / max(FLOOR, 1 + drift * t / 60) for t in mids])
    measured, seen = _ratio(steps), _ratio(durations)
    print(f"drift {drift}/min: {len(steps)} requests, late/early step time {measured:.3f}, request duration "
          f"{seen:.3f} (expected {expected:.3f})")
    assert expected > 1.4
    assert 1 + 0.5 * (expected - 1) < measured < 1.4 * expected
    assert 1 + 0.3 * (expected - 1) < seen < 1.6 * expected  # the client's view: HTTP turnaround included
    assert stats["drift_per_min"] == drift
    now_t = time.time() - http.get("/server_info").json()["startup_time"]
    assert stats["speed_factor"] == pytest.approx(1 + drift * now_t / 60, abs=0.05)
    info = http.get("/server_info").json()
    assert info["emulator"]["drift_per_min"] == drift and "--drift -4.5" in info["launch_command"]
    assert http.get("/_emulator/profile").json()["drift_per_min"] == drift


def test_drift_0_is_no_drift(launch: Callable[..., Any]) -> None:
    zero, none = launch("--drift", "0"), launch()
    started = time.monotonic()
    clients = [threading.Thread(target=_load, args=(http, started, 4.0)) for http in (zero, none)]
    for client in clients:
        client.start()
    for client in clients:
        client.join(timeout=30)
    medians = []
    for http in (zero, none):
        _, steps, stats = _steps(http)
        assert len(steps) >= 2 * EDGE + 1
        print(f"no drift: {len(steps)} requests, step time late/early {_ratio(steps):.3f}")
        assert 0.75 < _ratio(steps) < 1.33  # no trend
        assert stats["drift_per_min"] == 0.0 and stats["speed_factor"] == 1.0
        info = http.get("/server_info").json()
        assert info["emulator"]["drift_per_min"] == 0.0 and "--drift" not in info["launch_command"]
        medians.append(statistics.median(steps))
    assert 0.8 < medians[0] / medians[1] < 1.25


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "fast"])
def test_a_bad_drift_is_a_one_line_error(value: str) -> None:
    done = subprocess.run([sys.executable, "-m", "specbench.emulator", "--port", "0", f"--drift={value}"], cwd=REPO,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--drift" in errors[0] and repr(value) in errors[0]
