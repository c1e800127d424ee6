"""The event-loop lateness histogram: bins, differences between two samples, quantiles read inside a bin."""

from __future__ import annotations

import pytest

from specbench.contract import laghist


def test_a_step_histogram_is_the_difference_of_two_samples_and_its_p90_lies_in_the_right_bin() -> None:
    first = laghist.empty()
    last = laghist.empty()
    for lag in [1.0] * 80 + [30.0] * 20:  # 20% of timer ticks came back 30 ms late
        last[laghist.bin_of(lag)] += 1
    first[laghist.bin_of(1.0)] = 50  # counts before the step began
    last[laghist.bin_of(1.0)] += 50
    step = laghist.between(first, last)
    assert sum(step) == 100
    p90 = laghist.quantile_ms(step, 0.9)
    assert p90 is not None
    edge = laghist.EDGES_MS[laghist.bin_of(30.0)]
    assert laghist.EDGES_MS[laghist.bin_of(30.0) - 1] < p90 <= edge and edge < 30.0 * 1.25
    assert laghist.quantile_ms(step, 0.5) == pytest.approx(1.0, rel=0.25)


def test_too_few_samples_have_no_figure_and_the_top_bin_reads_as_a_floor() -> None:
    few = laghist.empty()
    few[3] = laghist.MIN_SAMPLES - 1
    assert laghist.quantile_ms(few, 0.9) is None
    top = laghist.empty()
    top[-1] = 20
    assert laghist.quantile_ms(top, 0.9) == laghist.EDGES_MS[-1]
