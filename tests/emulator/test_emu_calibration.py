"""Closed-loop tok/s measured over real HTTP matches the analytic curve (fast version of calibrate)."""

from __future__ import annotations

import pytest

from calibrate import format_table, run_profile
from suiteprompts import load_suite_prompts

pytestmark = pytest.mark.serial  # judges timing: runs after the parallel part, alone (pyproject.toml)

# Bounds on measured / model - 1, from 13 runs of this test on this 2-core machine on 2026-12-02 (8 quiet, 5 with a
# busy-loop neighbour on one core): against the realized curve -5.8% to +1.7%, against the analytic -5.8% to +1.8%.
# The emulator is never faster than its model by more than timing noise, but is slower by what the model leaves
# out: each request's HTTP turnaround (measured from the ledger at C=1: ~1.3 ms from a response's end to the next
# request's arrival, ~0.7 ms from arrival to the next step; ~2.7% of a 75 ms request) and a loaded machine's late
# steps. So the slow side has room for that, the fast side does not.
SLOW_VS_REALIZED, FAST_VS_REALIZED = -0.07, 0.03
SLOW_VS_ANALYTIC, FAST_VS_ANALYTIC = -0.09, 0.06  # plus acceptance sampling noise for the prompts sent


@pytest.mark.parametrize("profile", ["baseline", "eagle3"])
def test_measured_throughput_matches_the_analytic_curve(profile: str) -> None:
    prompts = load_suite_prompts()[0][:60]
    rows = run_profile(profile, speed=10.0, levels=[1, 5, 30], max_tokens=64, prompts=prompts, lifetimes=2.0,
                       min_window_s=0.8)
    print(format_table(rows, 10.0))
    for row in rows:
        # timing fidelity: against the step counts the server really drew
        assert SLOW_VS_REALIZED < row.error_vs_realized < FAST_VS_REALIZED, \
            (row.concurrency, row.measured_tps, row.realized_tps)
        # plus acceptance sampling noise: against the expectation for the prompts sent
        assert SLOW_VS_ANALYTIC < row.error_vs_analytic < FAST_VS_ANALYTIC, \
            (row.concurrency, row.measured_tps, row.analytic_tps)
