"""The ratio interval: coverage on simulated data, seeding, and the too-few-batches fallback."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.analysis.stats.bootstrap import MAX_BATCHES, MIN_BATCHES, batch_count, ratio_interval


def test_interval_covers_the_true_ratio_about_95_percent_of_the_time() -> None:
    sim = np.random.default_rng(12345)
    true_ratio = 0.6
    hits = 0
    for _ in range(200):
        base = sim.normal(100.0, 15.0, size=8)  # 8 batches: the small-sample widening matters
        spec = sim.normal(60.0, 10.0, size=10)
        low, high = ratio_interval(base, spec, rng=np.random.default_rng(0), n_boot=1000)
        hits += low <= true_ratio <= high
    assert 0.90 <= hits / 200 <= 0.99


def test_interval_holds_the_point_ratio_and_repeats_with_the_same_seed() -> None:
    sim = np.random.default_rng(1)
    base, spec = sim.normal(100, 10, 12), sim.normal(80, 10, 12)
    first = ratio_interval(base, spec, rng=np.random.default_rng(7))
    again = ratio_interval(base, spec, rng=np.random.default_rng(7))
    assert first == again
    low, high = first
    assert low < spec.mean() / base.mean() < high


def test_too_few_batches_give_no_interval() -> None:
    few = np.full(MIN_BATCHES - 1, 100.0)
    enough = np.full(MIN_BATCHES, 100.0)
    assert ratio_interval(few, enough, rng=np.random.default_rng(0)) is None
    assert ratio_interval(enough, enough, rng=np.random.default_rng(0)) == pytest.approx((1.0, 1.0))


def test_a_batch_lasts_at_least_one_median_request() -> None:
    assert batch_count(60.0, 10.0) == 6
    assert batch_count(60.0, 13.0) == 4  # below MIN_BATCHES: the window is too short for an interval
    assert batch_count(6000.0, 1.0) == MAX_BATCHES
