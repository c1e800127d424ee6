"""Preflight follows no redirect: a server that sends it to another host is refused, saying where (#53)."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import pytest

from specbench.preflight import PreflightError, check_server
from tests.tinyservers import QuietHandler, serving


class _Elsewhere(QuietHandler):
    """Every GET is sent on to a server elsewhere; ``hits`` counts what arrives at the one redirected to."""

    def do_GET(self) -> None:
        with self.server.lock:  # type: ignore[attr-defined]
            self.server.hits.append(self.path)  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        if self.server.target:  # type: ignore[attr-defined]
            self.send_header("Location", self.server.target + self.path)  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def _server(status: int, target: str) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Elsewhere)
    server.daemon_threads = True
    server.status, server.target, server.hits, server.lock = status, target, [], threading.Lock()  # type: ignore[attr-defined]
    return server


def test_a_redirect_to_another_host_is_refused_and_not_followed() -> None:
    other = _server(200, "")
    with serving(other) as other_url:
        first = _server(302, other_url.replace("127.0.0.1", "localhost"))
        with serving(first) as url, pytest.raises(PreflightError) as caught:
            check_server(url, "spec", timeout=5.0, total=10.0)
    message = str(caught.value)
    assert "answers 302 on /ready, redirecting to http://localhost:" in message and "\n" not in message
    assert other.hits == []  # type: ignore[attr-defined]
