"""The sampler against small real HTTP servers on 127.0.0.1: the API key goes in the header and nowhere else,
a 404 or a silent server switches it off with one warning, and nothing is written then."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specbench.contract.rundir import SERVER_METRICS_FILE
from specbench.contract.server_metrics import read_server_metrics
from specbench.locustfiles.server_metrics import ServerMetricsSampler
from tests.tinyservers import tiny_server

KEY = "sk-never-in-a-file-1234"


@pytest.fixture
def server() -> Iterator[Any]:
    """Serves vLLM's running-requests gauge (3) at /metrics; /slow/metrics never answers; other paths are 404s."""
    with tiny_server("vllm_metrics") as server:
        yield server


def test_the_key_is_sent_and_never_logged_or_written(server: Any, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sampler = ServerMetricsSampler(server.url, tmp_path, 1.0, api_key=KEY)
    assert sampler.sample_once() and sampler.sample_once()
    sampler._appender.close()  # type: ignore[union-attr]
    assert server.seen[-1] == ("GET", "/metrics", f"Bearer {KEY}")
    samples, _ = read_server_metrics(tmp_path / SERVER_METRICS_FILE)
    assert [s["values"] for s in samples] == [{"running": 3.0}, {"running": 3.0}] and samples[0]["server"] == "vllm"
    assert KEY not in (tmp_path / SERVER_METRICS_FILE).read_text() and KEY not in caplog.text


@pytest.mark.parametrize(("path", "reason"), [("/none", "HTTP 404"), ("/slow", "no answer within 0.5 s")])
def test_no_metrics_switches_the_sampler_off_with_one_warning(server: Any, tmp_path: Path, path: str, reason: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    sampler = ServerMetricsSampler(server.url + path, tmp_path, 1.0, api_key=KEY, timeout_s=0.5)
    assert not sampler.sample_once() and not sampler.sample_once()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and reason in warnings[0].getMessage() and KEY not in caplog.text
    assert sampler.disabled_reason is not None and not (tmp_path / SERVER_METRICS_FILE).exists()
