"""A small HTTP/1.1 server on ``gevent.server.StreamServer``: keep-alive, chunked SSE, exact timing.

Why our own: the emulator must know when each chunk really reached the socket, cut a stream in the
middle without a terminating chunk, and run in whichever gevent hub it is started from. Each chunk is
written with one ``sendall`` and TCP_NODELAY is set, so an SSE event leaves as soon as it is produced.
Request bodies must come with ``Content-Length`` (what every HTTP client sends for a JSON body).
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import BinaryIO
from urllib.parse import parse_qs, urlsplit

from gevent.server import StreamServer

__all__ = ["ClientGone", "HttpRequest", "HttpServer", "Responder"]

log = logging.getLogger(__name__)

IO_TIMEOUT_S = 300.0
MAX_LINE = 65536
MAX_HEADERS = 100
MAX_BODY = 64 * 1024 * 1024
MAX_REQUESTS_PER_CONNECTION = 1_000_000


class ClientGone(Exception):
    """The peer closed the connection (or stopped reading) while we were writing."""


class _BadRequest(Exception):
    pass


@dataclass
class HttpRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


class Responder:
    """Writes exactly one response on a connection: a whole body, or a chunked stream."""

    def __init__(self, sock: socket.socket, keep_alive: bool) -> None:
        self._sock = sock
        self.keep_alive = keep_alive
        self.started = False
        self.complete = False
        self._pending = b""

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self.keep_alive = False
            raise ClientGone(str(exc)) from None

    def _head(self, status: int, content_type: str | None, extra: list[str]) -> bytes:
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "server: sglang-emulator"]
        if content_type:
            lines.append(f"content-type: {content_type}")
        lines.extend(extra)
        lines.append("connection: keep-alive" if self.keep_alive else "connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send(self, status: int, body: bytes = b"", content_type: str | None = "application/json",
             headers: tuple[str, ...] = ()) -> None:
        self.started = True
        extra = [f"content-length: {len(body)}", *headers]
        self._send(self._head(status, content_type if body else None, extra) + body)
        self.complete = True

    def start_stream(self, status: int = 200, content_type: str = "text/event-stream; charset=utf-8", *,
                     defer: bool = False) -> None:
        """Send the chunked-response head now, or with the first chunk when ``defer``."""
        self.started = True
        head = self._head(status, content_type, ["transfer-encoding: chunked", "cache-control: no-cache"])
        if defer:
            self._pending = head
        else:
            self._send(head)

    def write(self, data: bytes) -> None:
        """One HTTP chunk, flushed at once."""
        if data:
            self._send(self._pending + b"%x\r\n%s\r\n" % (len(data), data))
            self._pending = b""

    def finish_stream(self, data: bytes = b"") -> None:
        """The last data and the terminating chunk in one write."""
        body = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
        self._send(self._pending + body + b"0\r\n\r\n")
        self._pending = b""
        self.complete = True

    def cut(self) -> None:
        """Close the connection mid-response: no terminating chunk, as when a server dies."""
        self.keep_alive = False
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)


def _read_request(rfile: BinaryIO, sock: socket.socket) -> HttpRequest | None:
    line = rfile.readline(MAX_LINE + 1)
    while line in (b"\r\n", b"\n"):
        line = rfile.readline(MAX_LINE + 1)
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or len(line) > MAX_LINE:
        raise _BadRequest("malformed request line")
    method, target, version = parts
    headers = _read_headers(rfile)
    body = _read_body(rfile, sock, headers)
    if body is None:
        return None
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    split = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
    return HttpRequest(method.upper(), split.path or "/", query, headers, body, keep_alive)


def _read_headers(rfile: BinaryIO) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        raw = rfile.readline(MAX_LINE + 1)
        if raw in (b"\r\n", b"\n", b""):
            return headers
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep:
            raise _BadRequest("malformed header line")
        headers[name.strip().lower()] = value.strip()
    raise _BadRequest("too many headers")


def _read_body(rfile: BinaryIO, sock: socket.socket, headers: dict[str, str]) -> bytes | None:
    """The Content-Length body; None when the client hung up before sending all of it."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise _BadRequest("chunked request bodies are not supported; send Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _BadRequest("bad Content-Length") from None
    if not 0 <= length <= MAX_BODY:
        raise _BadRequest("bad Content-Length")
    if length and headers.get("expect", "").lower() == "100-continue":
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = rfile.read(length) if length else b""
    return body if len(body) == length else None


App = Callable[[HttpRequest, Responder], None]


class HttpServer:
    """Serves ``app`` on (host, port) in the current gevent hub; port 0 picks a free port."""

    def __init__(self, host: str, port: int, app: App, on_error: Callable[[Responder], None]) -> None:
        self._app, self._on_error = app, on_error
        self._server = StreamServer((host, port), self._handle, backlog=2048)

    def start(self) -> None:
        self._server.start()

    @property
    def port(self) -> int:
        port = self._server.server_port
        assert port is not None  # None only for a server bound to a socket path; this one has (host, port)
        return port

    def stop(self, timeout_s: float = 2.0) -> None:
        self._server.stop(timeout=timeout_s)

    def _handle(self, sock: socket.socket, _address: object) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(IO_TIMEOUT_S)
        rfile = sock.makefile("rb")
        try:
            for _ in range(MAX_REQUESTS_PER_CONNECTION):
                try:
                    request = _read_request(rfile, sock)
                except _BadRequest as exc:
                    body = f'{{"error": "{exc}"}}'.encode()
                    Responder(sock, keep_alive=False).send(400, body)
                    break
                if request is None:
                    break
                responder = Responder(sock, request.keep_alive)
                self._serve_one(request, responder)
                if not (responder.complete and responder.keep_alive):
                    break
        except (OSError, ClientGone):
            pass
        finally:
            rfile.close()
            sock.close()

    def _serve_one(self, request: HttpRequest, responder: Responder) -> None:
        try:
            self._app(request, responder)
        except ClientGone:
            responder.keep_alive = False
        except Exception:
            log.exception("emulator: unhandled error on %s %s", request.method, request.path)
            if responder.started:
                responder.cut()
            else:
                responder.keep_alive = False
                self._on_error(responder)
