"""The server's side of the run: ``GET /metrics`` every interval, one line of server_metrics.jsonl per read.

Runs as one greenlet in the process that coordinates the run (the master, or the local runner), so a
distributed run samples the server once, not once per worker. A server without metrics (404, not the
Prometheus format) or one that does not answer in time disables the sampler with one warning; the run goes
on. The API key, when one is in use, is sent the way the users send it and never logged.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import gevent
import requests
from urllib3.exceptions import ReadTimeoutError

from specbench.contract.rundir import RunDir
from specbench.contract.server_metrics import MetricsParseError, parse_metrics
from specbench.locustfiles.auth import auth_headers
from specbench.locustfiles.deadline import Deadline, DeadlineExceeded, fetch
from specbench.locustfiles.httpsession import new_session
from specbench.locustfiles.recorder import JsonlAppender

log = logging.getLogger("specbench")

METRICS_PATH = "/metrics"


class ServerMetricsSampler:
    """Samples ``base_url``/metrics every ``interval_s`` into ``run_dir``/server_metrics.jsonl until stopped."""

    def __init__(self, base_url: str, run_dir: Path, interval_s: float, *, api_key: str | None = None,
                 timeout_s: float = 5.0) -> None:
        self.url = base_url.rstrip("/") + METRICS_PATH
        self.path = RunDir(run_dir).server_metrics_file
        self.interval_s = interval_s
        self.timeout_s = min(timeout_s, max(interval_s, 1.0) * 5)
        self._headers = auth_headers(api_key)
        self._session = new_session()
        self._appender: JsonlAppender | None = None
        self._greenlet: gevent.Greenlet | None = None
        self.samples = 0
        self.disabled_reason: str | None = None

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        """Take one last sample (the counters at the very end), then stop; safe to call twice."""
        greenlet, self._greenlet = self._greenlet, None
        if greenlet is None:
            return
        greenlet.kill(block=True, timeout=self.timeout_s + 1.0)
        if self.disabled_reason is None:
            self.sample_once()
        if self._appender is not None:
            self._appender.close()
            self._appender = None
        self._session.close()

    def _loop(self) -> None:
        next_at = time.monotonic()
        while self.disabled_reason is None:
            self.sample_once()
            next_at += self.interval_s
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (a slow server): keep the interval from now, do not burst
                next_at, delay = time.monotonic(), 0.0
            gevent.sleep(delay)

    def sample_once(self) -> bool:
        """One read; False (and the sampler disabled, with one warning) when the server gives no metrics."""
        sent = time.time()
        try:  # the whole read within the timeout: a page that trickles or never ends cannot hold the sampler
            resp = fetch(self._session, "GET", self.url, deadline=Deadline(self.timeout_s),
                         per_read_s=self.timeout_s, headers=self._headers)
        except (requests.Timeout, ReadTimeoutError, DeadlineExceeded):
            return self._disable(f"no answer within {self.timeout_s:g} s")
        except requests.RequestException as exc:
            return self._disable(type(exc).__name__)
        if resp.status != 200:
            hint = " (SGLang needs --enable-metrics, llama.cpp --metrics)" if resp.status == 404 else ""
            return self._disable(f"HTTP {resp.status}{hint}")
        try:
            received = time.time()
            sample = parse_metrics(resp.text, (sent + received) / 2)
        except MetricsParseError as exc:
            return self._disable(str(exc))
        sample["read_s"] = round(received - sent, 6)
        if self._appender is None:
            self._appender = JsonlAppender(self.path)
        self._appender.write(dict(sample))
        self.samples += 1
        return True

    def _disable(self, reason: str) -> bool:
        if self.disabled_reason is None:
            self.disabled_reason = reason
            log.warning("Server metrics off for this run: GET %s: %s; the run goes on without them",
                        self.url, reason)
        return False
