"""The master's view of its workers: who may take part, what each has sent, and what a lost one took with it.

Why: the master alone writes the run directory (workers may sit on machines without a shared disk), so it
must know when it did not get something. Each worker numbers its records 0, 1, 2, ...; a gap is a record
that never arrived. A worker Locust marks ``missing`` (about three missed one-second heartbeats:
``locust.runners.HEARTBEAT_LIVENESS``) is lost: the requests it had started and not reported are lost, its
users are started again on the workers that remain, and the step is flagged. The master notices within
about four seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
from locust.rpc import Message
from locust.runners import STATE_MISSING, MasterRunner

from specbench.contract import laghist
from specbench.contract.messages import WELCOME_MESSAGE

log = logging.getLogger("specbench")

LOCAL_NODE = "local"
WATCH_EVERY_S = 0.5


@dataclass
class Fleet:
    """Admission by token, per-worker record counts, and lost-worker detection on a master."""

    token: str
    trusted: dict[str, int] = field(default_factory=dict)  # node id -> worker index
    refused: set[str] = field(default_factory=set)
    records_seen: dict[str, int] = field(default_factory=dict)
    records_next: dict[str, int] = field(default_factory=dict)  # one past the highest record number seen
    users: dict[str, int] = field(default_factory=dict)  # last user count seen per live worker
    lost: set[str] = field(default_factory=set)
    cpu: dict[str, tuple[float, float]] = field(default_factory=dict)  # node -> (CPU seconds, worker's monotonic)
    lag: dict[str, list[int]] = field(default_factory=dict)  # node -> its event-loop lateness histogram (laghist)
    _warned: set[str] = field(default_factory=set)

    def clear_run(self) -> None:
        self.records_seen.clear()
        self.records_next.clear()
        self.lost.clear()

    # -- admission --------------------------------------------------------------------------------------------

    def on_hello(self, runner: MasterRunner, node: str, data: dict[str, Any],
                 before_welcome: Callable[[str], None] | None = None) -> None:
        """Admit or refuse; ``before_welcome(node)`` brings a worker that joins a running test up to date."""
        index = runner.get_worker_index(node)
        if data.get("token") != self.token:
            self.refused.add(node)
            where = f"pid {data.get('pid')} in {data.get('cwd')}"
            log.error("Refused worker %s (index %s, %s): it did not present this run's token "
                      "(start workers with --run-token of this master); nothing it sends is recorded",
                      node, index, where)
            runner.send_message(WELCOME_MESSAGE, {"refused": "the master refused this worker: wrong run token "
                                                  "(pass the master's --run-token)"}, client_id=node)
            # Out of Locust's books at once, as if it had stopped: its later "quit" is then ignored (were it
            # counted, a headless master would stop the run when its "last worker" left).
            runner.handle_message(node, Message("client_stopped", None, node))
            return
        self.trusted[node] = index
        if before_welcome is not None:
            before_welcome(node)
        runner.send_message(WELCOME_MESSAGE, {"t0": data.get("t0"), "tm": time.time()}, client_id=node)

    def accepts(self, node: str) -> bool:
        if node == LOCAL_NODE or node in self.trusted:
            return True
        if node not in self._warned:
            self._warned.add(node)
            log.warning("Ignoring messages from worker %s: it has not presented this run's token", node)
        return False

    def on_cpu(self, node: str, data: dict[str, Any]) -> None:
        if node in self.trusted:
            self.cpu[node] = (float(data["cpu_s"]), float(data["t"]))
            lag = data.get("lag")
            if isinstance(lag, list) and len(lag) == len(laghist.empty()):
                self.lag[node] = [int(n) for n in lag]

    def worker_cpu(self) -> dict[str, tuple[float, float]]:
        """Latest CPU sample of each live worker, named ``worker N`` (for shapes.loadcpu)."""
        return {f"worker {self.trusted[n]}": p for n, p in self.cpu.items() if n not in self.lost}

    def worker_lag(self) -> dict[str, list[int]]:
        """Latest event-loop lateness histogram of each live worker, named as ``worker_cpu`` names them."""
        return {f"worker {self.trusted[n]}": c for n, c in self.lag.items() if n not in self.lost}

    # -- records --------------------------------------------------------------------------------------------

    def count_record(self, node: str, number: int | None) -> None:
        self.records_seen[node] = self.records_seen.get(node, 0) + 1
        if number is not None:
            self.records_next[node] = max(self.records_next.get(node, 0), int(number) + 1)

    def missing_records(self) -> int:
        """Records a worker numbered but the master never received."""
        return sum(n - self.records_seen.get(node, 0) for node, n in self.records_next.items())

    # -- lost workers ---------------------------------------------------------------------------------------

    def watch(self, runner: MasterRunner, on_lost: Callable[[str, int, int], None]) -> gevent.Greenlet:
        """Poll Locust's worker states; ``on_lost(node, worker_index, users)`` once per lost worker."""

        def loop() -> None:
            while True:
                gevent.sleep(WATCH_EVERY_S)
                self._check(runner, on_lost)

        return gevent.spawn(loop)

    def _check(self, runner: MasterRunner, on_lost: Callable[[str, int, int], None]) -> None:
        for client in list(runner.clients.values()):
            if client.state == STATE_MISSING:
                if client.id in self.trusted and client.id not in self.lost:
                    self._lose(client.id, on_lost)
            else:
                self.users[client.id] = int(client.user_count or 0)

    def _lose(self, node: str, on_lost: Callable[[str, int, int], None]) -> None:
        self.lost.add(node)
        on_lost(node, self.trusted.get(node, -1), self.users.pop(node, 0))
