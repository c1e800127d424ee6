"""How ``specbench tune`` plans --time-budget (``specbench.tunebudget``, #76), on a simulated clock.

The validation's three runs used to come last and least (39 to 35 s for the tune runs, then 30, 28 and 24 s):
each run got an equal part of what was left when it started, and the time outside the ladders (server starts,
the tune's report) came out of the runs after it. The plan sets that time aside, so no validation run gets less
than a tune run, and the whole job still ends inside the budget.
"""

from __future__ import annotations

import pytest

from specbench.tunebudget import FIRST_GUESS, REPORT_RESERVE_S, TuneBudget

pytestmark = pytest.mark.quick

TUNE_RUNS = 6  # the baseline and K = 1..5
RUNS = TUNE_RUNS + 3


def _job(total_s: float, outside_s: float, report_s: float) -> tuple[list[float], float]:
    """Every run's ladder share, and when the job ended, for runs that spend ``outside_s`` beyond their ladder."""
    plan = TuneBudget(total_s, RUNS, reports=2, began=0.0)
    now = 0.0
    for i in range(RUNS):
        if i == TUNE_RUNS:
            now += report_s  # the tune's report and choice, between the tune runs and the validation
        start = now
        share = plan.share(RUNS - i, 2 if i < TUNE_RUNS else 1, now)
        plan.shares.append(share)
        now += share + outside_s
        plan.finished(start, now)
    return plan.shares, now + report_s


@pytest.mark.parametrize("outside_s", [0.0, 5.0, 0.9 * FIRST_GUESS * (600 - 2 * REPORT_RESERVE_S) / RUNS])
def test_no_validation_run_gets_less_than_a_tune_run_and_the_job_fits(outside_s: float) -> None:
    shares, ended = _job(600.0, outside_s, report_s=15.0)
    tune, validation = shares[:TUNE_RUNS], shares[TUNE_RUNS:]
    assert min(validation) >= max(tune) - 1e-9, shares
    assert ended <= 600.0, (ended, shares)
    # Equal once the outside time is learned; the first run, planned on the high guess, gets no more than they do.
    assert max(shares[1:]) - min(shares[1:]) < 0.05 * min(shares[1:]) and shares[0] <= min(shares[1:]), shares


def test_the_old_way_starved_the_validation() -> None:
    """The near miss: an equal part of what is left, nothing set aside, hands the last runs least."""
    left, now, shares = 600.0 - REPORT_RESERVE_S, 0.0, []
    for i in range(RUNS):
        now += 15.0 if i == TUNE_RUNS else 0.0
        shares.append((left - now) / (RUNS - i))
        now += shares[-1] + 8.0
    assert shares[-1] < 0.85 * shares[0], shares


def test_no_budget_gives_no_option() -> None:
    plan = TuneBudget(0.0, RUNS, reports=1)
    assert plan.options("k1", RUNS, 1)[0] == []
