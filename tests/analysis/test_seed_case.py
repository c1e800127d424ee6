"""The seed case: baseline against EAGLE-3 at C = 1..250, rebuilt from its published table."""

from __future__ import annotations

import pytest
from synthetic_runs import SEED_BASELINE, SEED_EAGLE3, SEED_LEVELS, SEED_RATIOS

from specbench.analysis.table import fmt_ratio
from specbench.analysis.verdicts.compare import Comparison


def test_each_level_streams_exactly_the_seed_throughput(seed_comparison: Comparison) -> None:
    levels = seed_comparison.levels
    assert [lv.target_c for lv in levels] == list(SEED_LEVELS)
    assert [lv.baseline.throughput_tok_s for lv in levels] == pytest.approx(SEED_BASELINE, rel=1e-6)
    assert [lv.spec.throughput_tok_s for lv in levels] == pytest.approx(SEED_EAGLE3, rel=1e-6)
    assert [lv.baseline.achieved_c for lv in levels] == pytest.approx(SEED_LEVELS, rel=1e-6)


def test_compare_reproduces_the_seed_ratios(seed_comparison: Comparison) -> None:
    assert tuple(fmt_ratio(lv.ratio) for lv in seed_comparison.levels) == SEED_RATIOS


def test_every_interval_holds_its_ratio_and_excludes_break_even(seed_comparison: Comparison) -> None:
    for lv in seed_comparison.levels:
        assert lv.ratio_low is not None and lv.ratio_high is not None
        assert lv.ratio_low <= lv.ratio <= lv.ratio_high < 1.0
        assert lv.winner == "baseline"


def test_verdict_says_baseline_wins_everywhere_naming_the_extreme_levels(seed_comparison: Comparison) -> None:
    verdict = seed_comparison.verdict
    assert verdict.kind == "baseline_wins_all"
    assert verdict.crossovers == ()
    assert verdict.text == ("baseline wins at every tested level; ratio 0.84x at C=1 falling to 0.42x at C=30 "
                            "(0.44x at C=250, the highest level)")


def test_recommendation_keeps_speculation_off_and_prices_it(seed_comparison: Comparison) -> None:
    rec = seed_comparison.recommendation
    assert rec.kind == "keep_off"
    assert rec.text.startswith("keep speculation off")
    assert all(s.uses == "baseline" for s in rec.levels)
    assert rec.levels[-1].vs_always_on == pytest.approx(772.1 / 340.9, rel=1e-6)


def test_per_request_speed_matches_the_seed_at_one_user(seed_comparison: Comparison) -> None:
    first = seed_comparison.levels[0]
    assert first.baseline.per_request_tok_s == pytest.approx(92.6)
    assert first.per_request_ratio == pytest.approx(77.5 / 92.6)


def test_a_clean_pair_raises_no_warning(seed_comparison: Comparison) -> None:
    assert seed_comparison.warnings == ()
    assert all(lv.flags == () for lv in seed_comparison.levels)
