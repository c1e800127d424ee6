"""Figures defined on a time window: the one definition of step throughput and achieved concurrency.

The ladder shape (live, at each step's end) and the analysis reports (afterwards) both call these, so the
figure printed while a run goes and the figure in the report cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from specbench.contract.columnar import ok_arrivals, span_mask
from specbench.contract.schema import RequestRecord
from specbench.contract.student_t import t975


def token_arrivals(record: RequestRecord) -> tuple[np.ndarray, np.ndarray]:
    """(absolute arrival times in s, tokens that arrived at each) for one record's output chunks."""
    times = record["start_s"] + np.asarray(record["chunk_ms"], dtype=float) / 1000.0
    cum = np.asarray(record["chunk_tokens"], dtype=float)
    new = np.diff(cum, prepend=0.0)
    return times, new


def window_tokens(records: Iterable[RequestRecord], t0: float, t1: float) -> float:
    """Output tokens of successful requests that arrived in [t0, t1).

    Requests that straddle a window edge count exactly their in-window tokens. Failed requests count none:
    a partial answer is not output the user could use.
    """
    arrivals = ok_arrivals(records, (t0, t1))  # records read as columns: the same sums on the arrays
    if arrivals is not None:  # whole tokens: exact in any order
        return sum((float(new[(times >= t0) & (times < t1)].sum()) for times, new in arrivals), 0.0)
    total = 0.0
    for rec in records:
        if rec["status"] != "ok" or not rec["chunk_ms"]:
            continue
        start = rec["start_s"]
        if start >= t1 or start + rec["e2e_s"] < t0:
            continue
        times, new = token_arrivals(rec)
        mask = (times >= t0) & (times < t1)
        total += float(new[mask].sum())
    return total


def window_throughput(records: Iterable[RequestRecord], t0: float, t1: float) -> float:
    """Output tokens per second over the window [t0, t1)."""
    if t1 <= t0:
        return 0.0
    return window_tokens(records, t0, t1) / (t1 - t0)


def achieved_concurrency(records: Iterable[RequestRecord], t0: float, t1: float) -> float:
    """Time-averaged number of requests in flight during [t0, t1) (Little's law over the window).

    Every request counts, failed or not: it occupied a user for that time.
    """
    if t1 <= t0:
        return 0.0
    spans = span_mask(records)
    if spans is not None and len(spans[0]):  # the same terms, added one after another (cumsum) as below
        terms = np.maximum(0.0, np.minimum(spans[1], t1) - np.maximum(spans[0], t0))
        return (float(np.cumsum(terms)[-1]) + 0.0) / (t1 - t0)  # + 0.0: no -0.0 where the loop gives 0.0
    busy = 0.0
    for rec in records:
        start = rec["start_s"]
        end = start + rec["e2e_s"]
        busy += max(0.0, min(end, t1) - max(start, t0))
    return busy / (t1 - t0)


def measured_in_window(records: Iterable[RequestRecord], t0: float, t1: float) -> list[RequestRecord]:
    """Requests that started and finished inside [t0, t1]: the ones per-request statistics use."""
    spans = span_mask(records)
    if spans is not None:
        chosen = (spans[0] >= t0) & (spans[1] <= t1)
        return [records[i] for i in np.flatnonzero(chosen).tolist()]  # type: ignore[index]  # span_mask: a list
    return [r for r in records if r["start_s"] >= t0 and r["start_s"] + r["e2e_s"] <= t1]


def send_lag_percentiles(records: Iterable[RequestRecord]) -> tuple[float | None, float | None]:
    """Median and p90 of ``send_lag_ms`` over the records that carry one (None, None without any)."""
    lags = [lag for r in records if (lag := r.get("send_lag_ms")) is not None]
    if not lags:
        return None, None
    p50, p90 = np.percentile(lags, [50, 90])
    return float(p50), float(p90)


def recv_lag_p90(records: Iterable[RequestRecord]) -> float | None:
    """p90 of ``recv_lag_ms`` over the ok records that carry one (None without any): the client's receive lag."""
    lags = [lag for r in records if r["status"] == "ok" and (lag := r.get("recv_lag_ms")) is not None]
    return float(np.percentile(lags, 90)) if lags else None


@dataclass(frozen=True)
class MergedFirsts:
    """First tokens dated with later chunks. On the kernel's receive clock equal times are one receive stamp:
    bytes that wait unread in a socket are merged by the kernel and dated by the last segment's arrival, so a
    first token read only after the next chunk had come is dated when that one came."""

    share: float  # of the ok records with two or more chunks, those whose first chunk has the second's time
    late_p90_ms: float  # p90 over them of how late that may date the first token (ms): see ``merged_firsts``


def merged_firsts(records: Iterable[RequestRecord]) -> MergedFirsts | None:
    """``MergedFirsts`` over the ok records with two or more output chunks (None without any). How late a merged
    first token may be is estimated as one chunk interval (the median over these streams of their mean interval)
    per later chunk that carries its time: the arrivals the kernel folded into one stamp."""
    streams = [list(ms) for r in records if r["status"] == "ok" and len(ms := r["chunk_ms"]) >= 2]
    if not streams:
        return None
    interval = float(np.median([(ms[-1] - ms[0]) / (len(ms) - 1) for ms in streams]))
    folded = [sum(1 for t in ms[1:] if t == ms[0]) for ms in streams]
    return MergedFirsts(share=sum(1 for n in folded if n) / len(folded),
                        late_p90_ms=float(np.percentile([n * interval for n in folded], 90)))


def write_p90(records: Iterable[RequestRecord]) -> float | None:
    """p90 of ``write_ms`` over the records that carry one (None without any): how long sends took to hand over."""
    times = [ms for r in records if (ms := r.get("write_ms")) is not None]
    return float(np.percentile(times, 90)) if times else None


def batch_throughputs(records: Sequence[RequestRecord], t0: float, t1: float, n_batches: int) -> np.ndarray:
    """Throughput in each of n_batches equal time slices of [t0, t1) (batch means over time)."""
    if t1 <= t0 or n_batches < 1:
        return np.zeros(0)
    edges = np.linspace(t0, t1, n_batches + 1)
    sums = np.zeros(n_batches)
    arrivals = ok_arrivals(records, None)
    if arrivals is not None:
        for times, new in arrivals:
            idx = np.searchsorted(edges, times, side="right") - 1
            ok = (idx >= 0) & (idx < n_batches)
            np.add.at(sums, idx[ok], new[ok])  # whole tokens: exact in any order
        return sums / np.diff(edges)
    for rec in records:
        if rec["status"] != "ok" or not rec["chunk_ms"]:
            continue
        times, new = token_arrivals(rec)
        idx = np.searchsorted(edges, times, side="right") - 1
        ok = (idx >= 0) & (idx < n_batches)
        np.add.at(sums, idx[ok], new[ok])
    return sums / np.diff(edges)


def throughput_relative_halfwidth(
    records: Sequence[RequestRecord], t0: float, t1: float, n_batches: int = 10
) -> float:
    """95% confidence half-width of the window throughput, relative to it (batch means, Student t).

    Returns inf when there are too few batches or no throughput, so a caller waiting for precision waits.
    """
    batches = batch_throughputs(records, t0, t1, n_batches)
    if len(batches) < 2:
        return math.inf
    mean = float(batches.mean())
    if mean <= 0:
        return math.inf
    sd = float(batches.std(ddof=1))
    return t975(len(batches) - 1) * sd / math.sqrt(len(batches)) / mean
