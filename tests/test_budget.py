"""--time-budget: duration parsing with clear errors, each step's share, and the forecast line."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specbench.contract.settings import SettingsError, SuiteSettings, check_budget_fits, duration_arg, parse_budget
from specbench.launch import free_port
from specbench.shapes.books import own_stable_s, step_min_requests, warmup_stable_s
from specbench.shapes.budget import (
    BudgetError,
    describe_forecast,
    describe_plan,
    halfwidth_for,
    level_needs,
    parse_duration,
    step_lifetime,
    step_share,
    time_for,
)
from tests.conftest import REPO


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("1h30m", 5400), ("90s", 90), ("900", 900),
                                               ("1.5h", 5400), ("2m30s", 150), (" 5M ", 300)])
def test_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "m", "-3m", "0s", "3m-", "1h 30m"])
def test_bad_durations_name_the_flag(text: str) -> None:
    with pytest.raises(BudgetError, match="--time-budget: expected"):
        parse_duration(text)


def test_settings_reject_a_bad_budget_as_a_settings_error() -> None:
    class Options:
        time_budget = "soon"

    with pytest.raises(SettingsError, match="--time-budget"):
        SuiteSettings.from_options(Options())


def test_steps_share_what_is_left_and_unused_time_passes_on() -> None:
    first = step_share(800.0, 0.0, 8, 600.0)
    assert first == pytest.approx(800 * 0.95 / 8)
    # the first four steps ended early (100 s in all): the last four share the rest
    assert step_share(800.0, 100.0, 4, 600.0) == pytest.approx((760 - 100) / 4)
    assert step_share(800.0, 0.0, 1, 60.0) == 60.0  # --max-step-time still caps a step
    assert step_share(100.0, 500.0, 2, 60.0) == 1.0  # spent: a step still gets a moment


def _step(c: int, life: float | None) -> dict:
    return {"target_c": c, "target_rate": None, **({"lifetime_p50_s": life} if life else {})}


def test_the_levels_left_get_what_their_lifetimes_need_first_and_share_the_rest() -> None:
    # The demo's speculative ladder (#76): C=1 and C=2 measured 0.35 and 0.42 s; on that line C=250 lives 17.8 s.
    closed = [_step(1, 0.35), _step(2, 0.42)]
    needs = level_needs([5, 10, 250], closed, lambda c: 30, 2.0)
    life_250 = 0.42 + 0.07 * 248
    assert needs[2] == pytest.approx(life_250 + 2 * life_250)  # warm-up and two lifetimes
    assert needs[0] == pytest.approx(2.0 + 0.63 + 30 * 0.63 / 5)  # the stable time; its 30 requests, 5 at a time
    # Enough time: each its need, the rest equally; one second less than the needs: each the same part of its need.
    left = sum(needs) + 30.0
    assert step_share(left / 0.95, 0.0, 3, 600.0, needs) == pytest.approx(needs[0] + 10.0)
    # One second short of the needs: this step its need, and no more than the equal split's part.
    short = (sum(needs) - 1.0) / 0.95
    assert step_share(short, 0.0, 3, 600.0, needs) == pytest.approx(needs[0])
    assert step_share(short, 0.0, 3, 600.0, [50.0, *needs[1:]]) == pytest.approx((sum(needs) - 1.0) / 3)
    assert step_share(left / 0.95, 0.0, 3, 5.0, needs) == 5.0  # --max-step-time still caps a step


def test_needs_fall_back_to_the_equal_split_without_a_measured_lifetime() -> None:
    assert level_needs([1, 2], [], lambda c: 30, 2.0) == []
    assert level_needs([2, 5], [_step(1, None), {"target_c": 0, "target_rate": 5.0, "lifetime_p50_s": 1.0}],
                       lambda c: 30, 2.0) == []  # no ok request; an open-loop step
    assert step_share(800.0, 0.0, 8, 600.0, []) == step_share(800.0, 0.0, 8, 600.0)
    # A lifetime that fell between two levels never extrapolates below the last one's.
    needs = level_needs([100], [_step(10, 2.0), _step(30, 1.5)], lambda c: 30, 0.0)
    assert needs == [pytest.approx(2.0 + 2 * 1.5)]
    assert step_lifetime(_step(30, 1.5)) == (30, 1.5)
    # One level measured: a lifetime proportional to C (every request beyond it queued), an upper bound.
    assert level_needs([250], [_step(1, 0.2)], lambda c: 30, 0.0) == [pytest.approx(50.0 + 2 * 50.0)]


def test_forecast_follows_one_over_sqrt_time() -> None:
    assert time_for(0.03, 60.0, 0.06) == pytest.approx(240.0)
    assert halfwidth_for(240.0, 60.0, 0.06) == pytest.approx(0.03)
    assert math.isinf(time_for(0.03, 60.0, math.inf))
    line = describe_forecast(250, 120.0, 100, 60.0, 0.06, 0.03)
    assert line is not None and "C=250 needs about 4m00s" in line and "allows about +-4.2%" in line
    assert "8 levels" in describe_plan([1, 2, 5, 10, 30, 70, 100, 250], 1800.0, 600.0, 0.03)


def test_warmup_and_request_minimums() -> None:
    assert warmup_stable_s([]) is None
    assert warmup_stable_s([0.1, 0.2, 0.3]) == 2.0
    assert warmup_stable_s([3.0, 4.0, 5.0]) == 8.0
    assert step_min_requests(250, 0.03) == 30 and step_min_requests(250, 0.0) == 750


def test_a_first_step_sets_its_stable_time_once_half_its_users_have_a_first_request() -> None:
    def rec(user: str, start_s: float, ttft_s: float | None, status: str = "ok") -> dict[str, object]:
        return {"user": user, "start_s": start_s, "ttft_s": ttft_s, "status": status}

    firsts = [rec("a", 10.0, 1.5), rec("b", 10.0, 1.0), rec("a", 12.0, 9.0)]  # a's second request does not count
    assert own_stable_s(firsts, 10.0, 5) is None  # 2 of 5 users: too few to tell
    assert own_stable_s(firsts, 10.0, 4) == 3.0  # 2 of 4: max(2 s, 2 x the (upper) median first TTFT)
    slow = [rec("a", 10.0, 1.5), rec("b", 10.0, 2.5), rec("c", 10.0, None, "timeout"), rec("z", 9.0, 0.1)]
    assert own_stable_s(slow, 10.0, 6) == 5.0  # the timeout has no TTFT; z's request is the previous step's
    assert own_stable_s([rec("c", 10.0, None, "timeout")] * 2, 10.0, 2) is None  # no TTFT at all: no rule


@pytest.mark.parametrize("text", ["", "0", "0s", "0m", "0h0m", "0.0s"])
def test_zero_in_any_unit_means_no_budget(text: str) -> None:
    assert parse_budget(text) == 0.0


def test_a_share_is_passed_on_as_the_child_reads_it_back() -> None:
    for seconds in (0.5, 1.3, 90.0, 3599.9):
        assert parse_budget(duration_arg(seconds)) == pytest.approx(seconds, abs=0.05)
    assert duration_arg(0.5) == "0.5s"  # was "0s", which the child refused as "got '0s'"


def test_a_plan_that_cannot_fit_is_refused_and_its_near_miss_is_not() -> None:
    check_budget_fits(106.0, 50)  # 106 * 0.95 / 50 = 2.01 s a step: it fits
    with pytest.raises(SettingsError, match=r"50 levels gives each 1\.99 s.*at least 106 s"):
        check_budget_fits(105.0, 50)


def _specbench(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    return proc, time.monotonic() - began


@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_budget_too_small_for_the_ladder_is_refused_before_any_server_is_asked(tmp_path: Path,
                                                                                 command: str) -> None:
    """50 levels in 5 s ran 54 s with every window empty; now one line, exit 2, no server contacted (nothing
    listens on the port: a contacted server would have been a 'connection refused')."""
    url = f"http://127.0.0.1:{free_port()}"
    ladder = ",".join(str(c) for c in range(1, 51))
    targets = ["--host", url, "--label", "x"] if command == "run" else ["--baseline", url, "--spec", url]
    proc, _took = _specbench(command, *targets, "--ladder", ladder, "--time-budget", "5s",
                             "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "refused" not in proc.stderr
    assert "--time-budget" in proc.stderr and "50 levels gives each" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_processes_auto_follows_the_ladder_top_and_the_cores() -> None:
    from specbench.contract.limits import auto_processes

    assert auto_processes([1, 2, 100], [], cores=8) == (0, "--processes auto: 1 load process(es) (C=100 at up to "
                                                          "100 users per process needs 1)")
    assert auto_processes([1, 101], [], cores=8)[0] == 2  # one user past the near miss: a second process
    chosen, said = auto_processes([1, 250], [], cores=2)
    assert chosen == 2 and "needs 3, capped by this machine's 2 cores" in said
    assert auto_processes([], [350.0], cores=16)[0] == 4
    assert auto_processes([1, 250], [], cores=1)[0] == 0  # one core: one process


def test_processes_auto_is_decided_and_said_before_any_server_is_asked(tmp_path: Path) -> None:
    proc, _took = _specbench("run", "--host", f"http://127.0.0.1:{free_port()}", "--label", "x", "--processes", "auto",
                             "--ladder", "1,250", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "not reachable" in proc.stderr, proc.stderr  # got as far as the server check
    assert "--processes auto: " in proc.stdout and "C=250 at up to 100 users per process" in proc.stdout
    bad, _ = _specbench("run", "--host", "http://127.0.0.1:9", "--label", "x", "--processes", "many")
    assert bad.returncode == 2 and "expected a whole number or auto, got 'many'" in bad.stderr
