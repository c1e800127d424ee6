"""GPU telemetry during the run: each ``--gpu-metrics`` exporter (or NVML) read every interval into gpu_metrics.jsonl.

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

from specbench.contract.gpu_metrics import (
    GpuMetricsParseError,
    GpuMetricsSample,
    is_nvml,
    new_sample,
    parse_dcgm,
)
from specbench.contract.nvml import NvmlError, NvmlGpus
from specbench.contract.redact import redact
from specbench.contract.rundir import RunDir
from specbench.locustfiles.deadline import Deadline, DeadlineExceeded, fetch
from specbench.locustfiles.httpsession import new_session
from specbench.locustfiles.recorder import JsonlAppender

log = logging.getLogger("specbench")


class ReadFailed(Exception):
    """A read gave no telemetry; the message says why, in a few words."""


class _Source:
    """One source's reads; ``failing`` holds why the last read failed (None while it answers)."""

    def __init__(self, name: str, source: int) -> None:
        self.name, self.source = name, source
        self.samples = 0
        self.failures = 0
        self.failing: str | None = None

    def read(self, timeout_s: float) -> GpuMetricsSample:
        """One sample; raises ReadFailed."""
        raise NotImplementedError

    def close(self) -> None:
        """Give back what the reads hold (a connection, NVML)."""


class _Exporter(_Source):
    """A dcgm-exporter's ``/metrics``, read with a plain GET."""

    def __init__(self, url: str, source: int) -> None:
        super().__init__(f"GET {redact(url)}", source)
        self.url = url
        self.session = new_session()

    def read(self, timeout_s: float) -> GpuMetricsSample:
        """One sample, timed midway between sending the GET and reading the whole answer; raises ReadFailed."""
        sent = time.time()
        try:  # the whole read within the timeout: a page that trickles or never ends cannot hold the sampler
            resp = fetch(self.session, "GET", self.url, deadline=Deadline(timeout_s), per_read_s=timeout_s)
        except (requests.Timeout, ReadTimeoutError, DeadlineExceeded):
            raise ReadFailed(f"no answer within {timeout_s:g} s") from None
        except requests.RequestException as exc:
            raise ReadFailed(type(exc).__name__) from None
        if resp.status != 200:
            raise ReadFailed(f"HTTP {resp.status}")
        received = time.time()
        try:
            sample = parse_dcgm(resp.text, (sent + received) / 2, self.source)
        except GpuMetricsParseError as exc:
            raise ReadFailed(str(exc)) from None
        if not sample["gpus"]:
            raise ReadFailed("no DCGM power, energy or utilisation series with a gpu label")
        sample["read_s"] = round(received - sent, 6)
        return sample

    def close(self) -> None:
        self.session.close()


class _Nvml(_Source):
    """This machine's GPUs through NVML (``contract.nvml``), opened at the first read and again after a failure."""

    def __init__(self, entry: str, source: int) -> None:
        super().__init__(f"NVML ({entry})", source)
        self.entry = entry
        self.gpus: NvmlGpus | None = None

    def read(self, timeout_s: float) -> GpuMetricsSample:
        sent = time.time()
        try:
            if self.gpus is None:
                self.gpus = NvmlGpus(self.entry)
            readings = self.gpus.read()
        except NvmlError as exc:
            self.close()
            raise ReadFailed(str(exc)) from None
        received = time.time()
        if not any(readings.values()):
            raise ReadFailed("NVML gives none of power, energy, utilisation, memory or clock")
        sample = new_sample(readings, (sent + received) / 2, self.source)
        sample["read_s"] = round(received - sent, 6)
        return sample

    def close(self) -> None:
        if self.gpus is not None:
            self.gpus.close()
            self.gpus = None


class GpuMetricsSampler:
    """Reads every exporter URL each ``interval_s`` into ``run_dir``/gpu_metrics.jsonl until stopped."""

    def __init__(self, urls: list[str], run_dir: Path, interval_s: float, *, timeout_s: float = 5.0) -> None:
        self.path = RunDir(run_dir).gpu_metrics_file
        self.interval_s = interval_s
        self.timeout_s = min(timeout_s, max(interval_s, 1.0) * 3)
        self.exporters: list[_Source] = [_Nvml(url, i) if is_nvml(url) else _Exporter(url, i)
                                         for i, url in enumerate(urls)]
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
            exporter.close()
        if self._appender is not None:
            self._appender.close()
            self._appender = None

    def _loop(self, exporter: _Source) -> None:
        next_at = time.monotonic()
        while True:
            self.sample_once(exporter)
            next_at += self.interval_s
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (a slow exporter): keep the interval from now, do not burst
                next_at, delay = time.monotonic(), 0.0
            gevent.sleep(delay)

    def sample_once(self, exporter: _Source) -> bool:
        """One read of one exporter (or NVML); False (and the outage noted once) when it gives no telemetry."""
        try:
            sample = exporter.read(self.timeout_s)
        except ReadFailed as exc:
            return self._failed(exporter, str(exc))
        if self._appender is None:
            self._appender = JsonlAppender(self.path)
        self._appender.write(dict(sample))
        exporter.samples += 1
        if exporter.failing is not None:
            log.info("GPU metrics: %s answers again (%d reads failed)", exporter.name, exporter.failures)
            exporter.failing = None
        return True

    def _failed(self, exporter: _Source, reason: str) -> bool:
        exporter.failures += 1
        if exporter.failing is None:
            exporter.failing = reason
            log.warning("GPU metrics: %s: %s; steps it misses get no energy figures; still trying every %g s",
                        exporter.name, reason, self.interval_s)
        return False
