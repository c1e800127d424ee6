"""The tune's prediction of what the chosen depth delivers, from measurements that did not choose it (#76).

The depth with the most measured throughput is, more often than not, one whose noise was high: predicting its
throughput from the same measurements that chose it overstates it (the winner's curse: a tune at C=1 predicted
186 and 182 tok/s against a truth of 179). So the prediction is cross-fitted. Each candidate's window batches
(equal time batches, in time order) are split into two interleaved halves, the even batches and the odd ones,
so both halves span the whole window and share its drift. Half A chooses a depth by the tune's own rule and
half B's batches of that depth measure it; then B chooses and A measures. The prediction is the mean of those
out-of-choice batches together (with halves of one size, the average of the two estimates), and its 95% interval
is the t interval of that mean. Each estimate is independent of the choice it measures, so where candidates tie
the prediction carries no upward bias (``tests/test_tune_predict.py`` simulates it); where one depth clearly
wins, both halves choose it and the prediction is its whole window, as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from specbench.contract.student_t import t975

Batches = Mapping[int, tuple[float, ...]]  # depth -> window batch throughputs, in time order
Chooser = Callable[[Batches], int | None]  # the tune's rule applied to some batches: the depth it takes


@dataclass(frozen=True)
class Prediction:
    """The chosen depth's throughput predicted from measurements that did not choose (None: too few batches)."""

    tok_s: float | None
    low: float | None
    high: float | None
    batches: tuple[float, ...] = ()  # the out-of-choice batches; their mean is ``tok_s``
    chosen_by_half: tuple[int | None, int | None] = (None, None)  # the depth half A chose, and half B

    @property
    def method(self) -> str:
        return "cross-fitted"


NO_PREDICTION = Prediction(None, None, None)


def split_halves(batches: Sequence[float]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The even and the odd time batches of a window: two halves that each span the whole window."""
    return tuple(batches[0::2]), tuple(batches[1::2])


def cross_fitted(batches: Batches, choose: Chooser) -> Prediction:
    """Half A chooses and half B measures, then the other way round; the prediction pools both measurements.

    ``choose`` is the tune's rule over some batches per depth. Needs at least two batches per candidate (one per
    half); otherwise there is no measurement apart from the choice and the prediction is None."""
    if not batches or any(len(b) < 2 for b in batches.values()):
        return NO_PREDICTION
    first = {k: split_halves(b)[0] for k, b in batches.items()}
    second = {k: split_halves(b)[1] for k, b in batches.items()}
    by_first, by_second = choose(first), choose(second)
    if by_first is None or by_second is None:
        return NO_PREDICTION
    pooled = (*second[by_first], *first[by_second])
    low, high = mean_interval(pooled)
    return Prediction(sum(pooled) / len(pooled), low, high, pooled, (by_first, by_second))


def mean_interval(values: Sequence[float]) -> tuple[float | None, float | None]:
    """The 95% t interval of a mean of (roughly independent) batch throughputs; (None, None) from fewer than 2."""
    n = len(values)
    if n < 2:
        return None, None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


__all__ = ["NO_PREDICTION", "Prediction", "cross_fitted", "mean_interval", "split_halves"]
