"""The sampler against small real HTTP servers on 127.0.0.1: the API key goes in the header and nowhere else,
a 404 or a silent server switches it off with one warning, and nothing is written then."""

from __future__ import annotations

import http.server
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.server_metrics import SERVER_METRICS_FILE, read_server_metrics
from locustfiles.server_metrics import ServerMetricsSampler

KEY = "sk-never-in-a-file-1234"
TEXT = b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3\n'


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Metrics(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []  # noqa: RUF012 - one list per test module run, read by the test

    def do_GET(self) -> None:
        _Metrics.seen.append(self.headers.get("Authorization"))
        if self.path == "/metrics":
            self.send_response(200)
            self.send_header("Content-Length", str(len(TEXT)))
            self.end_headers()
            self.wfile.write(TEXT)
        elif self.path == "/slow/metrics":
            time.sleep(2)
        else:
            self.send_error(404)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    yield from _serve(_Metrics)


def test_the_key_is_sent_and_never_logged_or_written(url: str, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sampler = ServerMetricsSampler(url, tmp_path, 1.0, api_key=KEY)
    assert sampler.sample_once() and sampler.sample_once()
    sampler._appender.close()  # type: ignore[union-attr]
    assert _Metrics.seen[-1] == f"Bearer {KEY}"
    samples, _ = read_server_metrics(tmp_path / SERVER_METRICS_FILE)
    assert [s["values"] for s in samples] == [{"running": 3.0}, {"running": 3.0}] and samples[0]["server"] == "vllm"
    assert KEY not in (tmp_path / SERVER_METRICS_FILE).read_text() and KEY not in caplog.text


@pytest.mark.parametrize(("path", "reason"), [("/none", "HTTP 404"), ("/slow", "no answer within 0.5 s")])
def test_no_metrics_switches_the_sampler_off_with_one_warning(url: str, tmp_path: Path, path: str, reason: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    sampler = ServerMetricsSampler(url + path, tmp_path, 1.0, api_key=KEY, timeout_s=0.5)
    assert not sampler.sample_once() and not sampler.sample_once()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and reason in warnings[0].getMessage() and KEY not in caplog.text
    assert sampler.disabled_reason is not None and not (tmp_path / SERVER_METRICS_FILE).exists()
