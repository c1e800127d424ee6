"""A run driven hard enough to saturate its one Locust process is flagged ``client_bound``.

On this 2-core machine the emulator cannot out-run the client (both spend Python CPU per chunk), so the
target here is a minimal real HTTP server on 127.0.0.1 that answers each streamed chat request with a
prepared OpenAI-style SSE body in one write: almost free for the server, a full parse per chunk for the
client. Its ``/metrics`` answers 404, which must switch the sampler off with one warning and nothing else.
"""

from __future__ import annotations

import json
import socket
import socketserver
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from analysis import load_run, summarize_run
from shapes.loadcpu import CLIENT_BOUND_PCT
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


class _Canned(socketserver.BaseRequestHandler):
    """HTTP/1.1 with keep-alive: /v1/models, streamed /v1/chat/completions, 404 for everything else."""

    bodies: ClassVar[dict[int, bytes]] = {}

    def handle(self) -> None:
        sock: socket.socket = self.request
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
            elif method == "POST" and path == "/v1/chat/completions":
                n = int(json.loads(body).get("max_tokens") or 16)
                out = self.bodies.setdefault(n, _sse_body(n))
                status, ctype = "200 OK", "text/event-stream"
            else:
                status, ctype, out = "404 Not Found", "text/plain", b"not found"
            sock.sendall(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(out)}\r\n\r\n"
                         .encode() + out)


@pytest.fixture
def canned_server() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Canned)
    server.daemon_threads = True
    with serving(server) as url:
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
