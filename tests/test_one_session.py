"""Every HTTP request of the suite comes from its one session factory: no proxy or netrc from the environment (#53).

A fake proxy (a real HTTP server on 127.0.0.1, named by HTTP_PROXY, HTTPS_PROXY and ALL_PROXY, NO_PROXY unset)
must see no request at all: not from ``--flush-cache``, nor from a whole ``specbench compare --flush-cache``
(preflight, server info, /metrics, the load itself). A netrc file naming 127.0.0.1 must put no credentials on
the flush. A flush that fails (the server answers 502) stops the run with one line, before any load; a server
without the route (404) is said and passed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from specbench.compare import EXIT_FLUSH_FAILED, flush_cache, run_ladder
from specbench.locustfiles.target import start_emulator_process
from tests.tinyservers import QuietHandler, serving

PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
NETRC_SECRET = "netrc-password-53"


class _Recorder(QuietHandler):
    """Answers every request with the server's ``status`` and keeps (method, path, Authorization)."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        server = self.server
        with server.lock:  # type: ignore[attr-defined]
            server.seen.append((self.command, self.path, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        body = b"{}"
        self.send_response(server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_CONNECT = _answer

    def log_message(self, *_args: object) -> None:
        pass


@contextmanager
def recorder(status: int) -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.daemon_threads = True
    server.status, server.seen, server.lock = status, [], threading.Lock()  # type: ignore[attr-defined]
    with serving(server) as url:
        yield url, server.seen  # type: ignore[attr-defined]


def _proxy_env(proxy: str, tmp_path: Path) -> dict[str, str]:
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login someone password {NETRC_SECRET}\n", encoding="utf-8")
    netrc.chmod(0o600)
    return {**{name: proxy for name in PROXY_VARS}, "NETRC": str(netrc)}


@pytest.fixture
def proxied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, str | None]]]:
    """This process's environment names a fake proxy (answering 502, as the issue's did) and a netrc file."""
    with recorder(502) as (proxy, seen):
        for name, value in _proxy_env(proxy, tmp_path).items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        yield seen


def test_flush_goes_to_the_server_not_the_proxy_and_carries_no_netrc_credentials(proxied) -> None:
    with recorder(200) as (url, seen):
        assert flush_cache(url, None) == (True, "flushed the server cache")
    assert proxied == []
    assert seen == [("POST", "/flush_cache", None)]


def test_a_server_without_the_route_is_said_and_passed(proxied) -> None:
    with recorder(404) as (url, _seen):
        flushed, said = flush_cache(url, None)
    assert flushed and "HTTP 404" in said and "no cache flush" in said
    assert proxied == []


def test_a_failed_flush_stops_the_run_with_one_line(proxied, tmp_path: Path, capsys) -> None:
    with recorder(502) as (url, seen):
        outcome = run_ladder("spec", url, tmp_path / "run", api="chat", suite_config=None, processes=0, extra=[],
                             flush=True)
    assert (outcome.returncode, outcome.interrupted) == (EXIT_FLUSH_FAILED, False)
    assert seen == [("POST", "/flush_cache", None)]  # the flush, and no load after it
    assert not (tmp_path / "run").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "spec" in err[0] and "answered HTTP 502" in err[0] and "stopping" in err[0], err
    assert proxied == []


@pytest.mark.slow
def test_a_whole_comparison_with_flush_sends_nothing_to_the_proxy(tmp_path: Path) -> None:
    with recorder(502) as (proxy, seen), start_emulator_process("baseline", speed=20) as base, \
            start_emulator_process("eagle3", speed=20) as spec:
        env = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
        env.update(_proxy_env(proxy, tmp_path))
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--flush-cache",
                               "--baseline", base.url, "--spec", spec.url, "--out", str(tmp_path / "report"),
                               "--ladder", "1", "--max-tokens", "16", "--min-requests", "4", "--min-step-time",
                               "1", "--max-step-time", "60", "--step-ci", "0", "--server-metrics-interval", "0.5"],
                              capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("flushed the server cache") == 2, proc.stdout
    assert seen == []
