"""A window's output-token rate as a time series: tokens of ok requests per short bin, divided by the bin.

The bins tile the window exactly, so the series' mean is exactly the window throughput
(``contract.window.window_throughput``); the batch-means estimator (``analysis.stats.batch_means``) reads its
correlation time and its batch means from this series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specbench.contract.columnar import ok_arrivals
from specbench.contract.schema import RequestRecord
from specbench.contract.window import token_arrivals

TARGET_BIN_S = 0.05  # bin width aimed at: a few decode steps of a fast server, short against any lifetime
MIN_BINS = 100
MAX_BINS = 4000


def bin_count(window_s: float) -> int:
    """How many equal bins cut a window: about ``TARGET_BIN_S`` each, within [MIN_BINS, MAX_BINS]."""
    if window_s <= 0:
        return 0
    return int(min(MAX_BINS, max(MIN_BINS, math.floor(window_s / TARGET_BIN_S))))


def token_rate_series(records: Sequence[RequestRecord], t0: float, t1: float, n_bins: int) -> np.ndarray:
    """Output tok/s of ok requests in each of ``n_bins`` equal bins of [t0, t1) (empty for a bad window)."""
    if t1 <= t0 or n_bins < 1:
        return np.zeros(0)
    sums = np.zeros(n_bins)
    width = (t1 - t0) / n_bins
    arrivals = ok_arrivals(records, (t0, t1))  # records read as columns: the same sums on the arrays
    if arrivals is not None:
        for times, new in arrivals:
            inside = (times >= t0) & (times < t1)
            idx = np.minimum(((times[inside] - t0) / width).astype(int), n_bins - 1)
            np.add.at(sums, idx, new[inside])  # whole tokens: exact in any order
        return sums / width
    for rec in records:
        if rec["status"] != "ok" or not rec["chunk_ms"]:
            continue
        if rec["start_s"] >= t1 or rec["start_s"] + rec["e2e_s"] < t0:
            continue
        times, new = token_arrivals(rec)
        inside = (times >= t0) & (times < t1)
        idx = np.minimum(((times[inside] - t0) / width).astype(int), n_bins - 1)
        np.add.at(sums, idx, new[inside])
    return sums / width
