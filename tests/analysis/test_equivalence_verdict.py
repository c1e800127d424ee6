"""The equivalence verdict's sentences, each where it must speak and where it almost must but stays silent.

The test behind them is a one-sided Fisher exact test of speculation's changed count against the baseline's
noise floor; the figures here are the hypergeometric tail, exact.
"""

from __future__ import annotations

import random

import pytest

from specbench.analysis.stats.proportion import fisher_greater, smallest_detectable
from specbench.analysis.verdicts.equivalence import Changes, verdict


def changes(compared: int, changed: int) -> Changes:
    return Changes(compared, changed, (5,) * changed)


def test_fisher_tail_is_the_hypergeometric_one() -> None:
    # 13 of 69 against 0 of 28: all 13 changed answers fall on the spec side with probability C(69,13)/C(97,13)
    assert fisher_greater(13, 69, 0, 28) == pytest.approx(0.0082924, rel=1e-4)
    assert fisher_greater(0, 10, 5, 10) == 1.0 and fisher_greater(3, 0, 1, 5) == 1.0
    assert fisher_greater(3, 100, 2, 100) == pytest.approx(0.5, abs=1e-9)
    assert smallest_detectable(69, 0, 28) == 9 and smallest_detectable(3, 0, 2) is None


def test_a_server_that_changed_19_percent_against_none_is_not_lossless() -> None:
    """The case a careful user met: 13 of 69 against the baseline's 0 of 28 was 'within the baseline's own 0.0%'."""
    kind, text = verdict(changes(69, 13), changes(28, 0), [1, 8])
    assert kind == "not_lossless", text
    assert "p = 0.0083" in text and "within" not in text


def test_near_misses_stay_silent() -> None:
    # 8 of 69 against 0 of 28: p = 0.058, not significant; a share of 13% would have shown, 13 points above the
    # floor: not enough answers to tell, never "not lossless", never "within noise"
    kind, text = verdict(changes(69, 8), changes(28, 0), [1, 8])
    assert kind == "too_few" and "13% or more would have shown" in text, text
    # with ten times the answers the same shares are told apart, and the near miss at 3 of 100 against 2 of 100 is
    # within noise (9% would have shown: 7 points above the floor)
    assert verdict(changes(690, 80), changes(280, 0), [1, 8])[0] == "not_lossless"
    kind, text = verdict(changes(100, 3), changes(100, 2), [1, 8])
    assert kind == "within_noise" and "9% or more would have shown" in text and "not lossless" not in text, text


def test_too_few_answers_to_show_anything() -> None:
    kind, text = verdict(changes(3, 1), changes(2, 0), [1, 2])
    assert kind == "too_few" and "no changed share would have shown" in text, text


def test_a_lossless_and_a_one_level_run() -> None:
    assert verdict(changes(240, 0), changes(200, 3), [1, 16])[0] == "lossless"
    kind, text = verdict(changes(40, 1), changes(0, 0), [4])
    assert kind == "not_lossless" and "one level only" in text, text


def test_answers_that_move_with_the_spec_servers_own_load_are_a_finding_of_their_own() -> None:
    kind, text = verdict(changes(69, 0), changes(28, 0), [1, 8], spec_noise=changes(69, 28))
    assert kind == "lossless" and "Its own answers also change with load: 28 of 69" in text, text
    # near miss: 3 of 69 against the baseline's 0 of 28 is p = 0.36: no second sentence
    assert "own answers" not in verdict(changes(69, 0), changes(28, 0), [1, 8], spec_noise=changes(69, 3))[1]


@pytest.mark.parametrize(("spec_share", "expected_kinds", "at_least"), [
    (0.20, {"not_lossless"}, 9),  # a mildly lossy server (20% of answers changed), baseline changing none
    (0.0, {"lossless"}, 10),  # a lossless pair is never flagged
])
def test_power_on_seeded_draws_of_a_two_level_run(spec_share: float, expected_kinds: set[str],
                                                  at_least: int) -> None:
    """Ten seeded runs of a two-level ladder's size (80 answers compared, a 40-answer floor): a 20% lossy server
    is called not lossless in at least 9 of 10, a lossless one in none."""
    hits = 0
    for seed in range(10):
        rng = random.Random(seed)
        changed = sum(rng.random() < spec_share for _ in range(80))
        kind, _text = verdict(changes(80, changed), changes(40, 0), [1, 8])
        hits += kind in expected_kinds
        assert kind != "not_lossless" or spec_share > 0
    assert hits >= at_least
