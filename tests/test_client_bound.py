"""A run driven hard enough to saturate its one Locust process is flagged ``client_bound``; a first step finds its
window though some users' first requests never come back.

On this 2-core machine the emulator cannot out-run the client (both spend Python CPU per chunk), so the
target here is a minimal real HTTP server on 127.0.0.1 that answers each streamed chat request with a
prepared OpenAI-style SSE body in one write: almost free for the server, a full parse per chunk for the
client. Its ``/metrics`` answers 404, which must switch the sampler off with one warning and nothing else.
"""

from __future__ import annotations

import itertools
import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest

from specbench.analysis import load_run, summarize_run
from specbench.shapes.loadcpu import CLIENT_BOUND_PCT
from tests.conftest import read_jsonl, run_locust
from tests.tinyservers import serving

pytestmark = pytest.mark.slow


def _sse_body(max_tokens: int) -> bytes:
    def event(obj: object) -> str:
        return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"

    head = {"id": "c1", "object": "chat.completion.chunk", "model": "canned"}
    parts = [event({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "finish_reason": None}]})]
    parts += [event({**head, "choices": [{"index": 0, "delta": {"content": "tok "}, "finish_reason": None}]})
              for _ in range(max_tokens)]
    parts.append(event({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}))
    parts.append(event({**head, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": max_tokens,
                                                        "total_tokens": 5 + max_tokens}}))
    parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


class _CannedServer(socketserver.ThreadingTCPServer):
    """A listen queue as deep as a real server's: socketserver's default of 5 drops the connections of users
    started at once, whose SYN or first data then waits out TCP's backoff (seconds, growing) while a busy
    neighbour slows this process's accept loop, and the step waits on those users' first requests."""

    request_queue_size = 256
    daemon_threads = True

    def __init__(self, hold_every: int = 0) -> None:
        super().__init__(("127.0.0.1", 0), _Canned)
        self.hold_every = hold_every  # every n-th connection's first chat request gets no answer until stop
        self.connections = itertools.count(1)
        self.stopping = threading.Event()


class _Canned(socketserver.BaseRequestHandler):
    """HTTP/1.1 with keep-alive: /v1/models, streamed /v1/chat/completions, 404 for everything else."""

    bodies: ClassVar[dict[int, bytes]] = {}
    server: _CannedServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        number = next(self.server.connections)
        hold = self.server.hold_every > 0 and number % self.server.hold_every == 0
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = next((int(v) for k, _, v in (ln.partition(":") for ln in lines[1:])
                           if k.strip().lower() == "content-length"), 0)
            while len(buf) < length:
                buf += sock.recv(65536)
            body, buf = buf[:length], buf[length:]
            if method == "GET" and path == "/v1/models":
                status, ctype, out = "200 OK", "application/json", json.dumps(
                    {"object": "list", "data": [{"id": "canned", "object": "model", "owned_by": "test"}]}).encode()
            elif method == "POST" and path == "/v1/chat/completions" and hold:
                self.server.stopping.wait(30)  # never answered: the user's read times out
                return
            elif method == "POST" and path == "/v1/chat/completions":
                n = int(json.loads(body).get("max_tokens") or 16)
                out = self.bodies.setdefault(n, _sse_body(n))
                status, ctype = "200 OK", "text/event-stream"
            else:
                status, ctype, out = "404 Not Found", "text/plain", b"not found"
            sock.sendall(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(out)}\r\n\r\n"
                         .encode() + out)


@contextmanager
def _canned(hold_every: int = 0) -> Iterator[str]:
    server = _CannedServer(hold_every)
    try:
        with serving(server) as url:
            yield url
    finally:
        server.stopping.set()


@pytest.fixture
def canned_server() -> Iterator[str]:
    with _canned() as url:
        yield url


def test_a_saturated_load_process_is_flagged_client_bound(canned_server: str, tmp_path: Path) -> None:
    proc = run_locust(canned_server, tmp_path / "run", "--ladder", "64", "--max-tokens", "64", "--min-step-time",
                      "3", "--max-step-time", "30", "--step-ci", "0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("Server metrics off for this run") == 1 and "HTTP 404" in proc.stderr
    (step,) = read_jsonl(tmp_path / "run" / "steps.jsonl")
    assert max(step["load_cpu"].values()) > CLIENT_BOUND_PCT, step
    assert "client_bound" in step["flags"]
    summary = summarize_run(load_run(tmp_path / "run"))
    assert "client_bound" in summary.rows[0].flags
    assert any(w.code == "client_bound" for w in summary.warnings)


def test_a_first_step_finds_its_window_though_some_first_requests_never_return(tmp_path: Path) -> None:
    """Every 4th connection's first request is never answered (it times out after 8 s): a first step has no
    previous TTFT, so before its own first requests set the stable time it waited for every user and ended by its
    time limit (6 s) with no window. Now it opens once in-flight has held C for 2 s."""
    with _canned(hold_every=4) as url:
        proc = run_locust(url, tmp_path / "run", "--ladder", "8", "--max-tokens", "16", "--min-step-time", "2",
                          "--max-step-time", "6", "--step-ci", "0", "--read-timeout", "8")
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: the timed-out requests are failures
    (step,) = read_jsonl(tmp_path / "run" / "steps.jsonl")
    assert step["steady_start_s"] is not None and "no_window" not in step["flags"], step
    assert step["steady_start_s"] - step["start_s"] < 5.0, step
    records = read_jsonl(tmp_path / "run" / "records.jsonl")
    timed_out = {r["user"] for r in records if r["status"] == "timeout"}
    assert 1 <= len(timed_out) <= 2, timed_out  # the held users really had no first request back in the window
