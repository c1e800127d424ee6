"""Refused work: which answers are a server declining a request at once, and how long a user waits after one.

Why: a server with a bounded queue (vLLM's ``--max-num-queued-reqs``, SGLang's ``--max-queued-requests``) or a
gateway's rate limit answers an overloaded moment at once with HTTP 503 or 429, in about a millisecond. A
closed-loop user that sends its next request straight away turns each refusal into thousands a second: they
dominate the step's request count and error rate (which then measure how fast the client retries, not the work
refused), and the load process burns the CPU the other users' timing needs. So a refusal is its own status
(``refused``, counted apart from failures) and a closed-loop user waits before its next send: the server's
``Retry-After`` where it sent one, never less than a jittered back-off that doubles while refusals last.
"""

from __future__ import annotations

import math
import random
import time
from email.utils import parsedate_to_datetime
from typing import Any

from specbench.contract.policy import RETRY_AFTER_MAX_S  # a Retry-After honoured up to this

__all__ = ["RETRY_AFTER_MAX_S", "RefusalBackoff", "is_refusal", "retry_after_s"]

REFUSAL_STATUSES = (429, 503)  # Too Many Requests, Service Unavailable: "not now", said at once
REFUSAL_FIRST_S = 0.1  # the first back-off after a refusal (jittered down to half of it)
REFUSAL_MAX_S = 2.0  # the back-off doubles while refusals last, up to this
JITTER_LOW = 0.5  # a back-off is drawn from [JITTER_LOW, 1] of its nominal value, so users do not march together


def is_refusal(http_status: int | None) -> bool:
    """An HTTP answer that declines the request rather than failing it."""
    return http_status in REFUSAL_STATUSES


def refusals_only(errors: dict[str, Any]) -> bool:
    """Locust's failure table (``runner.errors``: ``StatsError`` entries) holds refusals and nothing else.

    Why: the table lists refusals (``refused: HTTP 503``) so a Locust user sees them, but its exit status
    (``--exit-code-on-error``) is for failed requests; a refusal is classified work the server declined, so a run
    whose only entries are refusals exits 0 (docs/reference/errors.md). Errors arrive from workers as strings
    (``CatchResponseError('refused: ...')``), in one process as the exception; ``to_name`` reads both."""
    if not errors:
        return False
    for entry in errors.values():
        said = entry.to_name()[len(f"{entry.method} {entry.name}: "):].strip("'\"")
        if not said.startswith("refused: "):
            return False
    return True


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date); None when absent or not a time a
    server can mean (negative, not finite, over a day): a server's text is evidence, not an instruction."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = max(0.0, when.timestamp() - (time.time() if now is None else now))
    if not math.isfinite(seconds) or seconds < 0 or seconds > 86400:
        return None
    return seconds


class RefusalBackoff:
    """One user's wait after refusals: doubling from ``REFUSAL_FIRST_S`` to ``REFUSAL_MAX_S``, jittered, at least
    the server's Retry-After (up to ``RETRY_AFTER_MAX_S``); back to the start after an answer that is no
    refusal."""

    __slots__ = ("_nominal", "_rng")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._nominal = 0.0
        self._rng = rng or random.Random()

    def reset(self) -> None:
        self._nominal = 0.0

    def next_wait(self, retry_after: float | None) -> float:
        """Seconds to wait after this refusal."""
        self._nominal = min(REFUSAL_MAX_S, max(REFUSAL_FIRST_S, self._nominal * 2))
        wait = self._nominal * self._rng.uniform(JITTER_LOW, 1.0)
        if retry_after is not None:
            wait = max(wait, min(retry_after, RETRY_AFTER_MAX_S))
        return round(wait, 4)
