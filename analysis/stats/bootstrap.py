"""The 95% interval of a throughput ratio, by bootstrap over each window's time batches.

Each run's window is cut into equal time batches (``window.batch_throughputs``); batches are resampled
with replacement, independently per run, and the spec/baseline ratio of batch means is taken per
replicate. The mean of a window's batch throughputs is exactly its window throughput, so the interval sits
around the very ratio the table prints.

A batch must last at least one median request (a request's speed is correlated over its lifetime, so
shorter batches would be correlated and the interval too narrow); a window holding fewer than
``MIN_BATCHES`` such batches gets no interval. With so few batches the plain percentile bootstrap is too
narrow, so the percentile interval of the log ratio is widened about the estimate by
``sqrt(n/(n-1)) * t(0.975, Welch df) / 1.96``; simulated coverage is then close to 95% from 5 batches up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specbench.contract.schema import RequestRecord
from specbench.contract.student_t import NORMAL_975, t975
from specbench.contract.window import batch_throughputs

MIN_BATCHES = 5
MAX_BATCHES = 20
CONFIDENCE = 0.95


def batch_count(window_s: float, median_e2e_s: float | None) -> int:
    """How many batches the window holds when each lasts at least one median request (capped)."""
    if window_s <= 0:
        return 0
    if not median_e2e_s or median_e2e_s <= 0:
        return MAX_BATCHES
    return min(MAX_BATCHES, math.floor(window_s / median_e2e_s))


def window_batches(
    records: Sequence[RequestRecord], t0: float, t1: float, median_e2e_s: float | None
) -> np.ndarray:
    """Batch throughputs of a window (empty when it cannot hold ``MIN_BATCHES`` batches)."""
    n = batch_count(t1 - t0, median_e2e_s)
    return batch_throughputs(records, t0, t1, n) if n >= MIN_BATCHES else np.zeros(0)


def ratio_interval(
    base_batches: np.ndarray, spec_batches: np.ndarray, *, rng: np.random.Generator, n_boot: int = 2000
) -> tuple[float, float] | None:
    """95% interval of mean(spec)/mean(base); None when either side lacks batches or throughput."""
    nb, ns = len(base_batches), len(spec_batches)
    if nb < MIN_BATCHES or ns < MIN_BATCHES or n_boot < 1:
        return None
    mean_b, mean_s = float(base_batches.mean()), float(spec_batches.mean())
    if mean_b <= 0 or mean_s <= 0:
        return None
    estimate = math.log(mean_s / mean_b)
    var_b = float(base_batches.var(ddof=1)) / nb / mean_b**2
    var_s = float(spec_batches.var(ddof=1)) / ns / mean_s**2
    if var_b + var_s == 0:
        return math.exp(estimate), math.exp(estimate)
    boot_b = base_batches[rng.integers(0, nb, size=(n_boot, nb))].mean(axis=1)
    boot_s = spec_batches[rng.integers(0, ns, size=(n_boot, ns))].mean(axis=1)
    valid = (boot_b > 0) & (boot_s > 0)
    logs = np.log(boot_s[valid] / boot_b[valid])
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(logs, [tail, 100 - tail])
    df = (var_b + var_s) ** 2 / (var_b**2 / (nb - 1) + var_s**2 / (ns - 1))
    widen = math.sqrt(min(nb, ns) / (min(nb, ns) - 1)) * t975(df) / NORMAL_975
    return math.exp(estimate - (estimate - low) * widen), math.exp(estimate + (high - estimate) * widen)
