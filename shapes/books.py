"""A ladder step's bookkeeping: when it started, warmed up and ended, and its closing figures.

Pure functions over records; the figures themselves are defined once in ``contract.window``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.contract.policy import (
    MIN_ACHIEVED_FRACTION,
    MIN_PERCENTILE_REQUESTS,
    client_lagged,
    default_min_requests,
    lag_in_figures_ms,
    rate_held,
    read_lagged,
)
from specbench.contract.schema import NOT_FAILURES, REFUSED, SCHEMA_VERSION, RequestRecord, StepRecord
from specbench.contract.window import (
    achieved_concurrency,
    measured_in_window,
    merged_firsts,
    recv_lag_p90,
    send_lag_percentiles,
    window_throughput,
)
from specbench.shapes.loadcpu import client_bound

# Users left over from a higher step still in flight: the step ran above its target C.
ABOVE_TARGET_FRACTION = 1.05
WARMUP_STABLE_S = 2.0  # the in-flight count must stay at C at least this long (and 2x the last median TTFT)


def step_min_requests(target_c: int, step_ci: float) -> int:
    """With a precision target the throughput's interval decides; 30 complete requests keep percentiles."""
    return MIN_PERCENTILE_REQUESTS if step_ci > 0 else default_min_requests(target_c)


def warmup_stable_s(previous_ttfts: Sequence[float]) -> float | None:
    """How long in-flight must stay at C: max(2 s, 2x the previous step's median TTFT); None without one.

    The new users' first requests are then past their prefill (or queued behind a full server, which is its
    steady state too), so the window does not open on the ramp's prefill burst.
    """
    if not previous_ttfts:
        return None
    ordered = sorted(previous_ttfts)
    return max(WARMUP_STABLE_S, 2.0 * ordered[len(ordered) // 2])


@dataclass
class StepBook:
    """One step as the shape runs it."""

    index: int
    target_c: int
    min_requests: int
    start_s: float
    steady_start_s: float | None = None
    end_s: float | None = None
    ended_by: str | None = None
    closed: bool = False
    target_rate: float | None = None  # open loop: requests/s (target_c is then 0)
    dropped: int = 0  # open loop: requests due while every user of the pool was busy
    max_s: float | None = None  # this step's time limit (the budget's share), None: --max-step-time
    stable_s: float | None = None  # in-flight at C this long ends warm-up (None: only every user's first request)
    at_target_since: float | None = None  # since when the in-flight count has been at C
    halfwidth: float | None = None  # relative 95% half-width of the closed step's throughput
    users_lost: int = 0  # users that ran on workers lost during this step
    lost_requests: int = 0  # requests of this step in flight on a lost worker: never recorded
    load_cpu: dict[str, float] | None = None  # percent of one core per load process (shapes.loadcpu)
    paused_s: float = 0.0  # seconds the load process stood still during the step (shapes.pauses)
    read_lag_ms: dict[str, float] | None = None  # event-loop lateness p90 per load process (contract.laghist)


def own_stable_s(records: Sequence[RequestRecord], since_s: float, users_needed: int) -> float | None:
    """The first step's stable time, from its own first requests: None until half its users have finished one.

    A first step has no previous step's TTFT, so without this only every user's first request ends its warm-up:
    one user whose first request the server never answers (a full accept queue, a stuck connection, a load
    process too busy to read) would keep the window shut until the step's time limit. Half the users' first
    requests say how long a prefill takes here as well as a previous step's would.
    """
    first: dict[str, RequestRecord] = {}
    for rec in records:
        if rec["start_s"] >= since_s and (rec["user"] not in first or rec["start_s"] < first[rec["user"]]["start_s"]):
            first[rec["user"]] = rec
    if 2 * len(first) < users_needed:
        return None
    return warmup_stable_s([t for r in first.values() if r["status"] == "ok" and (t := r.get("ttft_s")) is not None])


def warmup_end(records: Sequence[RequestRecord], since_s: float, users_needed: int) -> float | None:
    """When every one of ``users_needed`` users had finished a request started at/after ``since_s``.

    Returns that moment (the finish of the last user's first such request), or None while any is missing.
    """
    first_finish: dict[str, float] = {}
    for rec in records:
        if rec["start_s"] < since_s:
            continue
        finish = rec["start_s"] + rec["e2e_s"]
        user = rec["user"]
        if user not in first_finish or finish < first_finish[user]:
            first_finish[user] = finish
    if len(first_finish) < users_needed:
        return None
    return sorted(first_finish.values())[users_needed - 1]


def count_measured(records: Sequence[RequestRecord], steady_start_s: float) -> int:
    """Requests so far that started inside the open window (all of them have finished); refusals are no
    measured work."""
    return sum(1 for r in records if r["start_s"] >= steady_start_s and r["status"] != REFUSED)


def refused_throughout(records: Sequence[RequestRecord]) -> bool:
    """Every request of a step so far was refused (at least one was): the server declines all work, and waiting
    out --max-step-time (10 minutes by default, per level) would measure nothing more."""
    return all(r["status"] in (REFUSED, "cancelled") for r in records) and any(r["status"] == REFUSED for r in records)


def sent_in_window(records: Sequence[RequestRecord], t0: float, t1: float) -> int:
    """Requests sent in [t0, t1), finished or not: the open loop's achieved arrivals."""
    return sum(1 for r in records if t0 <= r["start_s"] < t1)


def window_flags(book: StepBook, records: Sequence[RequestRecord], end: float, achieved: float,
                 flags: list[str], receive_clock: str = "user") -> int:
    """Flags ``client_lag``, ``client_read_lag`` and ``low_concurrency`` for a closed window; returns the requests
    measured in it."""
    assert book.steady_start_s is not None
    inside = [r for r in measured_in_window(records, book.steady_start_s, end) if r["status"] != REFUSED]
    if sent_late(inside):
        flags.append("client_lag")
    if read_late(inside, book.read_lag_ms, receive_clock):
        flags.append("client_read_lag")
    if achieved < MIN_ACHIEVED_FRACTION * book.target_c:
        flags.append("low_concurrency")
    return len(inside)


def sent_late(inside: Sequence[RequestRecord]) -> bool:
    """``client_lag``: the window's send-lag p90 above its limit (a share of the median TTFT, and a floor)."""
    ok = [r for r in inside if r["status"] not in NOT_FAILURES]
    return client_lagged(send_lag_percentiles(ok)[1], _ttft_median(ok))


def read_late(inside: Sequence[RequestRecord], read_lag_ms: dict[str, float] | None,
              receive_clock: str = "user") -> bool:
    """``client_read_lag``: the read lag in the window's TTFT and ITL (``contract.policy.lag_in_figures_ms``: a
    load process's event loop late for ready sockets, p90 over the step, or the requests' receive lag, p90) above
    its limit: 10 ms, or 5% of the window's median TTFT. On the kernel's clock: how late first tokens read only
    after the next chunk had come may be dated (``contract.window.merged_firsts``)."""
    loop_lag = max(read_lag_ms.values()) if read_lag_ms else None
    merged = merged_firsts(inside) if receive_clock == "kernel" else None
    lag = lag_in_figures_ms(loop_lag, recv_lag_p90(inside), receive_clock, merged.late_p90_ms if merged else None)
    return read_lagged(lag, _ttft_median(inside))


def _ttft_median(records: Sequence[RequestRecord]) -> float | None:
    ttfts = sorted(t for r in records if r["status"] == "ok" and (t := r.get("ttft_s")) is not None)
    return float(np.median(ttfts)) if ttfts else None


def open_loop_window(book: StepBook, records: Sequence[RequestRecord], end: float, dispersion: float,
                     flags: list[str]) -> tuple[float, int]:
    """A rate step's achieved rate and its window's requests (those sent in it); flags ``low_rate``."""
    assert book.steady_start_s is not None and book.target_rate
    window = end - book.steady_start_s
    sent = sent_in_window(records, book.steady_start_s, end)
    if not rate_held(sent, book.target_rate, window, dispersion):
        flags.append("low_rate")
    if book.dropped:
        flags.append("dropped_requests")
    refused = sum(1 for r in records if book.steady_start_s <= r["start_s"] < end and r["status"] == REFUSED)
    return sent / window, sent - refused  # refused arrivals were sent, but are no measured work


def close_step(book: StepBook, records: Sequence[RequestRecord], dispersion: float = 1.0,
               receive_clock: str = "user") -> StepRecord:
    """The steps.jsonl line for a finished step, with its flags."""
    flags: list[str] = []
    achieved_rate: float | None = None
    achieved: float | None = None
    throughput: float | None = None
    measured = 0
    end = book.end_s if book.end_s is not None else book.start_s
    if book.steady_start_s is None or end <= book.steady_start_s:
        flags.append("no_window")
    else:
        achieved = achieved_concurrency(records, book.steady_start_s, end)
        throughput = window_throughput(records, book.steady_start_s, end)
        measured = window_flags(book, records, end, achieved, flags, receive_clock)
        if book.target_rate:
            achieved_rate, measured = open_loop_window(book, records, end, dispersion, flags)
    if measured < book.min_requests:
        flags.append("too_few_requests")
    if book.ended_by == "stopped":
        flags.append("stopped")
    mine = [r for r in records if r.get("step") == book.index]
    own = [r for r in mine if r["status"] not in NOT_FAILURES]
    refused = sum(r["status"] == REFUSED for r in mine)
    failed = [r for r in own if r["status"] != "ok"]
    if own and sum(r["status"] == "connect_error" for r in own) * 2 >= len(own):
        flags.append("server_unreachable")
    if achieved is not None and not book.target_rate and achieved > ABOVE_TARGET_FRACTION * book.target_c:
        flags.append("concurrency_above_target")
    flags.extend(loss_flags(book))
    step = StepRecord(
        schema=SCHEMA_VERSION, index=book.index, target_c=book.target_c, start_s=book.start_s,
        steady_start_s=book.steady_start_s, end_s=end, min_requests=book.min_requests,
        requests_measured=measured, achieved_c=achieved, throughput_tok_s=throughput,
        ended_by=book.ended_by or "stopped", flags=flags, requests_total=len(own), requests_failed=len(failed),
        requests_refused=refused,
        target_rate=book.target_rate, achieved_rate=achieved_rate, dropped=book.dropped,
    )
    step["receive_clock"] = receive_clock  # whether a late read is in the chunk times (the analysis judges alike)
    lives = sorted(float(r["e2e_s"]) for r in mine if r["status"] == "ok" and r.get("e2e_s"))
    if lives:  # what the next steps' time budget is planned from (shapes.budget.level_needs)
        step["lifetime_p50_s"] = round(lives[len(lives) // 2], 4)
    if book.target_rate:
        step["arrival_dispersion"] = dispersion  # the analysis judges the send count as the ladder did
    step.update(load_side_fields(book))
    return step


def load_side_fields(book: StepBook) -> StepRecord:
    """What the load side adds to a step's line where it has something to say: lost workers, CPU, pauses and
    read lag of the load processes."""
    fields = StepRecord()
    if book.users_lost or book.lost_requests:
        fields["users_lost"] = book.users_lost
        fields["lost_requests"] = book.lost_requests
    if book.load_cpu is not None:
        fields["load_cpu"] = book.load_cpu
    if book.paused_s:
        fields["paused_s"] = round(book.paused_s, 2)
    if book.read_lag_ms:
        fields["read_lag_p90_ms"] = book.read_lag_ms
    return fields


def loss_flags(book: StepBook) -> list[str]:
    """``worker_lost`` when a worker died during the step; ``client_bound`` when a load process ran hot;
    ``client_paused`` when the load process stood still (shapes.pauses)."""
    flags = ["worker_lost"] if book.users_lost or book.lost_requests else []
    if book.load_cpu is not None and client_bound(book.load_cpu):
        flags.append("client_bound")
    if book.paused_s:
        flags.append("client_paused")
    return flags


def lost_text(step: StepRecord) -> str:
    """' (lost 2 users, 3 requests in flight)' after a step line where a worker died during the step."""
    if not (step.get("lost_requests") or step.get("users_lost")):
        return ""
    return f" (lost {step.get('users_lost', 0)} users, {step.get('lost_requests', 0)} requests in flight)"
