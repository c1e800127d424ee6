"""A small closed-loop SSE client on gevent sockets, for calibration, the lag benchmark and tests.

It runs in greenlets and uses ``gevent.socket`` directly, so it needs no monkey-patching. Each chunk is
timestamped right after its bytes are read from the socket (no buffered line reader in between), and
tokens are counted from cumulative counts (``meta_info.completion_tokens`` or ``usage.completion_tokens``
with ``continuous_usage_stats``), never by counting chunks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import gevent
import gevent.event
from gevent import socket

__all__ = ["Connection", "StreamResult", "closed_loop", "completion_tokens_of", "window_throughput"]

MAX_CHUNKS = 100_000


@dataclass
class StreamResult:
    """One streamed request as the client saw it; ``chunk_tokens`` holds cumulative token counts."""

    status: int = 0
    sent_s: float = 0.0
    end_s: float = 0.0
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    done: bool = False
    error: str | None = None
    events: list[Any] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.chunk_tokens[-1] if self.chunk_tokens else 0

    @property
    def first_token_s(self) -> float | None:
        return next((t for t, n in zip(self.chunk_times, self.chunk_tokens, strict=True) if n > 0), None)


def completion_tokens_of(event: Any) -> int | None:
    """Cumulative completion tokens carried by one SSE payload, if any."""
    if not isinstance(event, dict):
        return None
    meta = event.get("meta_info")
    if isinstance(meta, dict) and "completion_tokens" in meta:
        return int(meta["completion_tokens"])
    usage = event.get("usage")
    if isinstance(usage, dict) and event.get("choices"):
        return int(usage["completion_tokens"])
    return None


class Connection:
    """One keep-alive HTTP/1.1 connection to the emulator."""

    def __init__(self, url: str, timeout_s: float = 120.0) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._buf = b""
        self.connects = 0

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf = b""

    def _connect(self) -> socket.socket:
        if self._sock is None:
            self.connects += 1
            self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self._sock

    def _fill(self) -> None:
        assert self._sock is not None
        data = self._sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed by server")
        self._buf += data

    def _read_until(self, marker: bytes) -> bytes:
        for _ in range(MAX_CHUNKS):
            index = self._buf.find(marker)
            if index >= 0:
                out, self._buf = self._buf[:index], self._buf[index + len(marker):]
                return out
            self._fill()
        raise ConnectionError("response line too long")

    def _read_exact(self, size: int) -> bytes:
        for _ in range(MAX_CHUNKS):
            if len(self._buf) >= size:
                out, self._buf = self._buf[:size], self._buf[size:]
                return out
            self._fill()
        raise ConnectionError("response too long")

    def _send(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str]]:
        sock = self._connect()
        head = (f"{method} {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n").encode()
        sock.sendall(head + body)
        lines = self._read_until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def request(self, method: str, path: str, payload: Any = None) -> tuple[int, bytes]:
        """A plain (non-streamed) request; returns status and body."""
        body = b"" if payload is None else json.dumps(payload).encode()
        try:
            status, headers = self._send(method, path, body)
            data = self._read_exact(int(headers.get("content-length", "0")))
            if headers.get("connection") == "close":
                self.close()
            return status, data
        except BaseException:
            self.close()
            raise

    def stream(self, path: str, payload: dict[str, Any], *, keep_events: bool = False,
               result: StreamResult | None = None) -> StreamResult:
        """POST a streaming request and read it to the end, timestamping every HTTP chunk.

        Pass ``result`` to keep what was read so far even if the calling greenlet is killed.
        """
        result = result if result is not None else StreamResult()
        result.sent_s = time.time()
        try:
            result.status, headers = self._send("POST", path, json.dumps(payload).encode())
            if "chunked" not in headers.get("transfer-encoding", ""):
                body = self._read_exact(int(headers.get("content-length", "0")))
                result.error = body.decode(errors="replace")
            else:
                self._read_chunks(result, keep_events)
            if headers.get("connection") == "close":
                self.close()
        except (OSError, ConnectionError, ValueError) as exc:
            result.error = result.error or f"{type(exc).__name__}: {exc}"
            self.close()
        result.end_s = time.time()
        return result

    def _read_chunks(self, result: StreamResult, keep_events: bool) -> None:
        pending = b""
        for _ in range(MAX_CHUNKS):
            size = int(self._read_until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                self._read_until(b"\r\n")
                return
            data = self._read_exact(size)
            now = time.time()
            self._read_exact(2)
            pending += data
            *events, pending = pending.split(b"\n\n")
            for raw in events:
                self._take_event(raw, now, result, keep_events)

    @staticmethod
    def _take_event(raw: bytes, now: float, result: StreamResult, keep_events: bool) -> None:
        if not raw.startswith(b"data: "):
            return
        payload = raw[6:]
        if payload == b"[DONE]":
            result.done = True
            return
        try:
            event = json.loads(payload)
        except ValueError:
            result.error = result.error or "malformed chunk"
            if keep_events:
                result.events.append(payload.decode(errors="replace"))
            return
        if keep_events:
            result.events.append(event)
        if isinstance(event, dict) and "error" in event:
            result.error = result.error or json.dumps(event["error"])
        tokens = completion_tokens_of(event)
        if tokens is not None:
            result.chunk_times.append(now)
            result.chunk_tokens.append(tokens)


Payload = Callable[[int, int], tuple[str, dict[str, Any]]]


def closed_loop(url: str, concurrency: int, payload: Payload, *, requests_per_client: int = 10**6,
                stop_at_s: float | None = None, timeout_s: float = 600.0,
                until: gevent.event.Event | None = None) -> list[list[StreamResult]]:
    """C clients, each sending its next request as soon as the previous one ended.

    ``payload(client, k)`` gives the k-th request of a client. A client stops after
    ``requests_per_client`` requests; at ``stop_at_s`` (``time.time()``), after ``timeout_s`` or once ``until``
    is set, every client is stopped and its connection closed, in-flight requests included (their partial
    results are kept), so the server sees the clients disconnect.
    """
    results: list[list[StreamResult]] = [[] for _ in range(concurrency)]
    connections = [Connection(url) for _ in range(concurrency)]

    def client(index: int) -> None:
        conn = connections[index]
        for k in range(requests_per_client):
            path, body = payload(index, k)
            result = StreamResult()
            results[index].append(result)
            conn.stream(path, body, result=result)

    greenlets = [gevent.spawn(client, i) for i in range(concurrency)]
    limit = timeout_s if stop_at_s is None else min(timeout_s, max(0.0, stop_at_s - time.time()))
    if until is not None:  # the caller says when (e.g. once its measurement window is over)
        until.wait(timeout=limit)
    else:
        gevent.joinall(greenlets, timeout=limit)
    gevent.killall(greenlets, timeout=5.0)
    for conn in connections:
        conn.close()
    return results


def window_throughput(results: list[list[StreamResult]], t0: float, t1: float) -> float:
    """Tokens received in (t0, t1] per second, from cumulative counts."""
    tokens = 0
    for client in results:
        for res in client:
            previous = 0
            for when, count in zip(res.chunk_times, res.chunk_tokens, strict=True):
                if t0 < when <= t1:
                    tokens += count - previous
                previous = count
    return tokens / (t1 - t0) if t1 > t0 else 0.0
