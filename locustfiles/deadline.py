"""One total deadline for every network wait outside the load itself (preflight, server info, /metrics, readiness).

A per-read timeout alone holds against a silent server, not against one that trickles a byte a second or
streams without end: each byte restarts the timer. ``fetch`` reads the body itself, block by block, and gives up
once the whole exchange has used its ``Deadline``, or once the body passes ``max_bytes`` (an answer far larger
than any info page is not one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import requests
from urllib3.exceptions import ProtocolError, ReadTimeoutError

READ_BLOCK = 65536
MAX_BODY_BYTES = 16 * 1024 * 1024  # a /metrics page of a large deployment is a few MB


class DeadlineExceeded(Exception):
    """The exchange did not finish within its total deadline (or its body was too large)."""


@dataclass
class Deadline:
    """A point in monotonic time by which a whole exchange (or a series of them) must be done."""

    total_s: float
    at: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.at = time.monotonic() + self.total_s

    def left(self) -> float:
        return self.at - time.monotonic()

    def check(self) -> None:
        if self.left() <= 0:
            raise DeadlineExceeded(f"did not finish within {self.total_s:g} s")

    def timeout(self, per_read_s: float) -> float:
        """The socket timeout for the next wait: the per-read bound, never past the deadline."""
        self.check()
        return max(0.001, min(per_read_s, self.left()))


@dataclass(frozen=True)
class Fetched:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def fetch(session: requests.Session, method: str, url: str, *, deadline: Deadline, per_read_s: float,
          max_bytes: int = MAX_BODY_BYTES, **kwargs: Any) -> Fetched:
    """One request whose connect, headers and whole body fit in ``deadline``.

    Every wait is bounded by the per-read timeout, itself never set past the deadline when the request starts, and
    the deadline is checked between blocks: the exchange ends within the deadline plus at most one silent read.
    Raises DeadlineExceeded (time or size), requests.RequestException (connection) or ReadTimeoutError (a
    silent wait longer than ``per_read_s``).
    """
    resp = session.request(method, url, timeout=deadline.timeout(per_read_s), stream=True, **kwargs)
    with resp:
        body = bytearray()
        try:
            while True:
                deadline.check()
                # whatever has arrived, decoded (a gzip answer is read as its text): a trickle comes back to the check
                block = resp.raw.read1(READ_BLOCK, decode_content=True)
                if not block:
                    break
                body += block
                if len(body) > max_bytes:
                    raise DeadlineExceeded(f"answer larger than {max_bytes} bytes")
        except (ReadTimeoutError, TimeoutError) as exc:
            deadline.check()
            raise ReadTimeoutError(None,  # type: ignore[arg-type]  # urllib3 wants a ConnectionPool; none here
                                   url, f"silent for {per_read_s:g} s") from exc
        except ProtocolError as exc:
            raise requests.ConnectionError(str(exc)) from exc
        return Fetched(resp.status_code, dict(resp.headers), bytes(body))
