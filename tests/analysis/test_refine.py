"""Crossover refinement and saturation, pure: which level to add next, when an interval is tight, the crossover
statement, and saturation on the seed case and on curves whose saturation point is known by construction."""

from __future__ import annotations

from specbench.analysis.verdicts.compare import Comparison
from specbench.analysis.verdicts.crossover import Crossover, RatioPoint, find_crossovers
from specbench.analysis.verdicts.refine import (
    added_in_bracket,
    added_near,
    capacity_is_tight,
    crossing_statement,
    is_tight,
    next_level,
    next_rate,
    plan_rate_round,
    plan_round,
)
from specbench.analysis.verdicts.saturation import LoadPoint, find_saturation, skipped_levels
from specbench.analysis.verdicts.slo_compare import Capacity


def _x(c: float, low: float | None, high: float | None, below: int = 10, above: int = 30) -> Crossover:
    return Crossover(c, low, high, below, above, True)


def test_tight_means_both_ends_within_15_percent_from_a_close_bracket() -> None:
    assert is_tight(_x(20, 17.5, 22.9, 17, 30))
    assert not is_tight(_x(20, 17.5, 22.9, 10, 30))  # levels 3x apart: the straight line is an assumption
    assert not is_tight(_x(20, 16.0, 22.0, 17, 30))  # 20% below
    assert not is_tight(_x(20, 18.0, 23.5, 17, 30))  # 17.5% above
    assert not is_tight(_x(20, None, 21.0, 17, 30))  # an open end is never tight


def test_next_level_is_the_geometric_midpoint_then_bisects_on_log_c() -> None:
    assert next_level(_x(17, 12, 25, 10, 30), {10, 30}) == 17  # sqrt(300) = 17.3
    assert next_level(_x(12, 11, 14, 10, 17), {10, 17, 30}) == 13  # sqrt(170) = 13.04
    # No whole level inside 10..11: the untested level nearest the crossing within 1.5x of it, for the fit
    assert next_level(_x(10.5, 10.2, 10.8, 10, 11), {10, 11}) == 12  # log(12/10.5) < log(10.5/9)
    assert next_level(_x(6.6, 5.1, 7.8, 6, 7), {5, 6, 7, 10}) == 8
    assert next_level(_x(1.3, 1.1, 1.5, 1, 2), {1, 2}) is None  # 1..1.95: nothing untested
    assert next_level(_x(17, 12, 25, 10, 30), {10, 17, 30}) in (16, 18)  # the midpoint taken: its neighbour


def test_plan_round_stops_per_crossing_for_tightness_budget_or_room() -> None:
    loose, tight = _x(17, 12, 25, 10, 30), _x(80, 75, 85, 70, 100)
    plan = plan_round([loose, tight], {1, 10, 30, 70, 100})  # 70..100: within a factor 2
    assert plan.levels == (17,) and "within ±15%" in plan.done[0]
    spent = plan_round([loose], {10, 30}, {17: 3}, max_added=3)
    assert spent.levels == () and "3 levels added" in spent.done[0]


def test_a_linear_ratio_in_log_c_is_pinned_by_refinement() -> None:
    """A noiseless ratio bending in log C, (16/C)^0.7, with a +-4%
    interval: refining the 10..30 bracket converges on the true crossing (C = 16), its interval holds it and is
    within +-15% after at most three added levels."""

    def point(c: int) -> RatioPoint:
        r = (16.0 / c) ** 0.7
        return RatioPoint(c, r, r * 0.96, r * 1.04)

    tested = {1, 2, 5, 10, 30, 70}
    x = find_crossovers([point(c) for c in tested])[0]
    assert not is_tight(x) and (x.below_c, x.above_c) == (10, 30)
    for _ in range(3):
        plan = plan_round([x], tested)
        if not plan.levels:
            break
        tested |= set(plan.levels)
        x = find_crossovers([point(c) for c in tested])[0]
    assert is_tight(x) and abs(x.c / 16.0 - 1) < 0.02 and x.c_low <= 16.0 <= x.c_high
    added = added_near(x, sorted(tested), tested - {1, 2, 5, 10, 30, 70})
    assert 1 <= added <= 3
    assert crossing_statement(x, added).startswith(f"C = {x.c:.3g} ({x.c_low:.3g}-{x.c_high:.3g}), from {added}")


def test_statement_without_added_levels_names_the_bracket() -> None:
    assert crossing_statement(_x(17.3, 12.0, 25.0), 0) == "C = 17.3 (12-25), interpolated between C=10 and C=30"
    assert crossing_statement(_x(6.1, 5.5, 6.8, 5, 10), 1).endswith("from 1 added level")


def test_seed_case_saturates_at_the_seeds_peak(seed_comparison: Comparison) -> None:
    """The seed's baseline peaks at C=70 (784 tok/s) and stays there within 3% while TTFT grows."""
    base, spec = seed_comparison.saturation
    assert base.target_c == 70 and round(base.tok_s) == 784
    assert base.text == f"baseline saturates near C=70 at 784 tok/s (TTFT p50 x{base.ttft_growth:.1f} by C=250)"
    assert spec.target_c == 70 and base.ttft_growth > 1.5


def test_saturation_needs_waiting_to_grow_and_names_the_queue() -> None:
    rising = [LoadPoint(c, 100.0 * c, 99.0 * c, 101.0 * c, 0.01) for c in (1, 10, 100)]
    assert find_saturation("a", rising).target_c is None
    assert "still scales" in find_saturation("a", rising).text
    # Capped at 80 running: flat from C=80 within its interval, 20 then 170 requests queued above it.
    capped = [LoadPoint(30, 600, 590, 610, 0.02, 0.0), LoadPoint(80, 800, 790, 810, 0.02, 0.0),
              LoadPoint(100, 805, 795, 815, 0.2, 20.0), LoadPoint(250, 803, 793, 813, 0.6, 170.0)]
    found = find_saturation("baseline", capped)
    assert found.target_c == 80 and found.queue_from == 100
    assert found.text.startswith("baseline saturates near C=80 at 800 tok/s (server queue from C=100")
    flat_no_wait = [LoadPoint(c, 500.0, 490.0, 510.0, 0.02, 0.0) for c in (10, 20, 40)]
    assert find_saturation("b", flat_no_wait).target_c is None


def test_skip_rule_needs_every_server_saturated() -> None:
    ladder = [1, 2, 5, 10, 30, 70, 100, 150, 250]
    a = find_saturation("a", [LoadPoint(30, 600, 590, 610, 0.02, 0.0), LoadPoint(70, 800, 790, 810, 0.02, 0.0),
                              LoadPoint(100, 801, 790, 810, 0.2, 20.0)])
    b = find_saturation("b", [LoadPoint(10, 300, 290, 310, 0.02, 0.0), LoadPoint(30, 400, 395, 405, 0.02, 0.0),
                              LoadPoint(70, 401, 395, 405, 0.2, 20.0)])
    assert (a.target_c, b.target_c) == (70, 30)
    assert skipped_levels(ladder, [a, b], 1) == (150, 250)  # one level beyond C=70, the later saturation
    assert skipped_levels(ladder, [a, find_saturation("c", [LoadPoint(1, 1.0), LoadPoint(2, 2.0)])], 1) == ()


def _cap(value: float | None, held: float | None, missed: float | None, low: float | None = None,
         high: float | None = None, at_least: bool = False) -> Capacity:
    return Capacity(value, at_least, held, missed, low, high)


def test_rate_mode_adds_the_brackets_geometric_midpoint_until_the_capacity_is_pinned() -> None:
    wide = _cap(6.0, 4.0, 16.0, 4.5, 9.0)
    assert not capacity_is_tight(wide) and next_rate(wide, [4.0, 16.0]) == 8.0
    assert capacity_is_tight(_cap(6.0, 4.0, 8.0, 5.5, 6.6))
    assert next_rate(_cap(6.0, 4.0, 8.0, 5.0, 7.0), [4.0, 5.66, 8.0]) is None  # its midpoint is tested already
    assert next_rate(_cap(16.0, 16.0, None, at_least=True), [4.0, 16.0]) is None  # above every tested rate
    assert next_rate(_cap(None, None, 4.0), [4.0, 16.0]) is None  # misses at the lowest: nothing to bisect
    plan = plan_rate_round({"baseline": _cap(16.0, 16.0, None, at_least=True), "spec": wide}, [4.0, 16.0],
                           {"spec": 0})
    assert plan.levels == (8.0,) and plan.done == ("baseline: capacity not bracketed by the tested rates",)
    spent = plan_rate_round({"spec": wide}, [4.0, 16.0], {"spec": 3}, max_added=3)
    assert spent.levels == () and "3 rates added" in spent.done[0]


def test_an_added_rate_that_became_a_bracket_end_still_counts() -> None:
    # ladder 4, 16; 8 added; the capacity now lies between 8 and 16: one rate was added for it
    assert added_in_bracket(_cap(10.0, 8.0, 16.0, 9.0, 12.0), [4.0, 8.0, 16.0], [8.0]) == 1
    assert added_in_bracket(_cap(5.0, 4.0, 8.0, 4.5, 6.0), [4.0, 8.0, 16.0], [8.0]) == 1
    assert added_in_bracket(_cap(20.0, 16.0, 32.0, 18.0, 24.0), [4.0, 8.0, 16.0, 32.0], [8.0]) == 0
    # a capacity exactly at the held rate (attainment 90% there) is still inside its bracket
    assert added_in_bracket(_cap(4.0, 4.0, 8.0, 4.0, 4.6), [4.0, 8.0, 16.0], [8.0]) == 1
