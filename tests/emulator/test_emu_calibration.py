"""Closed-loop tok/s measured over real HTTP matches the analytic curve (fast version of calibrate)."""

from __future__ import annotations

import pytest

from calibrate import format_table, run_profile
from suiteprompts import load_suite_prompts


@pytest.mark.parametrize("profile", ["baseline", "eagle3"])
def test_measured_throughput_matches_the_analytic_curve(profile: str) -> None:
    prompts = load_suite_prompts()[0][:60]
    rows = run_profile(profile, speed=10.0, levels=[1, 5, 30], max_tokens=64, prompts=prompts, lifetimes=2.0,
                       min_window_s=0.8)
    print(format_table(rows, 10.0))
    for row in rows:
        # timing fidelity: against the step counts the server really drew
        assert abs(row.error_vs_realized) < 0.03, (row.concurrency, row.measured_tps, row.realized_tps)
        # plus acceptance sampling noise: against the expectation for the prompts sent
        assert abs(row.error_vs_analytic) < 0.06, (row.concurrency, row.measured_tps, row.analytic_tps)
