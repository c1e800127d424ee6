"""A worker's handshake with its master: the run token, and the worker's clock offset against the master's.

Why the token: a master on Locust's fixed port took in the workers of an unrelated run on the same machine and
wrote their records. Every worker now says hello with the run's token as soon as it is connected (before any
spawn message can reach it); the master answers welcome, or refuse, and a refused worker logs one line and
quits without sending a request or writing a file.

Why the clock: records from several machines must share one time line, and the master's step windows are in
the master's clock. The welcome and later probes carry the master's time; the worker keeps the offset of the
probe with the shortest round trip (NTP's rule: its error is at most half that round trip) and stamps every
record's ``start_s`` in the master's clock. Offsets are re-measured every ``PROBE_EVERY_S`` while it runs.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent

from specbench.contract.messages import CLOCK_MESSAGE, CPU_MESSAGE, HELLO_MESSAGE
from specbench.locustfiles.looplag import LOOP_LAG
from specbench.shapes.loadcpu import process_busy_seconds

log = logging.getLogger("specbench")

TOKEN_ENV = "SPECBENCH_RUN_TOKEN"
PROBE_EVERY_S = 10.0
PROBES_AT_START = 4

#: Made once per locustfile import, so ``--processes`` children (forked after the import) share it with their
#: master, and a worker started on its own has another one unless it is given the run's token.
GENERATED_TOKEN = secrets.token_hex(8)


def run_token(options: Any) -> tuple[str, bool]:
    """The token this process presents or expects, and whether it was given (flag or environment)."""
    given = getattr(options, "run_token", None) or os.environ.get(TOKEN_ENV)
    return (str(given), True) if given else (GENERATED_TOKEN, False)


@dataclass
class ClockOffset:
    """master clock = this clock + offset, from the probe with the shortest round trip so far."""

    offset_s: float = 0.0
    rtt_s: float | None = None

    def add(self, t0: float, tm: float, t1: float) -> None:
        rtt = max(0.0, t1 - t0)
        if self.rtt_s is None or rtt <= self.rtt_s:
            self.rtt_s = rtt
            self.offset_s = tm - (t0 + t1) / 2.0


class WorkerLink:
    """Worker side: hello with the token, learn the clock offset, quit when refused."""

    def __init__(self, send: Callable[[str, dict[str, Any]], None], token: str,
                 on_refused: Callable[[str], None]) -> None:
        self._send = send
        self.token = token
        self.clock = ClockOffset()
        self.welcomed = False
        self._on_refused = on_refused
        self._prober: gevent.Greenlet | None = None
        self._cpu: gevent.Greenlet | None = None

    def hello(self) -> None:
        self._send(HELLO_MESSAGE, {"token": self.token, "t0": time.time(), "pid": os.getpid(), "cwd": os.getcwd()})

    def on_welcome(self, data: dict[str, Any]) -> None:
        if data.get("refused"):
            self._on_refused(str(data["refused"]))
            return
        self.clock.add(float(data["t0"]), float(data["tm"]), time.time())
        self.welcomed = True
        if self._prober is None:
            self._prober = gevent.spawn(self._probe_loop)
            self._cpu = gevent.spawn(self._cpu_loop)

    def on_clock(self, data: dict[str, Any]) -> None:
        self.clock.add(float(data["t0"]), float(data["tm"]), time.time())

    def _cpu_loop(self) -> None:
        while True:
            self._send(CPU_MESSAGE, {"cpu_s": process_busy_seconds(), "t": time.monotonic(),
                                     "lag": LOOP_LAG.snapshot()})
            gevent.sleep(1.0)

    def _probe_loop(self) -> None:
        for _ in range(PROBES_AT_START):
            gevent.sleep(0.1)
            self._send(CLOCK_MESSAGE, {"t0": time.time()})
        while True:
            gevent.sleep(PROBE_EVERY_S)
            self._send(CLOCK_MESSAGE, {"t0": time.time()})


def add_link_options(parser: Any) -> None:
    """``--run-token``, and the master listening on loopback unless told otherwise."""
    parser.add_argument("--run-token", default=None, env_var=TOKEN_ENV, include_in_web_ui=False,
                        help="token workers present to join this run; a master without one makes one and prints it")
    parser.set_defaults(master_bind_host="127.0.0.1")
