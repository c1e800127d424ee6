"""A worker quits, exit code 3 and one line, once its master is gone.

Locust's own check waits 60 s, while the worker's users keep loading the server for a run nobody records and
its log fills with connection errors, then exits 0. Two signs of a master gone, both watched here:

* its connection closed and not opened again within ``MASTER_GONE_S`` (a master process that exited or was
  killed: the kernel closes its socket at once, so the worker knows within a second or two);
* no heartbeat answer for ``MASTER_LOST_S`` (a master hung or its machine unreachable; the master answers each
  heartbeat every second, so a few seconds of silence is a master paused or busy, not gone).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent
import zmq.green as zmq
from zmq.utils.monitor import recv_monitor_message

from specbench.contract.policy import MASTER_GONE_S, MASTER_LOST_S

log = logging.getLogger(__name__)


def watch_master(runner: Any, quit_worker: Callable[[str], None]) -> None:
    """Start both watches on a Locust ``WorkerRunner``; ``quit_worker(reason)`` is called once, by the first."""
    said: list[str] = []

    def once(reason: str) -> None:
        if not said:
            said.append(reason)
            quit_worker(reason)

    gevent.spawn(_watch_heartbeats, runner, once)
    monitor = _monitor_socket(runner)
    if monitor is not None:
        gevent.spawn(_watch_connection, monitor, once)


def _watch_heartbeats(runner: Any, quit_worker: Callable[[str], None]) -> None:
    while True:
        gevent.sleep(1.0)
        last = runner.last_heartbeat_timestamp
        if last is not None and time.time() - last > MASTER_LOST_S:
            quit_worker(f"the master stopped answering (no heartbeat for {time.time() - last:.0f} s)")
            return


def _monitor_socket(runner: Any) -> Any | None:
    """A socket reporting the worker's connection events, or None where this Locust's client has none."""
    try:
        return runner.client.socket.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
    except (AttributeError, zmq.ZMQError) as exc:
        log.debug("no connection monitor (%s); a gone master is found by its heartbeats alone", exc)
        return None


def _watch_connection(monitor: Any, quit_worker: Callable[[str], None]) -> None:
    pending: gevent.Greenlet | None = None  # the quit due if the connection is not opened again
    while True:
        try:
            event = recv_monitor_message(monitor)["event"]
        except zmq.ZMQError:  # the worker is closing its own socket
            return
        if event == zmq.EVENT_DISCONNECTED and pending is None:
            pending = gevent.spawn_later(MASTER_GONE_S, quit_worker,
                                         f"the master closed its connection and has not come back in "
                                         f"{MASTER_GONE_S:.0f} s")
        elif event == zmq.EVENT_CONNECTED and pending is not None:
            pending.kill(block=False)
            pending = None
