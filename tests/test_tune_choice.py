"""Choosing a depth per level and turning the choices into a schedule (``analysis.verdicts.tune``).

The rule: the smallest depth whose 95% interval of throughput over the best reaches 1 and whose low end is at
least 1 - TUNE_MARGIN; the near misses on each side of both bounds are tested here. The end-to-end choice against
the emulator's known truth is tests/test_tune.py and benchmarks/bench_tune.py.
"""

from __future__ import annotations

import pytest

from specbench.analysis.verdicts.tune import (
    ENERGY_TIE,
    TUNE_MARGIN,
    DepthAtLevel,
    Interval,
    build_schedule,
    choose_by_energy,
    choose_depth,
    schedule_depth,
)
from specbench.contract.kschedule import parse_k_schedule


def _cand(depth: int, low: float | None, high: float | None, ratio: float = 1.0,
          joules: float | None = None) -> DepthAtLevel:
    vs_best = Interval(ratio, low, high)
    return DepthAtLevel(depth, f"k{depth}", 100.0 * ratio, vs_best, Interval(None, None, None), None, None, 0, joules)


BEST = _cand(4, 1.0, 1.0)


@pytest.mark.parametrize(("low", "high", "chosen", "how"), [
    (1.0 - TUNE_MARGIN, 1.0, 1, "within_noise"),  # both bounds just met: the shallower depth
    (1.0 - TUNE_MARGIN - 0.001, 1.05, 4, "best"),  # low end just short of the margin: not shown within 2%
    (0.985, 0.999, 4, "best"),  # interval just below 1: worse than the best beyond noise
    (0.99, 1.2, 1, "within_noise"),
])
def test_the_smallest_depth_shown_within_the_margin_is_chosen(low: float, high: float, chosen: int,
                                                               how: str) -> None:
    assert choose_depth([_cand(0, 0.5, 0.6), _cand(1, low, high), BEST], 4) == (chosen, how)


def test_speculation_off_is_a_candidate_like_any_depth() -> None:
    assert choose_depth([_cand(0, 0.99, 1.01), _cand(1, 0.99, 1.01), BEST], 4) == (0, "within_noise")


def test_without_intervals_the_point_best_is_kept_and_says_so() -> None:
    assert choose_depth([_cand(0, None, None, 0.9), _cand(1, None, None, 0.99), BEST], 4) == (4, "point")


@pytest.mark.parametrize(("low", "chosen"), [(0.95, 1), (0.949, 2)])
def test_energy_takes_the_least_joules_among_depths_shown_to_keep_the_floor(low: float, chosen: int) -> None:
    # K=1 spends the least per token; it qualifies only with its interval's low end at the floor.
    cands = [_cand(0, 0.5, 0.6, joules=1.0), _cand(1, low, 1.01, joules=2.0), _cand(2, 0.96, 1.0, joules=2.5),
             _cand(4, 1.0, 1.0, joules=3.0)]
    assert choose_by_energy(cands, 4, 0.95) == (chosen, "energy")


def test_energies_within_the_tie_margin_go_to_the_shallower_depth() -> None:
    least = 2.0
    for joules, chosen in ((least * (1 + ENERGY_TIE) * 0.999, 1), (least * (1 + ENERGY_TIE) * 1.001, 3)):
        cands = [_cand(1, 0.97, 1.0, joules=joules), _cand(3, 0.99, 1.01, joules=least), _cand(4, 1.0, 1.0, joules=4)]
        assert choose_by_energy(cands, 4, 0.95) == (chosen, "energy")


def test_without_energy_figures_the_throughput_choice_stands_and_says_so() -> None:
    cands = [_cand(1, 0.99, 1.01), _cand(4, 1.0, 1.0)]
    assert choose_by_energy(cands, 4, 0.95) == (1, "no_energy")


def test_the_schedule_splits_halfway_between_levels_and_merges_equal_depths() -> None:
    # Batch sizes the server reported at C = 1, 5, 10, 30, 70 and 100, with the depth chosen at each.
    points = [(1.0, 5), (4.7, 4), (9.6, 3), (28.8, 2), (66.2, 1), (92.0, 1)]
    schedule = build_schedule(points, 256)
    assert schedule == ((1, 3, 5), (4, 7, 4), (8, 19, 3), (20, 47, 2), (48, 256, 1))
    assert parse_k_schedule(list(schedule)) == schedule  # contiguous from 1, vLLM takes it
    for key, depth in points:
        assert schedule_depth(schedule, key) == depth
    assert schedule_depth(schedule, 500) is None


def test_levels_the_server_ran_at_one_batch_size_are_one_point_the_higher_kept() -> None:
    assert build_schedule([(3.9, 3), (4.2, 1), (10.0, 1)], 64) == ((1, 64, 1),)
    assert build_schedule([], 64) == ()
    assert build_schedule([(0.4, 2)], 8) == ((1, 8, 2),)


def test_no_range_runs_past_max_batch() -> None:
    """#70: levels above the cap (by concurrency: the server at its cap) end at it; the near miss, a cap above
    every level, keeps each level its own range."""
    assert build_schedule([(1.0, 3), (2.0, 2), (4.0, 1)], 1) == ((1, 1, 1),)
    assert build_schedule([(1.0, 3), (2.0, 2), (4.0, 1)], 2) == ((1, 1, 3), (2, 2, 1))
    assert build_schedule([(1.0, 3), (2.0, 2), (4.0, 1)], 4) == ((1, 1, 3), (2, 3, 2), (4, 4, 1))
