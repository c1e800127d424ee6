"""A step's throughput interval from batches as short as the token rate's own correlation allows.

In a closed loop at steady state the output-token rate is stationary; how long it stays correlated is set
by how fast the running batch changes, which is usually far shorter than one request's life. So the window's
rate series (``analysis.stats.rate_series``, bins of about 50 ms) gives its integrated autocorrelation time tau
(Sokal's automatic window, c = 5), batches are ``BATCH_TAUS * tau`` long (at most ``MAX_BATCHES`` of them),
and the batch length is doubled while the batch means still look correlated (lag-1 autocorrelation above
``2/sqrt(n)``) or while a batch received no token at all (too few chunk arrivals for a normal
approximation). The interval is Student t on the batch means (their mean is exactly the window throughput).
When that leaves fewer than ``MIN_BATCHES`` batches, or batches no shorter than one median request, the
data do not support a shorter batch and the conservative method is used instead: batches of one median
request, at least five (``analysis.stats.bootstrap``). ``method`` says which one an estimate used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.stats.bootstrap import MIN_BATCHES as LIFETIME_MIN_BATCHES
from specbench.analysis.stats.bootstrap import batch_count, window_batches
from specbench.analysis.stats.rate_series import bin_count, token_rate_series
from specbench.contract.schema import RequestRecord
from specbench.contract.student_t import t975
from specbench.contract.window import batch_throughputs

BATCH_MEANS = "batch_means"  # batches from the rate's autocorrelation
LIFETIME = "lifetime_batches"  # fallback: batches of one median request
NO_INTERVAL = "none"

MIN_BATCHES = 10
MAX_BATCHES = 60
BATCH_TAUS = 4.0
SOKAL_C = 5.0


@dataclass(frozen=True)
class ThroughputEstimate:
    """The batches a window's throughput interval rests on, and how they were cut."""

    method: str  # BATCH_MEANS, LIFETIME or NO_INTERVAL
    batches: np.ndarray  # batch throughputs (tok/s); their mean is the window throughput
    batch_s: float | None  # length of one batch
    tau_s: float | None  # integrated autocorrelation time of the token rate, seconds
    reason: str  # why the method was chosen (printed with fallbacks)

    @property
    def n(self) -> int:
        return len(self.batches)

    def relative_halfwidth(self) -> float:
        """95% half-width relative to the throughput; inf without an interval (a waiting caller waits)."""
        if self.method == NO_INTERVAL or self.n < 2:
            return math.inf
        mean = float(self.batches.mean())
        if mean <= 0:
            return math.inf
        return t975(self.n - 1) * float(self.batches.std(ddof=1)) / math.sqrt(self.n) / mean

    def interval(self) -> tuple[float, float] | None:
        """95% interval of the window throughput (tok/s), None without one."""
        half = self.relative_halfwidth()
        if not math.isfinite(half):
            return None
        mean = float(self.batches.mean())
        return mean * (1 - half), mean * (1 + half)


def integrated_autocorr_time(series: np.ndarray) -> float:
    """tau = 1 + 2 * sum of autocorrelations up to Sokal's window (first M with M >= c * tau(M)), in bins.

    1 for an uncorrelated series; the variance of a long mean is tau times the uncorrelated one.
    """
    n = len(series)
    x = np.asarray(series, dtype=float) - float(np.mean(series)) if n else np.zeros(0)
    var = float(x @ x) / n if n else 0.0
    if n < 4 or var <= 0:
        return 1.0
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(x, size)
    acf = np.fft.irfft(spectrum * np.conj(spectrum), size)[:n] / (n * var)
    tau = 1.0
    for lag in range(1, n // 2):
        tau += 2.0 * acf[lag]
        if lag >= SOKAL_C * tau:
            break
    return max(1.0, tau)


def _batch(series: np.ndarray, size: int) -> np.ndarray:
    """Means of consecutive whole ``size``-bin batches (a short tail is left out: a look only)."""
    n = len(series) // size
    return series[: n * size].reshape(n, size).mean(axis=1) if n else np.zeros(0)


def batch_means_estimate(records: Sequence[RequestRecord], t0: float, t1: float,
                         median_e2e_s: float | None) -> ThroughputEstimate | None:
    """The autocorrelation-sized batch means of a window, or None when the data do not support them."""
    bins = bin_count(t1 - t0)
    if bins < 2 * MIN_BATCHES:
        return None
    series = token_rate_series(records, t0, t1, bins)
    if float(series.mean()) <= 0:
        return None
    bin_s = (t1 - t0) / bins
    tau = integrated_autocorr_time(series)
    size = max(1, math.ceil(BATCH_TAUS * tau), math.ceil(bins / MAX_BATCHES))
    batches = _batch(series, size)
    # Double the batch while the batch means still look correlated, or while a batch saw no token at all (the
    # rate is then a handful of chunk arrivals at this scale, too discrete for a normal approximation).
    while len(batches) >= MIN_BATCHES and (
            not batches.all() or (len(batches) >= 2 * MIN_BATCHES and _lag1(batches) > 2.0 / math.sqrt(len(batches)))):
        size *= 2
        batches = _batch(series, size)
    n = len(batches)
    batch_s = (t1 - t0) / n if n else math.inf
    if n < MIN_BATCHES or (median_e2e_s and batch_s >= median_e2e_s):
        return None
    # The final batches tile the window exactly (equal lengths), so their mean is the window throughput.
    return ThroughputEstimate(BATCH_MEANS, batch_throughputs(records, t0, t1, n), batch_s, tau * bin_s / 2.0,
                              f"{n} batches of {batch_s:.3g} s")


def _lag1(batches: np.ndarray) -> float:
    x = batches - batches.mean()
    denom = float(x @ x)
    return float(x[:-1] @ x[1:]) / denom if denom > 0 else 0.0


def estimate_throughput(records: Sequence[RequestRecord], t0: float, t1: float,
                        median_e2e_s: float | None) -> ThroughputEstimate:
    """Batch means when the window supports them, else batches of one median request, else no interval."""
    if t1 <= t0:
        return ThroughputEstimate(NO_INTERVAL, np.zeros(0), None, None, "no window")
    found = batch_means_estimate(records, t0, t1, median_e2e_s)
    if found is not None:
        return found
    batches = window_batches(records, t0, t1, median_e2e_s)
    if len(batches) >= LIFETIME_MIN_BATCHES:
        return ThroughputEstimate(LIFETIME, batches, (t1 - t0) / len(batches), None,
                                  "the rate's correlation does not allow shorter batches")
    held = batch_count(t1 - t0, median_e2e_s)
    median = f"{median_e2e_s:.3g} s" if median_e2e_s else "unknown"
    return ThroughputEstimate(NO_INTERVAL, np.zeros(0), None, None,
                              f"too few uncorrelated batches, and {held} batch(es) of one median request "
                              f"({median}), {LIFETIME_MIN_BATCHES} needed")


def ratio_interval_t(base: ThroughputEstimate, spec: ThroughputEstimate) -> tuple[float, float] | None:
    """95% interval of spec/base throughput from two independent batch-means estimates (log scale, Welch t)."""
    if base.n < 2 or spec.n < 2:
        return None
    mb, ms = float(base.batches.mean()), float(spec.batches.mean())
    if mb <= 0 or ms <= 0:
        return None
    vb = float(base.batches.var(ddof=1)) / base.n / mb**2
    vs = float(spec.batches.var(ddof=1)) / spec.n / ms**2
    estimate = math.log(ms / mb)
    if vb + vs == 0:
        return math.exp(estimate), math.exp(estimate)
    df = (vb + vs) ** 2 / (vb**2 / (base.n - 1) + vs**2 / (spec.n - 1))
    half = t975(df) * math.sqrt(vb + vs)
    return math.exp(estimate - half), math.exp(estimate + half)


def window_precision(records: Sequence[RequestRecord], t0: float, t1: float, *,
                     until: float | None = None) -> float:
    """Relative 95% half-width the window [t0, until) will have, judged on its exact part [t0, t1).

    The live ladder sees a request only once it has finished, so only the part of the window before the
    oldest request still in flight (``t1``) is exact. The half-width found there is scaled to the whole
    window so far by sqrt(exact / whole) (the half-width of a stationary mean shrinks as 1/sqrt(time)).
    inf while the exact part supports no interval.
    """
    if t1 <= t0:
        return math.inf
    lifetimes = sorted(r["e2e_s"] for r in records if r["status"] == "ok" and r["start_s"] >= t0)
    median = lifetimes[len(lifetimes) // 2] if lifetimes else None
    half = estimate_throughput(records, t0, t1, median).relative_halfwidth()
    whole = (until if until is not None else t1) - t0
    return half * math.sqrt((t1 - t0) / whole) if whole > 0 else half
