"""SLO attainment and goodput of one measured window: which requests met every latency target.

Goodput follows DistServe: only requests that meet the SLO count as served. Per window: attainment = share
of the requests sent in it (failures included, as misses) that met every target; goodput in requests/s =
those requests / window length; goodput in tokens/s = output tokens of requests meeting the SLO that arrived
inside the window / window length (the window-throughput definition, restricted to those requests).

Requests are counted by when they were sent, not "started and finished inside": under overload the slowest
requests finish after the window, and leaving them out would flatter attainment exactly where it matters.
The ladder closes a step only once every request sent in it is recorded, so none is missing. Pure: records
in, figures out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.records.request_metrics import itl_samples_s, tpot_s, ttft_s
from specbench.contract.schema import RequestRecord
from specbench.contract.slo import Slo
from specbench.contract.window import window_tokens


def meets_slo(record: RequestRecord, slo: Slo) -> bool:
    """True when the request succeeded and every target the SLO sets holds (bounds inclusive).

    A figure a request cannot have (TPOT or ITL of a one-token answer) does not count against it.
    """
    if record["status"] != "ok":
        return False
    if slo.ttft_s is not None:
        first = ttft_s(record)
        if first is None or first > slo.ttft_s:
            return False
    if slo.e2e_s is not None and record["e2e_s"] > slo.e2e_s:
        return False
    if slo.tpot_s is not None:
        per_token = tpot_s(record)
        if per_token is not None and per_token > slo.tpot_s:
            return False
    if slo.itl_p99_s is not None:
        itls = itl_samples_s(record)
        if len(itls) and float(np.percentile(itls, 99)) > slo.itl_p99_s:
            return False
    return True


def sent_in(records: Sequence[RequestRecord], t0: float, t1: float) -> list[RequestRecord]:
    """Requests sent in [t0, t1), finished in the window or after it."""
    return [r for r in records if t0 <= r["start_s"] < t1]


@dataclass(frozen=True)
class SloFigures:
    """One window's SLO figures."""

    requests: int  # requests sent in the window, all statuses
    good: int  # of which met the SLO
    attainment: float | None  # good / requests
    goodput_req_s: float  # good / window length
    goodput_tok_s: float  # in-window output tokens of good requests / window length


def slo_figures(records: Sequence[RequestRecord], t0: float, t1: float, slo: Slo) -> SloFigures:
    """The SLO figures of window [t0, t1); ``records`` may hold any records, those outside are ignored."""
    inside = sent_in(records, t0, t1)
    good = [r for r in inside if meets_slo(r, slo)]
    good_nearby = [r for r in records if meets_slo(r, slo)]
    span = t1 - t0
    return SloFigures(
        requests=len(inside), good=len(good), attainment=len(good) / len(inside) if inside else None,
        goodput_req_s=len(good) / span, goodput_tok_s=window_tokens(good_nearby, t0, t1) / span,
    )
