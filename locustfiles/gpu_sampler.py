"""GPU telemetry during the run: each ``--gpu-metrics`` exporter read every interval into gpu_metrics.jsonl.

One greenlet per exporter, in the process that coordinates the run (as the ``/metrics`` sampler,
``locustfiles.server_metrics``), so a slow exporter delays only its own reads. Unlike that sampler it never gives
up: an exporter that does not answer, answers an error or something that is not Prometheus text costs its own
samples only (a gap in the file, which the analysis reports as "not measured" for the steps it covers), with one
warning when it goes away and one line when it is back. Nothing is sent to an exporter but a plain GET: the
server's API key stays with the server.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import gevent
import requests
from urllib3.exceptions import ReadTimeoutError

from contract.gpu_metrics import GPU_METRICS_FILE, GpuMetricsParseError, parse_dcgm
from contract.redact import redact
from locustfiles.deadline import Deadline, DeadlineExceeded, fetch
from locustfiles.httpsession import new_session
from locustfiles.recorder import JsonlAppender

log = logging.getLogger("specbench")


class _Exporter:
    """One exporter's reads; ``failing`` holds why the last read failed (None while it answers)."""

    def __init__(self, url: str, source: int) -> None:
        self.url, self.source = url, source
        self.session = new_session()
        self.samples = 0
        self.failures = 0
        self.failing: str | None = None


class GpuMetricsSampler:
    """Reads every exporter URL each ``interval_s`` into ``run_dir``/gpu_metrics.jsonl until stopped."""

    def __init__(self, urls: list[str], run_dir: Path, interval_s: float, *, timeout_s: float = 5.0) -> None:
        self.path = run_dir / GPU_METRICS_FILE
        self.interval_s = interval_s
        self.timeout_s = min(timeout_s, max(interval_s, 1.0) * 3)
        self.exporters = [_Exporter(url, i) for i, url in enumerate(urls)]
        self._appender: JsonlAppender | None = None
        self._greenlets: list[gevent.Greenlet] = []

    @property
    def samples(self) -> int:
        return sum(e.samples for e in self.exporters)

    def start(self) -> None:
        self._greenlets = [gevent.spawn(self._loop, e) for e in self.exporters]

    def stop(self) -> None:
        """One last read of each exporter that still answers (the counters at the very end), then stop; safe to
        call twice."""
        greenlets, self._greenlets = self._greenlets, []
        if not greenlets:
            return
        gevent.killall(greenlets, block=True, timeout=self.timeout_s + 1.0)
        for exporter in self.exporters:
            if exporter.failing is None:
                self.sample_once(exporter)
            exporter.session.close()
        if self._appender is not None:
            self._appender.close()
            self._appender = None

    def _loop(self, exporter: _Exporter) -> None:
        next_at = time.monotonic()
        while True:
            self.sample_once(exporter)
            next_at += self.interval_s
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (a slow exporter): keep the interval from now, do not burst
                next_at, delay = time.monotonic(), 0.0
            gevent.sleep(delay)

    def sample_once(self, exporter: _Exporter) -> bool:
        """One read of one exporter; False (and the outage noted once) when it gives no telemetry."""
        sent = time.time()
        try:  # the whole read within the timeout: a page that trickles or never ends cannot hold the sampler
            resp = fetch(exporter.session, "GET", exporter.url, deadline=Deadline(self.timeout_s),
                         per_read_s=self.timeout_s)
        except (requests.Timeout, ReadTimeoutError, DeadlineExceeded):
            return self._failed(exporter, f"no answer within {self.timeout_s:g} s")
        except requests.RequestException as exc:
            return self._failed(exporter, type(exc).__name__)
        if resp.status != 200:
            return self._failed(exporter, f"HTTP {resp.status}")
        received = time.time()
        try:
            sample = parse_dcgm(resp.text, (sent + received) / 2, exporter.source)
        except GpuMetricsParseError as exc:
            return self._failed(exporter, str(exc))
        if not sample["gpus"]:
            return self._failed(exporter, "no DCGM power, energy or utilisation series with a gpu label")
        sample["read_s"] = round(received - sent, 6)
        if self._appender is None:
            self._appender = JsonlAppender(self.path)
        self._appender.write(dict(sample))
        exporter.samples += 1
        if exporter.failing is not None:
            log.info("GPU metrics: %s answers again (%d reads failed)", redact(exporter.url), exporter.failures)
            exporter.failing = None
        return True

    def _failed(self, exporter: _Exporter, reason: str) -> bool:
        exporter.failures += 1
        if exporter.failing is None:
            exporter.failing = reason
            log.warning("GPU metrics: GET %s: %s; steps it misses get no energy figures; still trying every %g s",
                        redact(exporter.url), reason, self.interval_s)
        return False
