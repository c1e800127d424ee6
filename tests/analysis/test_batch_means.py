"""The batch-means estimator: autocorrelation time, batch sizing, fallback, and the ladder's precision call.

Records here are synthetic token streams built from a known AR(1) rate process, so the true correlation and
the right answer are known; the estimator's coverage on real emulator runs is tests/analysis/
test_interval_coverage.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.analysis.stats.batch_means import (
    BATCH_MEANS,
    LIFETIME,
    NO_INTERVAL,
    estimate_throughput,
    integrated_autocorr_time,
    ratio_interval_t,
    window_precision,
)
from specbench.analysis.stats.rate_series import token_rate_series
from specbench.contract.window import window_throughput


def _stream(rates: np.ndarray, bin_s: float, lifetime_s: float, t0: float = 1000.0) -> list[dict]:
    """Records whose chunks deliver ``rates[k] * bin_s`` tokens in bin k, cut into requests of lifetime_s."""
    records, per_request = [], max(1, round(lifetime_s / bin_s))
    for first in range(0, len(rates), per_request):
        chunk = rates[first:first + per_request] * bin_s
        start = t0 + first * bin_s
        offsets = (np.arange(len(chunk)) + 0.5) * bin_s
        records.append({"start_s": start, "e2e_s": len(chunk) * bin_s, "status": "ok", "user": "0:0",
                        "chunk_ms": list(offsets * 1000.0), "chunk_tokens": list(np.cumsum(chunk))})
    return records


def _ar1(n: int, phi: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.zeros(n)
    for k in range(1, n):
        x[k] = phi * x[k - 1] + rng.normal()
    return 1000.0 + 30.0 * x


def test_autocorrelation_time_matches_an_ar1_process() -> None:
    phi = 0.8  # tau = (1 + phi) / (1 - phi) = 9
    taus = [integrated_autocorr_time(_ar1(4000, phi, seed)) for seed in range(5)]
    assert 6.5 < float(np.mean(taus)) < 11.5
    assert integrated_autocorr_time(np.random.default_rng(0).normal(size=4000)) < 1.5


def test_rate_series_tiles_the_window_exactly() -> None:
    records = _stream(_ar1(2000, 0.5, 1), 0.05, 5.0)
    t0, t1 = 1000.0 + 3.3, 1000.0 + 77.7
    series = token_rate_series(records, t0, t1, 500)
    assert float(series.mean()) == pytest.approx(window_throughput(records, t0, t1), rel=1e-9)


def test_short_correlation_gives_batch_means_shorter_than_a_request() -> None:
    records = _stream(_ar1(2000, 0.5, 2), 0.05, 30.0)  # 100 s window, requests live 30 s
    est = estimate_throughput(records, 1000.0, 1100.0, 30.0)
    assert est.method == BATCH_MEANS and est.n >= 10 and est.batch_s < 30.0
    assert float(est.batches.mean()) == pytest.approx(window_throughput(records, 1000.0, 1100.0), rel=1e-9)
    low, high = est.interval()
    assert low < 1000.0 < high  # the process mean (seed fixed; coverage is tested below)


def test_long_correlation_falls_back_to_lifetime_batches_or_none() -> None:
    slow = _ar1(2000, 0.995, 3)  # tau ~ 400 bins = 20 s: batch means need batches longer than a 2 s request
    est = estimate_throughput(_stream(slow, 0.05, 2.0), 1000.0, 1100.0, 2.0)
    assert est.method == LIFETIME and est.n >= 5
    none = estimate_throughput(_stream(slow[:200], 0.05, 4.0), 1000.0, 1010.0, 4.0)
    assert none.method == NO_INTERVAL and math.isinf(none.relative_halfwidth())
    assert "needed" in none.reason


def test_ratio_interval_covers_the_true_ratio_about_95_percent() -> None:
    hits = 0
    for seed in range(120):
        base = estimate_throughput(_stream(_ar1(1200, 0.6, 2 * seed), 0.05, 100.0), 1000.0, 1060.0, None)
        spec_rates = (_ar1(1200, 0.6, 2 * seed + 1) - 1000.0) * 0.6 + 600.0
        spec = estimate_throughput(_stream(spec_rates, 0.05, 100.0), 1000.0, 1060.0, None)
        low, high = ratio_interval_t(base, spec)
        hits += low <= 0.6 <= high
    assert 0.90 <= hits / 120 <= 0.99


def test_window_precision_scales_the_exact_part_to_the_whole_window() -> None:
    records = _stream(_ar1(2400, 0.5, 5), 0.05, 1.0)
    exact = window_precision(records, 1000.0, 1060.0)
    scaled = window_precision(records, 1000.0, 1060.0, until=1120.0)
    assert math.isfinite(exact) and scaled == pytest.approx(exact / math.sqrt(2))
    assert math.isinf(window_precision(records, 1000.0, 1000.0))
