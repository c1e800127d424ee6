"""#76: the ratio over repeats balanced over the order, and drift as a trend in time, against known truth.

Synthetic repeat sets of two identical sides (true ratio 1), run in alternating order (A B, B A, A B, ...), one run
every 16 s, each window's noise known to it. With a drift, a side's speed falls linearly with time (25% a minute,
as the issue's emulators): whichever side a repeat measures second reads lower by about the drift over one run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.analysis.stats.repeats import Measure, combine_ratios, drift_trend
from specbench.contract.policy import DRIFT_MIN_CHANGE, DRIFT_P

RUN_S = 16.0


def _repeat_set(rng: np.random.Generator, n: int, per_min: float, speed_b: float = 1.0
                ) -> tuple[list[Measure], list[bool], dict[str, list[tuple[float, Measure]]]]:
    """One set: each repeat's ratio B / A, whether B ran second, and each side's (moment, throughput)."""
    ratios, second, sides = [], [], {"A": [], "B": []}
    t = 0.0
    for r in range(n):
        got = {}
        for side in ("AB" if r % 2 == 0 else "BA"):
            se = float(rng.uniform(0.005, 0.02))
            value = 1000.0 * (speed_b if side == "B" else 1.0) * (1 + per_min * t / 60) * math.exp(rng.normal(0, se))
            got[side] = Measure(value, se)
            sides[side].append((t, got[side]))
            t += RUN_S
        ratios.append(Measure(got["B"].value / got["A"].value, math.hypot(got["A"].log_se or 0, got["B"].log_se or 0)))
        second.append(r % 2 == 0)
    return ratios, second, sides


@pytest.mark.parametrize("n", [3, 5])
def test_an_odd_number_of_repeats_under_drift_is_biased_plainly_and_not_when_balanced(n):
    """The plain mean keeps at least a third (N=3) or a fifth (N=5) of one run's drift (more at five, where the
    speed has fallen and a run's drift grown by the last repeat); the mean of the two orders' means cancels most
    of it, and its interval holds the truth at least 95% of the time."""
    rng = np.random.default_rng(76 + n)
    plain_bias = balanced_bias = 0.0
    held = 0
    for _ in range(2000):
        ratios, second, _ = _repeat_set(rng, n, -0.25)
        plain, balanced = combine_ratios(ratios), combine_ratios(ratios, second)
        assert plain is not None and balanced is not None and balanced.balanced and not plain.balanced
        assert balanced.high / balanced.low < 1.15 * plain.high / plain.low  # no wider than the plain one, about
        plain_bias += math.log(plain.ratio) / 2000
        balanced_bias += math.log(balanced.ratio) / 2000
        held += balanced.holds(1.0)
    one_run = math.log(1 - 0.25 * RUN_S / 60)  # about -0.07: what the side measured second loses
    assert plain_bias < 0.8 * one_run / n, plain_bias
    assert abs(balanced_bias) < abs(plain_bias) / 5, (balanced_bias, plain_bias)
    assert held / 2000 >= 0.95, held  # the order's pull in the spread: conservative under drift


@pytest.mark.parametrize("n", [2, 4])
def test_an_even_number_is_already_balanced_and_keeps_the_paired_interval(n):
    rng = np.random.default_rng(7600 + n)
    ratios, second, _ = _repeat_set(rng, n, -0.25)
    plain, balanced = combine_ratios(ratios), combine_ratios(ratios, second)
    assert plain is not None and balanced is not None and not balanced.balanced
    assert balanced.ratio == pytest.approx(plain.ratio) and balanced.orders == (n // 2, n // 2)
    assert (balanced.low, balanced.high) == pytest.approx((plain.low, plain.high))
    # what being measured second did: about one run's drift (16 s at 25% a minute), said as a factor
    assert balanced.second_factor is not None and 0.85 < balanced.second_factor < 0.97


def test_the_balanced_interval_takes_the_spread_about_the_plain_mean():
    """Three repeats: the centre weighs the orders equally, the variance is the repeats' spread (which holds the
    order's pull) on n - 1 degrees of freedom, scaled to the balanced mean's weights (1/2 + 1) / 4."""
    logs = [-0.08, 0.06, -0.10]
    got = combine_ratios([Measure(math.exp(x), 0.01) for x in logs], [True, False, True])
    assert got is not None and got.balanced and got.orders == (2, 1)
    centre = ((-0.08 - 0.10) / 2 + 0.06) / 2
    var = float(np.var(logs, ddof=1))
    half = 4.302653 * math.sqrt(var * 0.375)
    assert math.log(got.ratio) == pytest.approx(centre)
    assert (math.log(got.low), math.log(got.high)) == pytest.approx((centre - half, centre + half), rel=1e-6)
    assert got.second_factor == pytest.approx(math.exp(((-0.08 - 0.10) / 2 - 0.06) / 2))


@pytest.mark.parametrize("n", [3, 4, 5])
def test_without_drift_the_balanced_interval_covers_95_percent(n):
    rng = np.random.default_rng(760 + n)
    held = sum(bool((c := combine_ratios(*_repeat_set(rng, n, 0.0)[:2])) and c.holds(1.0)) for _ in range(3000))
    assert 0.93 <= held / 3000 <= 0.97, held


def test_one_order_only_falls_back_to_the_plain_mean():
    ratios = [Measure(0.95, 0.01), Measure(0.97, 0.01), Measure(0.96, 0.01)]
    got = combine_ratios(ratios, [True, True, True])
    assert got is not None and not got.balanced and got.ratio == pytest.approx(combine_ratios(ratios).ratio)
    unknown = combine_ratios(ratios, [True, None, False])
    assert unknown is not None and not unknown.balanced


@pytest.mark.parametrize("n", [2, 3])
def test_a_25_percent_a_minute_drift_is_flagged(n):
    """Every set flags the drift: at two repeats (A B B A) the side measured first and last, whose windows are three
    runs apart; the side measured twice in a row, one run apart (about 6%), most of the time; at three, both."""
    rng = np.random.default_rng(9 + n)
    middle = 0
    for _ in range(200):
        _, _, sides = _repeat_set(rng, n, -0.25)
        trends = {side: drift_trend(series) for side, series in sides.items()}
        for side, trend in trends.items():
            assert trend is not None and trend.direction == "fell" and trend.method == "windows"
            assert -0.6 < trend.per_min < -0.1  # 25% a minute at the start, faster as the speed falls
            assert trend.flagged or (n == 2 and side == "B"), trend
        middle += bool(trends["B"] and trends["B"].flagged)
    assert middle >= 0.7 * 200, middle


def test_steady_sides_are_not_flagged():
    """The near miss: steady servers, even one 3% faster than the other, flagged in at most 0.3% of sides."""
    rng = np.random.default_rng(11)
    flagged = total = 0
    for n in (2, 3, 5):
        for _ in range(1000):
            _, _, sides = _repeat_set(rng, n, 0.0, speed_b=1.03)
            for series in sides.values():
                trend = drift_trend(series)
                assert trend is not None
                flagged, total = flagged + trend.flagged, total + 1
    assert flagged <= 0.003 * total, (flagged, total)


def test_drift_trend_near_misses_and_its_residual_test():
    minutes = [0.0, 0.5, 1.0]

    def series(change: float, se: float | None) -> list[tuple[float, Measure]]:
        return [(60 * m, Measure(100.0 * (1 + change) ** m, se)) for m in minutes]

    # precise: a fitted change just under the smallest drift named, and just over it
    under = drift_trend(series(-DRIFT_MIN_CHANGE * 0.97, 0.002))
    over = drift_trend(series(-DRIFT_MIN_CHANGE * 1.03, 0.002))
    assert under is not None and not under.flagged and under.p_value < DRIFT_P
    assert over is not None and over.flagged and over.change == pytest.approx(-DRIFT_MIN_CHANGE * 1.03)
    # a large change in windows too loose to tell
    loose = drift_trend(series(-0.12, 0.06))
    assert loose is not None and not loose.flagged and loose.p_value > DRIFT_P
    # windows without intervals: three measures are tested against their scatter about the line, two are not
    # (one degree of freedom: only a trend that lies close to its line is beyond that scatter)
    straight = [(0.0, Measure(100.0, None)), (30.0, Measure(86.95, None)), (60.0, Measure(75.6, None))]
    trend = drift_trend(straight)
    assert trend is not None and trend.method == "residual" and trend.flagged and trend.span_min == 1.0
    bent = drift_trend([*straight[:1], (30.0, Measure(89.0, None)), *straight[2:]])
    assert bent is not None and not bent.flagged and bent.p_value > DRIFT_P
    assert drift_trend(straight[:2]) is None
    assert drift_trend([(5.0, Measure(100.0, 0.01)), (5.0, Measure(90.0, 0.01))]) is None  # one moment
