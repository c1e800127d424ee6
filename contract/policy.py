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

def default_min_requests_at_rate(rate: float) -> int:
    """Open loop: at least 30 requests, and three seconds' worth at the step's rate."""
    return max(30, math.ceil(3 * rate))


def rate_held(sent: int, target_rate: float, window_s: float, arrivals: str) -> bool:
    """Whether a window's sends are consistent with the asked rate.

    Constant arrivals: at least 95% of the expected count (as closed loop asks of concurrency). Poisson: the
    count is itself random (standard deviation sqrt(expected)), so a shortfall beyond three of those, or 5%,
    whichever is larger, is what counts as not held.
    """
    expected = target_rate * window_s
    slack = (1 - MIN_ACHIEVED_FRACTION) * expected
    if arrivals == "poisson":
        slack = max(slack, 3 * math.sqrt(expected))
    return sent >= expected - slack
