"""The step policy both sides apply: what a step must measure and when its concurrency counts as held.

The live ladder decides with these while a run goes; the analysis judges the recorded run with the same
numbers, so a step the ladder accepted is never flagged for a rule it did not know.
"""

from __future__ import annotations

import math

#: The concurrency ladder when none is given (the seed's levels).
DEFAULT_LADDER: tuple[int, ...] = (1, 2, 5, 10, 30, 70, 100, 250)

#: Achieved concurrency below this share of the target: the level was not held (flag ``low_concurrency``).
MIN_ACHIEVED_FRACTION = 0.95


#: Complete requests a latency percentile rests on before it is more than indicative (``~`` in tables); also
#: what a step measures at least when ``--step-ci`` decides its length.
MIN_PERCENTILE_REQUESTS = 30


def default_min_requests(target_c: int) -> int:
    """Requests a step must measure unless told otherwise: enough for a p99 and for every user to recycle."""
    return max(30, 3 * target_c)

#: A load process busier than this share of one core during a step: the client, not the server, may have
#: limited the step (late reads inflate TTFT and ITL, fewer requests lower throughput); flag ``client_bound``.
CLIENT_BOUND_CPU = 0.90

#: Send lag (``send_lag_ms``: from a user being ready to its request on the wire) whose p90 in a step's window
#: exceeds this share of the step's median TTFT, and this floor, means the client sent late: the offered load
#: was below C and a burst of ends (continuous batching ends many streams in one step) delayed the next sends.
#: Flag ``client_lag``; unlike ``client_bound`` (CPU over a whole step) it sees bursts.
CLIENT_LAG_TTFT_SHARE = 0.10
CLIENT_LAG_FLOOR_MS = 20.0


def client_lag_limit_ms(ttft_p50_s: float | None) -> float:
    """The send-lag p90 above which a step is flagged ``client_lag``."""
    share = CLIENT_LAG_TTFT_SHARE * ttft_p50_s * 1000.0 if ttft_p50_s is not None else 0.0
    return max(CLIENT_LAG_FLOOR_MS, share)


def client_lagged(send_lag_p90_ms: float | None, ttft_p50_s: float | None) -> bool:
    return send_lag_p90_ms is not None and send_lag_p90_ms > client_lag_limit_ms(ttft_p50_s)


#: Read lag (how late a load process's event loop served a ready socket, ``contract.laghist``) whose p90 over a
#: step exceeds this share of the step's median TTFT, and this floor, may have moved TTFT or ITL by that much:
#: flag ``client_read_lag``. Lower than the send-lag bound: a late read is an error in the figures themselves.
READ_LAG_TTFT_SHARE = 0.05
READ_LAG_FLOOR_MS = 10.0


#: A server's Retry-After is honoured up to this many seconds: one longer (a server down for an hour says 3600)
#: would stall its user past its step, so the run ends in its steps' time and the step names the refusals.
RETRY_AFTER_MAX_S = 30.0


def read_lag_limit_ms(ttft_p50_s: float | None) -> float:
    """The read-lag p90 above which a step is flagged ``client_read_lag``: 10 ms or 5% of its TTFT median."""
    share = READ_LAG_TTFT_SHARE * ttft_p50_s * 1000.0 if ttft_p50_s is not None else 0.0
    return max(READ_LAG_FLOOR_MS, share)


def read_lagged(read_lag_p90_ms: float | None, ttft_p50_s: float | None) -> bool:
    return read_lag_p90_ms is not None and read_lag_p90_ms > read_lag_limit_ms(ttft_p50_s)


def lag_in_figures_ms(loop_lag_p90_ms: float | None, recv_lag_p90_ms: float | None,
                      receive_clock: str | None, merged_late_p90_ms: float | None = None) -> float | None:
    """The client's read lag that is in a step's TTFT and ITL (p90, ms), judged by ``read_lagged``. On the kernel's
    receive clock (``receive_clock`` "kernel") a late read is not in them unless it came after the next chunk
    too (the kernel dates bytes merged in a socket by the last arrival): then ``merged_late_p90_ms``, how late
    that may date first tokens (``contract.window.merged_firsts``). Else the larger of the event loop's lateness
    (``contract.laghist``) and the measured receive lag (bytes read after the kernel stamped them)."""
    if receive_clock == "kernel":
        return merged_late_p90_ms
    measured = [lag for lag in (loop_lag_p90_ms, recv_lag_p90_ms) if lag is not None]
    return max(measured) if measured else None


#: Drift: one side's repeats at a level (or a ladder's first level measured again at its end) differ by more than
#: their windows' intervals allow (Cochran's Q, ``analysis.stats.repeats``) at this p-value, and by at least this
#: share between the lowest and the highest: flag ``drift``. Both, so that neither a tiny real change measured
#: very precisely nor noise in loosely measured windows is called a drift.
DRIFT_P = 0.001
DRIFT_MIN_CHANGE = 0.05


def default_min_requests_at_rate(rate: float) -> int:
    """Open loop: at least 30 requests, and three seconds' worth at the step's rate."""
    return max(30, math.ceil(3 * rate))


def arrival_dispersion(arrivals: str, burstiness: float = 1.0) -> float:
    """The variance of a window's send count over its mean, for an arrival process (a renewal process's count
    has variance about mean x CV^2 of its gaps): constant 0, Poisson 1, gamma with shape B 1/B."""
    if arrivals == "constant":
        return 0.0
    if arrivals == "gamma":
        return 1.0 / burstiness
    return 1.0


def rate_held(sent: int, target_rate: float, window_s: float, dispersion: float) -> bool:
    """Whether a window's sends are consistent with the asked rate.

    ``dispersion``: ``arrival_dispersion`` of the arrivals. Constant arrivals (0): at least 95% of the expected
    count (as closed loop asks of concurrency). Random arrivals: the count is itself random (standard deviation
    sqrt(dispersion x expected)), so a shortfall beyond three of those, or 5%, whichever is larger, is what
    counts as not held.
    """
    expected = target_rate * window_s
    slack = max((1 - MIN_ACHIEVED_FRACTION) * expected, 3 * math.sqrt(dispersion * expected))
    return sent >= expected - slack

# A --time-budget: the share kept back for the last step's requests to finish, and the least time a step's share
# may be (its warm-up and a window); a plan whose levels would get less is refused before any request is sent.
DRAIN_RESERVE = 0.05
MIN_STEP_SHARE_S = 2.0

# A worker whose master has not answered a heartbeat this long quits with exit code 3 (Locust's own check: 60 s);
# one whose master closed the connection (exited, killed) quits when it is not opened again this soon.
MASTER_LOST_S = 15.0
MASTER_GONE_S = 2.0

# A load process whose event loop stood still this long at once (its 20 ms timer that late) flags its step
# client_paused, as a pause of the master's own tick does (shapes.pauses): a paused worker is seen this way.
STALL_MS = 1000.0
