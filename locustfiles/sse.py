"""Server-sent events split from raw socket reads, each stamped with the time its bytes arrived.

Timing lives here, next to the read: an event's time is the moment the read that completed it returned, so
TTFT never waits on a buffer filling (the trap in Locust's FastHttp ``iter_lines``, which waits for 1,024
bytes). Comment lines (``:`` pings) and ``event:``/``id:`` fields are skipped; ``data:`` lines of one event
are joined with newlines as the SSE specification says. Some llama.cpp builds send a failure as an ``error:``
field (``error: {"code":500,"message":...}``) instead of a ``data:`` line; it is handed on as the payload
``{"error": ...}``, the shape every other server uses, so it is read as the stream error it is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

DONE = b"[DONE]"


def error_field_payload(value: bytes) -> bytes:
    """The payload of an ``error:`` field, as ``{"error": <the value>}`` (a non-JSON value becomes a string)."""
    value = value[1:] if value.startswith(b" ") else value
    try:
        json.loads(value)
        inner = value
    except ValueError:
        inner = json.dumps(value.decode("utf-8", "replace")).encode()
    return b'{"error": ' + inner + b"}"


class SSESplitter:
    """Incremental SSE parser: feed byte blocks, get complete ``data`` payloads back."""

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, block: bytes) -> list[bytes]:
        """Add bytes; return the data payloads of every event completed by them."""
        buf = self._buf + block
        events: list[bytes] = []
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(b"data:"):
                payload = line[5:]
                if payload.startswith(b" "):
                    payload = payload[1:]
                self._data.append(payload)
            elif line.startswith(b"error:"):
                self._data.append(error_field_payload(line[6:]))
            # ":" comments, "event:", "id:", "retry:" carry nothing we measure.
        self._buf = buf[start:]
        return events

    def flush(self) -> list[bytes]:
        """Payloads of an event the stream ended without a blank line after (EOF terminates it)."""
        if self._buf.startswith(b"data:"):
            payload = self._buf[5:].lstrip(b" ").rstrip(b"\r")
            self._data.append(payload)
        self._buf = b""
        events = [b"\n".join(self._data)] if self._data else []
        self._data = []
        return events


def iter_events(
    read: Callable[[], bytes], clock: Callable[[], float] = time.perf_counter
) -> Iterator[tuple[float, bytes]]:
    """Yield (arrival time, data payload) for each event; ``read`` returns b"" at end of stream.

    ``read`` must return as soon as any bytes are available (``read1`` semantics), never wait for a size.
    """
    splitter = SSESplitter()
    while True:
        block = read()
        now = clock()
        if not block:
            for payload in splitter.flush():
                yield now, payload
            return
        for payload in splitter.feed(block):
            yield now, payload
