"""The 95% interval of a ratio of two ratios of sums, by bootstrap over paired batches.

Energy per token over a window is (sum of each batch's energy) / (sum of each batch's tokens): a ratio of sums,
not a mean of batch ratios. Each run's batches are resampled with replacement as (energy, tokens) pairs,
independently per run, and the spec/baseline ratio of the two ratios of sums is taken per replicate; the
percentile interval of its log is widened about the estimate by ``sqrt(n/(n-1)) * t(0.975, n-1) / 1.96`` with n the
smaller batch count, as ``analysis.stats.bootstrap`` does for throughput (small samples give too narrow a plain
percentile interval).
"""

from __future__ import annotations

import math

import numpy as np

from specbench.contract.student_t import NORMAL_975, t975

MIN_PAIRS = 5
CONFIDENCE = 0.95


def ratio_of_sums_interval(base_num: np.ndarray, base_den: np.ndarray, spec_num: np.ndarray, spec_den: np.ndarray,
                           *, rng: np.random.Generator, n_boot: int = 2000) -> tuple[float, float] | None:
    """95% interval of (sum spec_num / sum spec_den) / (sum base_num / sum base_den); None with fewer than
    ``MIN_PAIRS`` batches a side or a zero sum."""
    nb, ns = len(base_num), len(spec_num)
    if nb < MIN_PAIRS or ns < MIN_PAIRS or n_boot < 1 or len(base_den) != nb or len(spec_den) != ns:
        return None
    if min(base_num.sum(), base_den.sum(), spec_num.sum(), spec_den.sum()) <= 0:
        return None
    estimate = math.log((spec_num.sum() / spec_den.sum()) / (base_num.sum() / base_den.sum()))
    ib = rng.integers(0, nb, size=(n_boot, nb))
    js = rng.integers(0, ns, size=(n_boot, ns))
    b_num, b_den = base_num[ib].sum(axis=1), base_den[ib].sum(axis=1)
    s_num, s_den = spec_num[js].sum(axis=1), spec_den[js].sum(axis=1)
    valid = (b_num > 0) & (b_den > 0) & (s_num > 0) & (s_den > 0)
    if not valid.any():
        return None
    logs = np.log((s_num[valid] / s_den[valid]) / (b_num[valid] / b_den[valid]))
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(logs, [tail, 100 - tail])
    n = min(nb, ns)
    widen = math.sqrt(n / (n - 1)) * t975(n - 1) / NORMAL_975
    return math.exp(estimate - (estimate - low) * widen), math.exp(estimate + (high - estimate) * widen)
