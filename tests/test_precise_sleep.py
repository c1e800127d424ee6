"""The pacer's sleep (``locustfiles.precisesleep``): never before its due time, back on the event loop while it
waits, and usable again after a sleeper was killed mid-wait. How late it wakes is measured by
``benchmarks/bench_rate_ceiling.py`` (a figure, not a timed assertion)."""

from __future__ import annotations

import sys
import time

import gevent
import pytest

from specbench.locustfiles.precisesleep import PreciseSleeper


def test_wakes_never_before_its_due_time_and_lets_others_run() -> None:
    sleeper = PreciseSleeper()
    assert sleeper.precise == sys.platform.startswith("linux")
    ticks: list[float] = []

    def other() -> None:
        for _ in range(5):
            ticks.append(time.monotonic())
            gevent.sleep(0.001)

    early = []
    for delay in (0.0, 0.002, 0.0137, 0.05):
        ticks.clear()
        runner = gevent.spawn(other)
        due = time.monotonic() + delay
        sleeper.sleep_until(due)
        woke = time.monotonic()
        early.append(woke - due)
        during = sum(t < woke for t in ticks)
        runner.join(1)
    assert all(e >= 0 for e in early), early
    assert all(e < 1.0 for e in early), early  # bounded: back long before the safety limit
    assert during >= 3, ticks  # the other greenlet ran while it slept 50 ms (it yields, it does not spin)
    sleeper.close()


def test_a_sleeper_killed_mid_wait_leaves_the_timer_usable() -> None:
    sleeper = PreciseSleeper()
    waiting = gevent.spawn(sleeper.sleep_until, time.monotonic() + 10.0)
    gevent.sleep(0.01)
    waiting.kill(block=True, timeout=1)
    assert waiting.dead
    began = time.monotonic()
    sleeper.sleep_until(began + 0.02)
    took = time.monotonic() - began
    assert 0.02 <= took < 1.0, took  # the old arming (10 s) neither fired early nor held it back
    sleeper.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel timer is Linux's")
def test_a_closed_sleeper_falls_back_to_geventsleep() -> None:
    sleeper = PreciseSleeper()
    sleeper.close()
    assert not sleeper.precise
    due = time.monotonic() + 0.01
    sleeper.sleep_until(due)
    assert time.monotonic() >= due


def test_making_a_sleeper_never_yields_to_the_event_loop() -> None:
    """The pacer makes its lock and sleeper with no lock held: a sleeper whose making yielded (a library search
    runs a subprocess) once let 48 users each make and hold a lock of their own."""
    ran: list[int] = []
    gevent.spawn(ran.append, 1)
    sleepers = [PreciseSleeper() for _ in range(20)]
    assert ran == []  # the other greenlet never got a turn
    gevent.sleep(0)
    assert ran == [1]
    for sleeper in sleepers:
        sleeper.close()
