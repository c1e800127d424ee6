"""The energy crossover sentence: printed only where two levels' 95% intervals of the spec / baseline energy per
token ratio lie on opposite sides of 1; an interval that touches 1 decides nothing. Near misses on both sides."""

from __future__ import annotations

import math

import pytest

from specbench.analysis.verdicts.energy import EnergyLevel, energy_crossings

EPS = 1e-6


def _level(c: int, ratio: float, low: float | None, high: float | None) -> EnergyLevel:
    return EnergyLevel(c, ratio * 2.0, 2.0, ratio, low, high, "bootstrap_batches" if low is not None else None, 8)


def test_a_change_of_side_is_a_crossover_interpolated_in_log_c() -> None:
    found = energy_crossings([_level(10, 1.21, 1.1, 1.3), _level(1, 0.8, 0.7, 0.9), _level(5, 0.82, 0.75, 0.9)])
    assert len(found) == 1
    x = found[0]
    assert (x.below_c, x.above_c) == (5, 10)
    # log(ratio) linear in log(C): log(0.82) + t*(log(1.21)-log(0.82)) = 0
    t = -math.log(0.82) / (math.log(1.21) - math.log(0.82))
    assert x.near_c == pytest.approx(math.exp(math.log(5) + t * (math.log(10) - math.log(5))))
    assert x.sentence.startswith("Energy crossover: speculation uses less energy per token up to C=5 (0.82x) and "
                                 "more from C=10 (1.21x)")
    back = energy_crossings([_level(2, 1.3, 1.2, 1.4), _level(8, 0.7, 0.6, 0.8)])
    assert "uses more energy per token up to C=2 (1.30x) and less from C=8" in back[0].sentence


def test_silent_where_an_interval_only_just_reaches_1() -> None:
    """The upper level's interval reaching 1 (low 1 - EPS) decides nothing: silent; at 1 + EPS it speaks."""
    below = _level(5, 0.82, 0.75, 0.9)
    assert energy_crossings([below, _level(10, 1.2, 1 - EPS, 1.4)]) == []
    assert len(energy_crossings([below, _level(10, 1.2, 1 + EPS, 1.4)])) == 1
    above = _level(10, 1.2, 1.1, 1.4)
    assert energy_crossings([_level(5, 0.9, 0.8, 1 + EPS), above]) == []
    assert len(energy_crossings([_level(5, 0.9, 0.8, 1 - EPS), above])) == 1


def test_undecided_levels_between_are_passed_over_and_levels_without_an_interval_decide_nothing() -> None:
    levels = [_level(1, 0.8, 0.7, 0.9), _level(5, 1.0, 0.9, 1.1), _level(10, 1.3, 1.2, 1.4)]
    (x,) = energy_crossings(levels)
    assert (x.below_c, x.above_c) == (1, 10)
    assert energy_crossings([_level(1, 0.5, None, None), _level(10, 1.5, 1.2, 1.8)]) == []
    assert energy_crossings([_level(1, 0.8, 0.7, 0.9), _level(5, 0.85, 0.8, 0.95)]) == []  # one side only
