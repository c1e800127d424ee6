"""Gamma arrivals (``--arrivals gamma --burstiness B``): bursty open-loop traffic, judged for what it is.

Gaps are Gamma(shape B, scale 1/(rate x B)): mean 1/rate, CV 1/sqrt(B). The schedule is checked on many
seeded gaps against those moments (B = 1 against the exponential law too), a real run sends exactly the
schedule's gaps, and the send count of a bursty window is judged with its own spread (variance B^-1 x mean),
so a bursty step is not called short by chance nor a short Poisson step excused.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import subprocess
import sys

import pytest

from specbench.contract.policy import arrival_dispersion, rate_held
from specbench.contract.rundir import read_run
from specbench.shapes.arrivals import ArrivalSchedule
from tests.conftest import run_flags, run_locust
from tests.workloads.kstest import passes_at_1pct

FAST = ("--min-step-time", "2", "--max-step-time", "60", "--max-tokens", "16", "--step-ci", "0")


def _gaps(rate: float, mode: str, burstiness: float, n: int, seed: str = "1:0:0") -> list[float]:
    sched = ArrivalSchedule(step=0, rate=rate, mode=mode, anchor_s=0.0, seed=seed, burstiness=burstiness)
    due = [sched.claim(0.0)[0] for _ in range(n + 1)]
    return [b - a for a, b in itertools.pairwise(due)]


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_asked_mean_and_spread(burstiness: float) -> None:
    rate, n = 20.0, 40_000
    gaps = _gaps(rate, "gamma", burstiness, n)
    mean = statistics.fmean(gaps)
    cv2 = statistics.pvariance(gaps) / mean**2
    # the mean within 4 standard errors (gap SD = mean/sqrt(B)); the CV^2 within 15% (kurtosis 3 + 6/B)
    assert abs(mean * rate - 1) < 4 / math.sqrt(burstiness * n), mean
    assert abs(cv2 * burstiness - 1) < 0.15, cv2
    if burstiness == 1.0:  # shape 1 is the exponential law: Poisson arrivals
        assert passes_at_1pct(gaps[:2000], rate)
    else:  # and the same test tells a bursty or an even process from Poisson (it can fail)
        assert not passes_at_1pct(gaps[:2000], rate)


def test_gamma_schedules_are_seeded_and_differ_by_seed() -> None:
    assert _gaps(10.0, "gamma", 0.5, 50) == _gaps(10.0, "gamma", 0.5, 50)
    assert _gaps(10.0, "gamma", 0.5, 50) != _gaps(10.0, "gamma", 0.5, 50, seed="2:0:0")


@pytest.mark.parametrize(("arrivals", "burstiness"), [("poisson", 1.0), ("gamma", 0.25), ("gamma", 4.0)])
def test_rate_held_at_the_least_count_and_not_one_fewer(arrivals: str, burstiness: float) -> None:
    rate, window = 20.0, 30.0
    dispersion = arrival_dispersion(arrivals, burstiness)
    expected = rate * window
    least = next(n for n in range(int(expected) + 1) if rate_held(n, rate, window, dispersion))
    assert not rate_held(least - 1, rate, window, dispersion)
    # the slack is three standard deviations of the count, or 5%: whichever is wider
    assert least == math.ceil(expected - max(0.05 * expected, 3 * math.sqrt(dispersion * expected)))
    if burstiness < 1:  # a bursty window may fall short further by chance than a Poisson one
        assert not rate_held(least, rate, window, arrival_dispersion("poisson"))


def test_a_gamma_rate_step_sends_its_schedule_and_holds_its_rate(tmp_path, emulator) -> None:
    emu = emulator("baseline", speed=20)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--rate-ladder", "40", "--arrivals", "gamma", "--burstiness", "0.25",
                      "--seed", "3", "--min-requests", "150", *FAST, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    (step,) = run.steps
    assert step["arrival_dispersion"] == 4.0 and step["dropped"] == 0, step
    assert "low_rate" not in run_flags(step), step
    assert run.meta.settings.arrivals == "gamma" and run.meta.settings.burstiness == 0.25
    scheduled = sorted(r["scheduled_s"] for r in run.records if r["step"] == 0)
    sent = [b - a for a, b in itertools.pairwise(scheduled)]
    # one process: the schedule seeded by run seed, step and process, gap for gap
    assert sent == pytest.approx(_gaps(40.0, "gamma", 0.25, len(sent), seed="3:0:0"), abs=1e-6)
    summary = json.loads(subprocess.run([sys.executable, "-m", "specbench.analysis", "summarize", str(out), "--json"],
                                        capture_output=True, text=True, timeout=120, check=True).stdout)
    assert summary["open_loop"]["burstiness"] == 0.25, summary["open_loop"]
    (row,) = summary["steps"]
    assert row["arrival_dispersion"] == 4.0 and "low_rate" not in row["flags"], row


def test_burstiness_without_gamma_or_out_of_range_is_one_clear_line(tmp_path) -> None:
    for args, said in ((("--arrivals", "poisson", "--burstiness", "0.5"), "--burstiness: shapes --arrivals gamma"),
                       (("--arrivals", "gamma", "--burstiness", "0"), "--burstiness: expected a number")):
        proc = run_locust(None, tmp_path / "run", "--rate-ladder", "4", *args, *FAST, timeout=60)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
