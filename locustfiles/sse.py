"""Server-sent events split from raw socket reads, each stamped with the time its bytes arrived.

Timing lives here, next to the read: an event's time is the moment the read that completed it returned (or,
when the read waited on the event loop, the moment the loop saw its bytes: ``locustfiles.wakeclock``), so
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

from specbench.contract.receiveclock import perf_time
from specbench.locustfiles.wakeclock import wake_clock

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


def _data_value(line: bytes) -> bytes:
    """The value of a ``data:`` line (which it must start with): the rest, less the one space the SSE format
    allows after the colon."""
    return line[5:].removeprefix(b" ")


class SSESplitter:
    """Incremental SSE parser: feed byte blocks, get complete ``data`` payloads back.

    Why two paths: nearly every event a server sends is one ``data:`` line ended by a blank line, so a block
    is cut at blank lines and such events are taken whole (one split, one slice each); anything else (CR line
    ends, comments, several data lines, ``error:`` fields) goes through the line-by-line reading.
    """

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, block: bytes) -> list[bytes]:
        """Add bytes; return the data payloads of every event completed by them."""
        buf = self._buf + block if self._buf else block
        if self._data or b"\r" in buf:
            events, self._buf = self._lines(buf)
            return events
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._buf = buf
            return []
        self._buf = buf[end + 2:]
        events = []
        for text in buf[:end].split(b"\n\n"):
            if text.startswith(b"data:") and b"\n" not in text:
                events.append(_data_value(text))
            else:
                events.extend(self._lines(text + b"\n\n")[0])
        return events

    def _lines(self, buf: bytes) -> tuple[list[bytes], bytes]:
        """Read every complete line of ``buf``: the payloads of the events they complete, and what is left."""
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
                self._data.append(_data_value(line))
            elif line.startswith(b"error:"):
                self._data.append(error_field_payload(line[6:]))
            # ":" comments, "event:", "id:", "retry:" carry nothing we measure.
        return events, buf[start:]

    def flush(self) -> list[bytes]:
        """Payloads of an event the stream ended without a blank line after (EOF terminates it)."""
        events, rest = self._lines(self._buf)
        if rest.startswith(b"data:"):
            payload = rest[5:].lstrip(b" ").rstrip(b"\r")
            self._data.append(payload)
        self._buf = b""
        if self._data:
            events.append(b"\n".join(self._data))
        self._data = []
        return events


class EventReader:
    """Iterate (arrival time, data payload) for each event; ``read`` returns b"" at end of stream.

    With ``stamp`` (the kernel's receive time, epoch seconds, of the bytes the last read returned, or None:
    ``transport.Response.stamp``), each read's lag is measured: how much later than the kernel stamp the
    event-loop clock below would have put its first event; ``recv_lag_max_ms`` keeps the largest. With
    ``kernel`` as well, events are stamped with the kernel's time (on the ``perf_counter`` scale) instead, never
    before ``not_before`` (the request's send) nor before an earlier read's stamp.

    ``read`` must return as soon as any bytes are available (``read1`` semantics), never wait for a size.
    Without ``clock``, when a read waited on the event loop its first event is stamped with the poll that saw
    its bytes (``locustfiles.wakeclock``), not when this greenlet got its turn; later events of the same block
    may have arrived after that poll, so they, and reads that did not wait, get the time the read returned
    (never earlier than the bytes). ``last`` is the time of the last read (at the end: when the end was read);
    ``woke`` the poll that woke this greenlet for its latest bytes: from then on the process knew this stream
    needed it, so a send lag counted from there includes other users' work that ran first. With stamps it is
    never before the latest bytes' arrival: a process that fell behind reads bytes that were already waiting
    without a wait, and the last wake was for earlier bytes (a send lag counted from it would add the time
    between them).
    """

    __slots__ = ("_unstamped", "clock", "dated", "kernel", "last", "not_before", "read", "recv_lag_max_ms", "stamp",
                 "woke")

    def __init__(self, read: Callable[[], bytes], clock: Callable[[], float] | None = None,
                 stamp: Callable[[], float | None] | None = None, kernel: bool = False,
                 not_before: float = 0.0) -> None:
        self.read = read
        self.clock = clock
        self.stamp = stamp
        self.kernel = kernel and stamp is not None
        self.not_before = not_before
        self.last = 0.0
        self.woke = 0.0  # 0.0: no read waited on the loop
        self.recv_lag_max_ms: float | None = None  # None: no read carried a kernel stamp
        self.dated = 0  # with ``kernel``: bit 1, some events were dated by a kernel stamp; bit 2, some by this clock
        self._unstamped = 2 if self.kernel else 0

    @property
    def chunk_clock(self) -> str | None:
        """With ``kernel``, the clock that dated the events: "kernel", "user" (no read carried a stamp) or
        "mixed"; None without ``kernel`` or without events."""
        return {1: "kernel", 2: "user", 3: "mixed"}.get(self.dated)

    def __iter__(self) -> Iterator[tuple[float, bytes]]:
        read, splitter = self.read, SSESplitter()
        wake = wake_clock() if self.clock is None else None
        seen_s, arrived = None, self.not_before  # the last kernel stamp read, and its time on the perf_counter scale
        while True:
            first = 0.0  # the stamp of the block's first event when the read waited on the loop
            if wake is not None:
                before = wake.iteration
                block = read()
                now = time.perf_counter()
                if wake.iteration != before:
                    first = self.woke = wake.polled_at
            else:
                block = read()
                now = self.clock()  # type: ignore[misc]  # not None: wake is None only when a clock was given
            dated = self._unstamped  # this read's events: on this process's clock, unless a kernel stamp dates them
            if self.stamp is not None and (kernel_s := self.stamp()) is not None:
                if kernel_s != seen_s:  # a read that reached the socket (the same stamp: bytes an earlier one read)
                    seen_s = kernel_s
                    # on the perf_counter scale; bytes cannot arrive after their read nor before earlier bytes
                    arrived = min(now, max(arrived, perf_time(kernel_s)))
                    lag_ms = max(0.0, ((first or now) - arrived) * 1000.0)
                    if self.recv_lag_max_ms is None or lag_ms > self.recv_lag_max_ms:
                        self.recv_lag_max_ms = lag_ms
                    self.woke = max(self.woke, arrived)  # a wake before these bytes came was for earlier ones
                if self.kernel:
                    now, first, dated = arrived, 0.0, 1
            self.last = now
            events = splitter.feed(block) if block else splitter.flush()
            for payload in events:
                self.dated |= dated
                yield first or now, payload
                first = 0.0
            if not block:
                return


def iter_events(read: Callable[[], bytes], clock: Callable[[], float] | None = None) -> Iterator[tuple[float, bytes]]:
    """Yield (arrival time, data payload) for each event (``EventReader``)."""
    return iter(EventReader(read, clock))
