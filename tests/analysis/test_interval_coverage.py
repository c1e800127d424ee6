"""Coverage of the 95% intervals on real emulator runs with known long-run truth (benchmarks/coverage.py).

Eight long closed-loop runs (baseline and eagle3 at C = 2, 5, 10, 30) against real emulator processes, each
cut into 32 windows: 256 throughput windows and 128 ratio pairs, judged by both the new batch-means
estimator and the fallback batches of one median request. Takes about 35-50 s on 2 shared cores.
Coverage is judged as a binomial count at the windows that got an interval (see below).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from tests.neighbours import NeighbourCpu

# benchmarks/ is not a package and "coverage" is also the coverage.py tool's name: load the script by path.
_SPEC = importlib.util.spec_from_file_location(
    "specbench_interval_coverage", Path(__file__).resolve().parents[2] / "benchmarks" / "coverage.py")
assert _SPEC is not None and _SPEC.loader is not None
_COVERAGE = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = _COVERAGE  # dataclasses look their module up while the script is being executed
_SPEC.loader.exec_module(_COVERAGE)
collect, tally_runs = _COVERAGE.collect, _COVERAGE.tally_runs


# Coverage is judged as a binomial count, at the number of windows that got an interval: a 95% interval whose
# true coverage lies anywhere in [LOW, HIGH] passes with probability above 99.8%, and one at 80% (too narrow)
# or 100% at +-25% (too wide, checked by width below) fails. How many windows get an interval depends on how
# starved this shared machine leaves the client (CI saw 166 of 256 once, this machine 252 with a busy
# neighbour), so the count is a floor, not the figure under test.
LOW, HIGH, TAIL = 0.93, 0.97, 0.001
MIN_JUDGED = 120
# Other processes' CPU use moving by more than this (5-s means, in cores) while the runs go moves the emulator's
# pace within them: the windows then have no one long-run mean to cover, and the test says so instead of judging
# (a fresh-clone run beside a looping load benchmark failed here at 84% coverage; a constant neighbour is judged).
MAX_NEIGHBOUR_SWING = 0.3
# A steady but busy neighbour (over this, in cores) widened the intervals once: 254 of 254 windows covered, beside a
# 1M-record benchmark and other tests (why is not measured; a neighbour's CPU slices add batch-to-batch noise that
# need not follow the run's own). Too wide is the safe side for a user, so under such a neighbour only too narrow
# is judged; width is judged on a quieter machine.
BUSY_NEIGHBOUR = 0.5


def _tail_at_most(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def _plausible(covered: int, judged: int, *, upper: bool = True) -> bool:
    """Coverage that an estimator with true coverage in [LOW, HIGH] could give with probability above TAIL."""
    too_low = _tail_at_most(covered, judged, LOW) < TAIL
    too_high = upper and 1.0 - _tail_at_most(covered - 1, judged, HIGH) < TAIL
    return not (too_low or too_high)


@pytest.mark.slow
@pytest.mark.serial  # its truth is the long run's mean: a neighbour that comes and goes moves it; runs alone
def test_intervals_cover_the_long_run_truth_at_their_nominal_rate() -> None:
    with NeighbourCpu() as neighbours:
        runs = collect(seeds=(1,), verbose=False)
    tallies = tally_runs(runs)
    if neighbours.swing() > MAX_NEIGHBOUR_SWING:
        pytest.skip(f"not judged: {neighbours.text()}, so the runs had no one long-run mean; "
                    f"{tallies['tput_new'].line('tput_new')}")
    assert sum(len(r.edges) for r in runs) >= 200
    quiet = neighbours.mean() <= BUSY_NEIGHBOUR
    for key in ("tput_new", "tput_old"):
        tally = tallies[key]
        assert tally.judged >= MIN_JUDGED, tally.line(key)
        assert _plausible(tally.covered, tally.judged, upper=quiet), f"{tally.line(key)}; {neighbours.text()}"
    # The ratio intervals are conservative by design (97% over 204 pairs in benchmarks/coverage.py with two
    # seeds), so only too low a coverage fails them.
    for key in ("ratio_new", "ratio_old"):
        tally = tallies[key]
        assert tally.judged >= MIN_JUDGED // 2, tally.line(key)
        assert _plausible(tally.covered, tally.judged, upper=False), tally.line(key)
    # The new estimator must not buy its coverage with width (on a quiet machine: see BUSY_NEIGHBOUR).
    if quiet:
        assert sorted(tallies["tput_new"].widths)[len(tallies["tput_new"].widths) // 2] < 0.25


def test_the_binomial_judge_passes_nominal_coverage_and_fails_wrong_coverage() -> None:
    assert _plausible(243, 252) and _plausible(158, 166) and _plausible(190, 200)
    assert not _plausible(133, 166)  # 80%: intervals too narrow
    assert not _plausible(252, 252)  # every window covered at n = 252: intervals too wide
    assert _plausible(120, 120, upper=False) and not _plausible(100, 120, upper=False)
