"""The repeats' statistics (``analysis.stats.repeats``) against known truth: the combined interval's coverage,
the drift test's false alarms, and its thresholds met from both sides (near misses)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.analysis.stats.repeats import (
    BETWEEN,
    WITHIN,
    Measure,
    chi2_sf,
    combine_ratios,
    drift_check,
    from_interval,
    from_relative,
)
from specbench.contract.policy import DRIFT_MIN_CHANGE, DRIFT_P


@pytest.mark.parametrize(("x", "df"), [(3.841459, 1), (5.991465, 2), (7.814728, 3), (9.487729, 4), (11.0705, 5)])
def test_chi_square_tail_at_its_95_quantiles(x, df):
    assert chi2_sf(x, df) == pytest.approx(0.05, abs=2e-6)


def test_chi_square_tail_at_small_and_large_values():
    assert chi2_sf(0.0, 3) == 1.0
    assert chi2_sf(10.827566, 1) == pytest.approx(0.001, rel=1e-4)
    assert chi2_sf(200.0, 2) < 1e-40


@pytest.mark.parametrize(("repeats", "between_sd"), [(2, 0.03), (3, 0.03), (3, 0.0), (5, 0.08)])
def test_the_combined_interval_covers_the_true_ratio_95_percent_of_the_time(repeats, between_sd):
    """4,000 seeded repeat sets: each repeat's log ratio = truth + a repeat effect + its window's noise (whose
    size it knows, unequal between repeats). The t interval over the repeats covers the truth in 93-97% of them
    (the estimate's binomial spread is 0.34%), whether the repeats vary beyond their windows or not; unequal
    windows make it a little conservative (96.2% at three repeats with no variation between them)."""
    rng = np.random.default_rng(20261206 + repeats)
    truth, hits = 0.9, 0
    for _ in range(4000):
        within = rng.uniform(0.01, 0.04, size=repeats)
        logs = math.log(truth) + rng.normal(0, between_sd, size=repeats) + rng.normal(0, within)
        combined = combine_ratios([Measure(math.exp(x), se) for x, se in zip(logs, within, strict=True)])
        assert combined is not None and combined.n == repeats
        hits += combined.holds(truth)
    assert 0.93 <= hits / 4000 <= 0.97, hits / 4000


def test_which_part_of_the_variance_dominated():
    noisy_windows = combine_ratios([Measure(1.00, 0.05), Measure(1.01, 0.05), Measure(0.99, 0.05)])
    drifting = combine_ratios([Measure(0.90, 0.005), Measure(1.10, 0.005), Measure(0.92, 0.005)])
    assert noisy_windows is not None and noisy_windows.dominated_by == WITHIN
    assert drifting is not None and drifting.dominated_by == BETWEEN
    one = combine_ratios([Measure(0.8, 0.02)])
    assert one is not None and one.low is None and one.ratio == pytest.approx(0.8)


def test_intervals_become_log_standard_errors():
    m = from_interval(1.0, math.exp(-0.0392), math.exp(0.0392))
    assert m.log_se == pytest.approx(0.0392 / 1.959964, rel=1e-4)
    assert from_interval(1.0, None, 1.2).log_se is None
    assert from_relative(100.0, 0.05).log_se == pytest.approx(math.log(1.05 / 0.95) / (2 * 1.959964))
    assert from_relative(100.0, None).log_se is None


def test_no_drift_is_rarely_called_one():
    """Repeats that differ only by their windows' noise: flagged in at most 0.3% of 5,000 seeded sets (the
    p-value limit alone allows 0.1%, and the smallest change it must also pass makes it rarer)."""
    rng = np.random.default_rng(7)
    flagged = 0
    for _ in range(5000):
        se = rng.uniform(0.01, 0.03, size=3)
        values = np.exp(math.log(500.0) + rng.normal(0, se))
        check = drift_check([Measure(float(v), float(s)) for v, s in zip(values, se, strict=True)])
        assert check is not None
        flagged += check.flagged
    assert flagged <= 15, flagged


def _series(change: float, se: float, n: int = 3) -> list[Measure]:
    return [Measure(100.0 * (1 + change) ** (i / (n - 1)), se) for i in range(n)]


def test_drift_near_misses():
    # a precise change just under the smallest drift named, and just over it
    under = drift_check(_series(-(DRIFT_MIN_CHANGE * 0.97) / (1 + DRIFT_MIN_CHANGE), 0.002))
    over = drift_check(_series(-(DRIFT_MIN_CHANGE * 1.03) / (1 + DRIFT_MIN_CHANGE), 0.002))
    assert under is not None and not under.flagged and under.p_value < DRIFT_P
    assert over is not None and over.flagged and over.direction == "fell"
    # a large change in windows measured too loosely to tell
    loose = drift_check(_series(0.12, 0.05))
    assert loose is not None and not loose.flagged and loose.p_value > DRIFT_P
    # ten percent with ordinary precision: flagged, rising
    clear = drift_check(_series(0.10, 0.01))
    assert clear is not None and clear.flagged and clear.direction == "rose"
    assert clear.change == pytest.approx(0.10)


def test_two_measures_are_a_z_test_and_one_is_nothing():
    a, b = Measure(100.0, 0.01), Measure(90.0, 0.01)
    check = drift_check([a, b])
    z = math.log(100 / 90) / math.sqrt(2e-4)
    assert check is not None and check.p_value == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-9)
    assert drift_check([a]) is None
    assert drift_check([a, Measure(90.0, None)]) is None
