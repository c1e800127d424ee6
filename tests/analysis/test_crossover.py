"""Crossover interpolation on log C, its band, the verdict sentence and the switch policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.analysis.verdicts.crossover import RatioPoint, crossing_log_c, find_crossovers, judge, local_fit
from specbench.analysis.verdicts.recommend import LevelThroughput, recommend
from specbench.analysis.verdicts.refine import crossing_statement


def test_crossing_is_interpolated_on_log_concurrency() -> None:
    # Ratio 1.2 at C=1 and 0.8 at C=10: half-way in log C is sqrt(10), not 5.5.
    assert crossing_log_c(1, 1.2, 10, 0.8) == pytest.approx(math.sqrt(10))


FALLING = [RatioPoint(1, 1.3, 1.2, 1.4), RatioPoint(4, 1.1, 1.0, 1.2), RatioPoint(16, 0.9, 0.8, 1.0),
           RatioPoint(64, 0.7, 0.6, 0.8)]


def test_known_crossing_and_its_band_from_the_interval_bounds() -> None:
    (x,) = find_crossovers(FALLING)
    assert x.c == pytest.approx(8.0)  # 1.1 at 4 and 0.9 at 16: the midpoint in log C
    assert (x.below_c, x.above_c, x.spec_wins_below) == (4, 16, True)
    assert x.c_low == pytest.approx(4.0)  # the lower bound reaches 1.0 at C=4
    assert x.c_high == pytest.approx(16.0)  # the upper bound still reaches 1.0 at C=16


def test_band_end_is_open_when_a_bound_never_crosses_in_the_tested_range() -> None:
    (x,) = find_crossovers([RatioPoint(1, 1.05, 0.95, 1.15), RatioPoint(10, 0.9, 0.8, 0.98)])
    assert x.c_low is None  # the lower bound is below 1 at every level
    assert x.c_high == pytest.approx(crossing_log_c(1, 1.15, 10, 0.98))
    (x,) = find_crossovers([RatioPoint(1, 1.05, 0.95, 1.15), RatioPoint(10, 0.9, 0.8, 1.02)])
    assert x.c_high is None  # the upper bound stays above 1: the band runs past the highest level


def test_verdict_and_recommendation_for_a_crossing() -> None:
    verdict = judge(FALLING)
    assert verdict.kind == "crossover"
    assert verdict.text.startswith("speculation wins below C≈8 (95% band C≈4 to C≈16)")
    tput = [LevelThroughput(c, spec_tok_s=100 * r, baseline_tok_s=100.0) for c, r in
            ((1, 1.3), (4, 1.1), (16, 0.9), (64, 0.7))]
    rec = recommend(verdict, tput)
    assert rec.kind == "spec_below" and rec.threshold_c == pytest.approx(8.0)
    assert rec.text.startswith("enable speculation only below C = 8")
    assert [s.uses for s in rec.levels] == ["spec", "spec", "baseline", "baseline"]
    assert [s.switch_tok_s for s in rec.levels] == pytest.approx([130, 110, 100, 100])
    assert [s.vs_always_on for s in rec.levels] == pytest.approx([1, 1, 100 / 90, 100 / 70])
    assert [s.vs_always_off for s in rec.levels] == pytest.approx([1.3, 1.1, 1, 1])


def test_speculation_winning_everywhere_keeps_it_on() -> None:
    points = [RatioPoint(1, 1.5), RatioPoint(10, 1.2), RatioPoint(100, 1.1)]
    verdict = judge(points)
    assert verdict.kind == "spec_wins_all"
    assert verdict.text == "speculation wins at every tested level; ratio 1.50x at C=1 falling to 1.10x at C=100"
    rec = recommend(verdict, [LevelThroughput(p.target_c, p.ratio, 1.0) for p in points])
    assert rec.kind == "keep_on" and all(s.uses == "spec" for s in rec.levels)


def test_rising_ratio_names_its_extremes_truthfully() -> None:
    points = [RatioPoint(1, 0.5), RatioPoint(10, 0.3), RatioPoint(100, 0.9)]
    assert judge(points).text == ("baseline wins at every tested level; ratio 0.50x at C=1; 0.30x at C=10 "
                                  "rising to 0.90x at C=100")


def test_a_level_whose_interval_holds_one_is_called_unclear() -> None:
    verdict = judge([RatioPoint(1, 0.97, 0.9, 1.04), RatioPoint(10, 0.6, 0.55, 0.65)])
    assert verdict.unclear_levels == (1,)
    assert "no significant difference at C=1" in verdict.text


def test_more_than_one_crossing_is_called_mixed_with_no_single_threshold() -> None:
    points = [RatioPoint(1, 1.2), RatioPoint(10, 0.9), RatioPoint(100, 1.1)]
    verdict = judge(points)
    assert verdict.kind == "mixed" and len(verdict.crossovers) == 2
    rec = recommend(verdict, [LevelThroughput(p.target_c, p.ratio, 1.0) for p in points])
    assert rec.kind == "per_level" and rec.threshold_c is None
    assert [s.uses for s in rec.levels] == ["spec", "baseline", "spec"]


def test_no_common_level_gives_no_verdict() -> None:
    assert judge([]).kind == "no_levels"
    assert recommend(judge([]), []).kind == "none"


def _power_law(c: float, crossing: float = 14.0, slope: float = 0.25) -> float:
    return (crossing / c) ** slope


def test_dense_levels_are_fitted_and_the_fit_holds_a_power_law_crossing() -> None:
    """Five levels within 1.5x of a crossing at C=14 on a power law, each off by a few tenths of a percent and
    stated to +-3%: the fitted crossing is within 1% of the true one, its interval holds it and is narrower
    than the two-level interpolation's (the scatter about the line, not the wide stated intervals, sets it)."""
    wiggle = {10: 1.003, 12: 0.997, 13: 1.002, 15: 0.998, 17: 1.001}
    points = [RatioPoint(c, _power_law(c) * f, _power_law(c) * f * 0.97, _power_law(c) * f * 1.03)
              for c, f in wiggle.items()]
    fit = local_fit(points, 14.0)
    assert fit is not None and fit.levels == 5 and fit.falling
    assert fit.c == pytest.approx(14.0, rel=0.01) and fit.low < 14.0 < fit.high
    two_level = find_crossovers(points[2:4])[0]  # 13 and 15 alone
    assert (fit.high - fit.low) < (two_level.c_high or math.inf) - (two_level.c_low or 0.0)
    (x,) = find_crossovers(points)
    assert (x.c, x.c_low, x.c_high) == (fit.c, fit.low, fit.high) and (x.below_c, x.above_c) == (13, 15)
    assert x.fitted == 5 and crossing_statement(x, 2) == (f"C = {x.c:.3g} ({x.c_low:.3g}-{x.c_high:.3g}), from 2 "
                                                          "added levels (fitted over 5 levels)")


def test_three_levels_take_their_scale_from_the_stated_intervals() -> None:
    """With one degree of freedom the scatter says next to nothing: the stated intervals set the scale, and
    three levels exactly on the line get the interval those intervals allow, not a point."""
    points = [RatioPoint(c, _power_law(c), _power_law(c) * 0.97, _power_law(c) * 1.03) for c in (11, 14, 18)]
    fit = local_fit(points, 14.0)
    assert fit is not None and fit.levels == 3 and fit.c == pytest.approx(14.0)
    assert 0.03 < (fit.high - fit.c) / fit.c < 0.5 and 0.03 < (fit.c - fit.low) / fit.c < 0.5


def test_wiggles_of_noise_around_a_falling_line_are_one_crossing() -> None:
    """Ratios straddling 1 out of order (13: 0.995, 15: 1.005) around a significant fall: one crossing from the
    fit over the five levels within 1.5x of it, not a 'mixed' verdict of three."""
    points = [RatioPoint(10, 1.08, 1.05, 1.11), RatioPoint(12, 1.03, 1.0, 1.06), RatioPoint(13, 0.995, 0.965, 1.025),
              RatioPoint(15, 1.005, 0.975, 1.035), RatioPoint(17, 0.95, 0.92, 0.98), RatioPoint(30, 0.85, 0.82, 0.88)]
    verdict = judge(points)
    assert verdict.kind == "crossover"
    (x,) = verdict.crossovers
    assert 13 < x.c < 15 and x.c_low < x.c < x.c_high and (x.below_c, x.above_c, x.fitted) == (13, 15, 5)


def test_a_flat_or_sparse_neighbourhood_falls_back_to_the_bound_curves() -> None:
    flat = [RatioPoint(c, r, r - 0.05, r + 0.05) for c, r in ((10, 1.01), (12, 0.99), (14, 1.005), (16, 0.995))]
    assert local_fit(flat, 12.0) is None  # no significant slope: the line's interval has no ends
    assert local_fit(FALLING, 8.0) is None  # 4 and 16 only within 1.5x of C=8... neither is
    (x,) = find_crossovers(FALLING)
    assert (x.c_low, x.c_high) == (pytest.approx(4.0), pytest.approx(16.0))


def test_fitted_interval_covers_the_true_crossing_about_95_percent_of_the_time() -> None:
    """2,000 noisy draws of five levels on a power law, each ratio off by a normal error: whether the stated
    +-4% intervals are right or five times too wide, the fitted interval holds the true crossing in 93-97.5%
    of the draws that got one (the scatter about the line sets its width)."""
    for true_half in (0.04, 0.008):
        rng = np.random.default_rng(27)
        held = judged = 0
        for _ in range(2000):
            points = []
            for c in (10, 12, 14, 16, 19):
                r = _power_law(c) * math.exp(rng.normal(0.0, math.log(1 + true_half) / 1.96))
                points.append(RatioPoint(c, r, r / 1.04, r * 1.04))
            fit = local_fit(points, 14.0)
            if fit is not None:
                judged += 1
                held += fit.low <= 14.0 <= fit.high
        assert judged > 1500
        assert 0.93 <= held / judged <= 0.975, (true_half, held / judged)
