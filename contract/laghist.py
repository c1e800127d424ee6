"""How late a load process's event loop ran, as a histogram every process keeps and a step can difference.

Why: a stream's chunk that reached the socket waits until the event loop comes round to the greenlet reading it;
that wait adds to TTFT and ITL as the client measures them, and no record can see it. A timer's lateness is the
same wait (the loop serves timers and ready sockets in turn), so each load process runs a short timer
(``locustfiles.looplag``) and counts how late it fires into fixed bins. The counts only grow: a step's own
histogram is its last sample less its first, from any process (workers send theirs with their CPU figure), and
its p90 is the read lag the step's figures may carry. Pure: no Locust, no gevent.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

#: Upper edges of the bins in ms: 0.5 ms growing by a quarter to about 4 s; one last bin above.
EDGES_MS: tuple[float, ...] = tuple(round(0.5 * 1.25 ** k, 3) for k in range(41))
MIN_SAMPLES = 10  # a step's histogram with fewer timer samples has no figure


def bin_of(lag_ms: float) -> int:
    """The bin a lateness falls in (the last one above every edge)."""
    return bisect.bisect_left(EDGES_MS, lag_ms)


def empty() -> list[int]:
    return [0] * (len(EDGES_MS) + 1)


def between(first: Sequence[int], last: Sequence[int]) -> list[int]:
    """The counts added between two samples of one process's histogram."""
    return [max(0, b - a) for a, b in zip(first, last, strict=True)]


def quantile_ms(counts: Sequence[int], q: float) -> float | None:
    """The ``q`` quantile in ms, linear inside its bin (None under ``MIN_SAMPLES``); the last bin reads as its
    lower edge, so a figure there is a floor."""
    total = sum(counts)
    if total < MIN_SAMPLES:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            low = EDGES_MS[i - 1] if i > 0 else 0.0
            if i == len(EDGES_MS):
                return low
            return low + (EDGES_MS[i] - low) * (rank - seen) / n
        seen += n
    return EDGES_MS[-1]


def stalled_s(counts: Sequence[int], at_least_ms: float) -> float:
    """Seconds the loop stood still in ticks late by ``at_least_ms`` or more, each read as its bin's lower edge
    (a floor; the last bin starts near 4 s): a paused process shows as one very late tick."""
    return sum(n * EDGES_MS[i - 1] for i, n in enumerate(counts) if n and i > 0 and EDGES_MS[i - 1] >= at_least_ms
               ) / 1000.0
