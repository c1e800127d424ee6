"""The users' HTTP/1.1 client for streamed completions: one keep-alive connection per user, bytes as they come.

Why our own, not requests/urllib3: when continuous batching ends many streams in one decode step, every user of
a load process turns its request around one after another on one event loop, so each user's CPU from its
stream's end to its next send delays every user behind it (send lag). requests' ``Session.request`` merges
the session's and the call's headers, params, hooks and cookie jars on every request, urllib3 looks up its
pool and connection, and ``http.client`` parses the response head with the ``email`` package: measured at C=4
with one-token requests, the suite spent 841 us of CPU per request with ``Session.request``, 549 us with a
request prepared once (``Session.send``'s path), and 250 streams ending in one step waited up to 23 ms for
their sends. A streamed completion needs little of HTTP: a POST with a body, a status line and headers, and a
body framed as chunks (every server here), by Content-Length or by the connection's close.

What it does (RFC 9112): the request head is written in one ``sendall`` with its body; the response's 1xx
heads are skipped; ``read1`` returns the body's bytes as soon as any arrive (de-chunked), never waiting for a
buffer to fill, so first-token times stay exact; a body read to its end leaves the connection open for the
user's next request unless the server said ``Connection: close`` (or spoke HTTP/1.0). A kept connection the
server closed while idle is noticed before reuse (a zero-timeout ``select`` with the unpatched module: gevent's
would yield to the loop and queue the user behind all the others), and a request that a reused connection lost
before any response byte is sent once more on a new connection: HTTP/1.1 allows a server to close an idle
connection at any moment, and llama.cpp's server (0.3.36) closes it about 40 ms after each streamed response
without saying so. Errors after the response began are never retried. Not supported, because no inference
server needs them for a streamed completion: proxies, cookies, redirects (a 3xx is reported as not a stream),
compressed bodies (the request asks for ``identity``; a compressed answer is a broken stream).

Kernel receive times (``kernel_stamps``, Linux, plain TCP): the socket asks the kernel to stamp each segment
when it reaches the socket (``SO_TIMESTAMPNS``) and every read is a ``recvmsg`` whose ancillary data carries
the stamp (CLOCK_REALTIME) of the last segment it returned. ``Response.stamp`` is that time for the bytes the
last ``read1`` returned, however late the event loop got to them. One read that returns several segments
carries the last one's stamp, so an earlier event in it is stamped no earlier than it arrived and at most as
late as the read itself. TLS sockets give no ancillary data: they read without stamps. A kernel that refuses
the option (``setsockopt`` fails: ENOPROTOOPT) costs no request: the connection goes on without stamps, and
``STAMPS`` keeps the refusal, so no later connection of the process asks again and the users can say it once.

The send side: ``written`` is when ``sendall`` returned, every byte of the request in the kernel's hands. From
the request's start (just before the write) to then is its write time: microseconds while the socket's buffer
takes the request whole; a prompt larger than the buffer waits for the server to read it, and a greenlet that
had to wait resumes only when its event loop gets to it.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from gevent.monkey import get_original
from gevent.socket import socket as _GreenSocket

from specbench.contract.receiveclock import KERNEL_STAMPS, SCM_TIMESTAMPNS, stamp_option
from specbench.contract.redact import clip
from specbench.contract.schema import Status
from specbench.locustfiles.silence import DeadlinePassed, SilenceTimer

_select = get_original("select", "select")

READ_SIZE = 65536
MAX_HEAD = 65536  # a response head larger than this is not a server's answer
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux: tv_sec, tv_nsec
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
_STAMP_OPTION = stamp_option()

log = logging.getLogger("specbench")


class KernelStamps:
    """This process's kernel receive stamps: whether the kernel refused them (and why), and whether the one note
    about chunks dated without them was given. One per process (``STAMPS``): a refusal is the kernel's, not a
    connection's, so asking again on every connect would only repeat it."""

    __slots__ = ("noted", "refused")

    def __init__(self) -> None:
        self.refused: str | None = None  # the setsockopt error, once the kernel refused the option
        self.noted = False

    def note(self, clock: str) -> None:
        """Once per process: a run on the kernel's clock dated chunks on the load process's (``clock`` "user" or
        "mixed"), and why."""
        if self.noted:
            return
        self.noted = True
        why = (f"the kernel refused its receive stamps (setsockopt SO_TIMESTAMPNS: {self.refused})"
               if self.refused is not None else "the kernel gave no receive stamps for some reads")
        log.warning("%s: chunk times are on this load process's clock instead (receive_clock %s in the records, "
                    "steps.jsonl and meta.json; a late read is in them)", why, clock)


STAMPS = KernelStamps()


def _ask_stamps(sock: Any) -> bool:
    """Ask the kernel to stamp the socket's segments; False where it refused, now or on an earlier connect."""
    if STAMPS.refused is None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, _STAMP_OPTION, 1)
        except OSError as exc:  # ENOPROTOOPT: no such option here; the connection reads without stamps
            STAMPS.refused = str(exc)
    return STAMPS.refused is None


def _recv(sock: Any, stamped: bool) -> tuple[bytes, float | None]:
    """One read: (its bytes, the kernel's receive time of its last segment in epoch seconds, or None)."""
    if not stamped:
        return sock.recv(READ_SIZE), None
    data, ancillary, _flags, _addr = sock.recvmsg(READ_SIZE, _ANCILLARY)
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(value) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(value)
            return data, sec + nsec * 1e-9
    return data, None


class SendFailed(Exception):
    """No response head came back: ``status`` is "connect_error" (no connection, or the server closed it before
    answering) or "timeout" (no head within the read timeout); ``reason`` a short kind, ``detail`` the error."""

    def __init__(self, status: Status, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.status, self.reason, self.detail = status, reason, detail


class BrokenStream(OSError):
    """The body cannot go on: the connection closed inside it, or its framing is not HTTP/1.1's."""


class _Closed(Exception):
    """The connection closed (or was reset) before any byte of a response: worth one resend on a fresh one."""


class Endpoint:
    """Where requests go: address, TLS, the Host header, a path prefix and Basic credentials from the URL."""

    __slots__ = ("address", "auth", "host_header", "prefix", "server_hostname", "tls")

    def __init__(self, base_url: str, verify: bool | str = True) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        https = parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        self.address = (parts.hostname, port)
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        self.host_header = host if parts.port in (None, 443 if https else 80) else f"{host}:{port}"
        self.prefix = parts.path.rstrip("/")
        self.server_hostname = parts.hostname
        self.tls: ssl.SSLContext | None = None
        if https:
            self.tls = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
            if verify is False:
                self.tls.check_hostname = False
                self.tls.verify_mode = ssl.CERT_NONE
        self.auth = None
        if parts.password is not None:  # http://user:password@host: sent as Basic auth, as requests did
            pair = f"{unquote(parts.username or '')}:{unquote(parts.password)}".encode()
            self.auth = "Basic " + base64.b64encode(pair).decode("ascii")


@functools.lru_cache(maxsize=16)
def endpoint(base_url: str, verify: bool | str = True) -> Endpoint:
    """One ``Endpoint`` per server for all users of a process: a TLS context loads the CA store once, not 250
    times in a ladder's step to C=250."""
    return Endpoint(base_url, verify)


class StreamClient:
    """One user's connection to one server; one request at a time."""

    __slots__ = ("_heads", "_sock", "endpoint", "silence", "stamped", "written")

    def __init__(self, endpoint: Endpoint, kernel_stamps: bool = False) -> None:
        self.endpoint = endpoint
        # kernel receive times where asked, the platform gives them and the socket is plain TCP
        self.stamped = kernel_stamps and KERNEL_STAMPS and endpoint.tls is None and STAMPS.refused is None
        self._sock: Any = None
        self._heads: dict[tuple[Any, ...], bytes] = {}
        self.silence: SilenceTimer | None = None  # the read timeout on an event loop (``_timeouts``)
        self.written: float | None = None  # perf_counter when the last request's bytes were all with the kernel

    def close(self) -> None:
        if self.silence is not None:
            self.silence.disarm()
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def _connect(self, timeout: float) -> None:
        ep = self.endpoint
        try:
            sock = socket.create_connection(ep.address, timeout=timeout)
        except TimeoutError as exc:
            raise SendFailed("connect_error", "ConnectTimeout", str(exc) or "connect timed out") from exc
        except OSError as exc:
            raise SendFailed("connect_error", "ConnectionError", str(exc)) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.stamped:
            self.stamped = _ask_stamps(sock)
        if ep.tls is not None:
            try:
                sock = ep.tls.wrap_socket(sock, server_hostname=ep.server_hostname)
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise SendFailed("connect_error", "SSLError", str(exc)) from exc
        self._sock = sock

    def _reusable(self) -> bool:
        """A kept connection is still open: nothing to read on it (the server's close would be readable).
        TLS connections are taken as open (a TLS 1.3 session ticket is readable too); the resend covers them."""
        if self.endpoint.tls is not None:
            return True
        try:
            readable, _w, _x = _select([self._sock], [], [], 0.0)
        except (OSError, ValueError):
            return False
        return not readable

    def head(self, path: str, headers: dict[str, str], length: int) -> bytes:
        """The request head; all but its Content-Length is built once per path and headers."""
        key = (path, *headers.items())
        fixed = self._heads.get(key)
        if fixed is None:
            ep = self.endpoint
            lines = [f"POST {ep.prefix}{path} HTTP/1.1", f"Host: {ep.host_header}", "User-Agent: specbench",
                     "Content-Type: application/json"]
            if ep.auth is not None:
                lines.append(f"Authorization: {ep.auth}")
            lines.extend(f"{name}: {value}" for name, value in headers.items())
            if any("\r" in line or "\n" in line for line in lines):  # one more header, or a second request
                raise ValueError("a request header holds a line break")
            fixed = self._heads[key] = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
        return b"%s%d\r\n\r\n" % (fixed, length)

    def post(self, path: str, headers: dict[str, str], body: bytes, timeout: tuple[float, float],
             on_send: Callable[[], None], total: float | None = None) -> Response:
        """Send the request and return once its response head has arrived (the body is left to stream).

        ``timeout`` is (connect, silence) in seconds; ``total`` bounds the whole request from its send, the body's
        reading included, where the socket is the event loop's. ``on_send`` runs once, just before the request's
        bytes are first written (after any connect). Raises ``SendFailed`` when no response head came back."""
        try:
            return self._post(path, headers, body, timeout, on_send, total)
        except BaseException:  # a kill too: nothing may throw into this greenlet after the request
            if self.silence is not None:
                self.silence.disarm()
            raise

    def _post(self, path: str, headers: dict[str, str], body: bytes, timeout: tuple[float, float],
              on_send: Callable[[], None], total: float | None) -> Response:
        connect_timeout, read_timeout = timeout
        data = self.head(path, headers, len(body)) + body
        sent = False
        self.written = None
        for attempt in range(2):
            if self._sock is not None and not self._reusable():
                self.close()
            reused = self._sock is not None
            if not reused:
                self._connect(connect_timeout)
            sock = self._sock
            self._timeouts(sock, read_timeout, total)
            if not sent:
                sent = True
                on_send()
            try:
                sock.sendall(data)
                self.written = time.perf_counter()  # handed over: the kernel holds every byte (not yet sent)
                return self._response(sock)
            except _Closed as exc:
                self.close()
                if reused and attempt == 0:
                    continue  # a kept connection the server had closed: once more on a fresh one
                raise SendFailed("connect_error", "RemoteDisconnected",
                                 f"connection closed without response ({exc})") from None
            except TimeoutError as exc:
                self.close()
                raise _timed_out(exc, read_timeout, total) from exc
            except BrokenStream:  # an answer, but not HTTP/1.1 as this client reads it
                self.close()
                raise
            except (OSError, ssl.SSLError) as exc:
                self.close()
                raise SendFailed("connect_error", "ConnectionError", str(exc)) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _timeouts(self, sock: Any, read_timeout: float, total: float | None) -> None:
        """The read timeout and total deadline for this request: one timer (``locustfiles.silence``) where the
        socket is gevent's (every load process), the socket's own timeout otherwise (a process without the event
        loop, where only silence is bounded)."""
        if isinstance(sock, _GreenSocket):
            sock.settimeout(None)
            if self.silence is None:
                self.silence = SilenceTimer()
            self.silence.arm(read_timeout, total)
        else:
            sock.settimeout(read_timeout if total is None else min(read_timeout, total))

    def _response(self, sock: Any) -> Response:
        """Read the response head, skipping 1xx interim heads (100 Continue, 103 Early Hints)."""
        buf, stamp = b"", None
        while True:
            head, buf, stamp = _read_head(sock, buf, self.silence, self.stamped, stamp)
            lines = head.split(b"\r\n")
            status_line = lines[0].split(None, 2)
            if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/") or not status_line[1].isdigit():
                raise BrokenStream(f"not an HTTP status line: {lines[0][:80]!r}")
            code = int(status_line[1])
            if 100 <= code < 200 and code != 101:
                continue
            fields = _fields(lines[1:])
            reason = status_line[2].decode("latin-1") if len(status_line) > 2 else ""
            keep = status_line[0] == b"HTTP/1.1" and "close" not in fields.get("connection", "").lower()
            return Response(self, sock, code, reason, fields, buf, keep, stamp)


def _timed_out(exc: TimeoutError, read_timeout: float, total: float | None) -> SendFailed:
    """No head came back: within the request's total time, or within the silence limit."""
    if isinstance(exc, DeadlinePassed):
        return SendFailed("timeout", "RequestTimeout", f"no response within the request's {total:g} s")
    return SendFailed("timeout", "ReadTimeout", f"no response within {read_timeout:g} s")


def _read_head(sock: Any, buf: bytes, silence: SilenceTimer | None, stamped: bool = False,
               stamp: float | None = None) -> tuple[bytes, bytes, float | None]:
    """(one head without its blank line, the bytes after it, the kernel stamp of the last read). ``_Closed`` when
    the connection ends or is reset before any byte."""
    end = buf.find(b"\r\n\r\n")
    while end < 0:
        if len(buf) > MAX_HEAD:
            raise BrokenStream(f"response head longer than {MAX_HEAD} bytes")
        try:
            block, stamp = _recv(sock, stamped)
        except (ConnectionResetError, BrokenPipeError) as exc:
            if buf:
                raise
            raise _Closed(type(exc).__name__) from exc
        if silence is not None:
            silence.touch()
        if not block:
            if buf:
                raise BrokenStream("connection closed inside the response head")
            raise _Closed("no byte")
        buf += block
        end = buf.find(b"\r\n\r\n")
    return buf[:end], buf[end + 4:], stamp


def _fields(lines: list[bytes]) -> dict[str, str]:
    """Header fields by lower-case name; a repeated field's values joined with ", " (RFC 9110 5.3)."""
    fields: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(b":")
        if sep:
            key, text = name.strip().lower().decode("latin-1"), value.strip().decode("latin-1")
            fields[key] = f"{fields[key]}, {text}" if key in fields else text
    return fields


class Response:
    """A response whose head has arrived; its body is read with ``read1`` (or ``read`` for an error page).

    The body read to its end hands the connection back to its client for the next request (when the server
    keeps it); ``close`` drops the connection, for a body left unread."""

    __slots__ = ("_buf", "_client", "_framing", "_keep", "_left", "_silence", "_sock", "_stamped", "_state", "done",
                 "headers", "reason", "stamp", "status_code")

    def __init__(self, client: StreamClient, sock: Any, status_code: int, reason: str, headers: dict[str, str],
                 buf: bytes, keep: bool, stamp: float | None = None) -> None:
        self._client, self._sock, self._buf, self._keep = client, sock, buf, keep
        self._silence = client.silence
        self._stamped = client.stamped
        self.stamp = stamp  # kernel receive time (epoch s) of the last read's bytes (the head's, at first); None: none
        self.status_code, self.reason, self.headers = status_code, reason, headers
        self.done = False
        self._state = "size"  # chunked: "size" (a size line next), "data", "crlf" (after data), "trailer"
        self._left = 0  # chunked: the chunk's bytes left; sized: the body's bytes left
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise BrokenStream(f"compressed body ({encoding}) although identity was asked for")
        if status_code in (204, 304):
            self._framing = "sized"
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._framing = "chunked"
        elif "content-length" in headers:
            self._framing = "sized"
            text = headers["content-length"]
            if not text.isdigit():
                raise BrokenStream(f"bad Content-Length {text!r}")
            self._left = int(text)
        else:
            self._framing, self._keep = "close", False  # the body ends when the server closes the connection
        if self._framing == "sized" and self._left == 0:
            self._finish()

    def read1(self) -> bytes:
        """The body's next bytes as soon as any have arrived (b"" at its end). Raises ``TimeoutError`` when
        the server is silent past the read timeout, ``BrokenStream`` when the body cannot be complete."""
        while not self.done:
            out = self._take() if self._buf else b""
            if out or self.done:
                return out
            block, self.stamp = _recv(self._sock, self._stamped)
            if self._silence is not None:
                self._silence.touch()
            if not block:
                if self._framing == "close":
                    self._finish()
                    return b""
                raise BrokenStream("connection closed before the end of the body")
            self._buf = self._buf + block if self._buf else block
        return b""

    def read(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of the body (an error page's start)."""
        parts: list[bytes] = []
        size = 0
        while size < limit:
            block = self.read1()
            if not block:
                break
            parts.append(block)
            size += len(block)
        return b"".join(parts)[:limit]

    def _take(self) -> bytes:
        """What the buffer holds of the body now, framing removed."""
        if self._framing == "chunked":
            if self._state == "size" and (whole := self._one_chunk()) is not None:
                return whole
            return self._dechunk()
        buf, self._buf = self._buf, b""
        if self._framing == "close":
            return buf
        out, self._buf = buf[:self._left], buf[self._left:]
        self._left -= len(out)
        if self._left == 0:
            self._finish()
        return out

    def _dechunk(self) -> bytes:
        """Every chunk's data the buffer holds (RFC 9112 7.1): size line, data, CRLF; size 0, trailers, CRLF."""
        buf, pos, size = self._buf, 0, len(self._buf)
        parts: list[bytes] = []
        while pos < size and not self.done:
            if self._state == "data":
                take = min(self._left, size - pos)
                parts.append(buf[pos:pos + take])
                pos += take
                self._left -= take
                if self._left == 0:
                    self._state = "crlf"
                continue
            end = buf.find(b"\r\n", pos)
            if end < 0:
                if size - pos > MAX_HEAD:
                    raise BrokenStream("chunk framing line too long")
                break
            line, pos = buf[pos:end], end + 2
            if self._state == "size":
                self._start_chunk(line)
            elif self._state == "crlf":
                if line:
                    raise BrokenStream("chunk data not followed by CRLF")
                self._state = "size"
            elif not line:  # "trailer": the empty line that ends the body
                self._buf = buf[pos:]
                self._finish()
                return b"".join(parts)
        self._buf = buf[pos:]
        return b"".join(parts)

    def _one_chunk(self) -> bytes | None:
        """The usual read, exactly one whole chunk, as one slice; None for anything else (the general path)."""
        buf = self._buf
        nl = buf.find(b"\r\n", 0, 18)
        if nl <= 0:
            return None
        try:
            end = nl + 2 + int(buf[:nl], 16)
        except ValueError:  # an extension, or not a size: the general path says which
            return None
        if end <= nl + 2 or end + 2 != len(buf) or not buf.endswith(b"\r\n"):
            return None
        self._buf = b""
        return buf[nl + 2:end]

    def _start_chunk(self, line: bytes) -> None:
        text = line.split(b";", 1)[0].strip()
        try:
            self._left = int(text, 16)
        except ValueError:
            raise BrokenStream(f"bad chunk size {clip(text.decode('latin-1'), 20)!r}") from None
        self._state = "data" if self._left > 0 else "trailer"

    def _finish(self) -> None:
        self.done = True
        if self._silence is not None:
            self._silence.disarm()
        if not (self._keep and not self._buf):  # kept: the connection waits for the user's next request
            self._client.close()

    def close(self) -> None:
        """Leave the body unread: the connection is dropped (its remaining bytes would confuse the next answer)."""
        if self._silence is not None:
            self._silence.disarm()
        if not self.done:
            self.done = True
            self._client.close()
