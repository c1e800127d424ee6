"""The moment a request goes on the wire: a hook in urllib3's connection, just before its bytes are written.

Why: a record's ``start_s``/``t0`` used to be taken before requests prepared the body and urllib3 took a
connection from its pool; a yield anywhere on that path (a connect, or the hub running other users' end-of-request
work) went into TTFT as if the server had been slow. The user registers a callback for its next request
(``on_wire``); the connection calls it once, after any connect and immediately before its first byte is written,
so the callback's clock readings are the send. Callbacks are greenlet-local: each Locust user is a greenlet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gevent.local import local
from gevent.monkey import get_original
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_pending = local()
_select = get_original("select", "select")


def on_wire(callback: Callable[[], None] | None) -> None:
    """Call ``callback`` once, just before this greenlet's next request is written (None: forget it)."""
    _pending.callback = callback


def _fire() -> None:
    callback = getattr(_pending, "callback", None)
    if callback is not None:
        _pending.callback = None  # once: a retried request keeps the first send's time
        callback()


def _still_open(sock: Any) -> bool:
    """urllib3's check of a pooled connection before reuse (nothing to read on it: not closed by the server),
    made with the unpatched ``select``. Why: gevent's ``select`` with a zero timeout also yields to the hub,
    so every reuse queued the user behind every other ready greenlet between its stream's end and its next
    send; when many streams ended together that wait was most of the send lag. Same answer, no yield."""
    readable, _w, _x = _select([sock], [], [], 0.0)
    return not readable


class _Timed:
    """urllib3's connection, connected first (lazily, as http.client would), then stamped, then written; its
    reuse check without a yield (``_still_open``). One mixin for the plain and the TLS connection."""

    sock: Any

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is None:
            self.connect()  # type: ignore[attr-defined]  # the connection class this is mixed into has it
        _fire()
        super().request(*args, **kwargs)  # type: ignore[misc]

    @property
    def is_connected(self) -> bool:
        return self.sock is not None and _still_open(self.sock)


class TimedHTTPConnection(_Timed, HTTPConnection):  # type: ignore[misc]
    """Plain HTTP, timed."""


class TimedHTTPSConnection(_Timed, HTTPSConnection):  # type: ignore[misc]
    """TLS, timed."""


class TimedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = TimedHTTPConnection


class TimedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = TimedHTTPSConnection


def install(adapter: Any) -> None:
    """Make a requests ``HTTPAdapter`` open timed connections (its pool manager's pools, per scheme)."""
    adapter.poolmanager.pool_classes_by_scheme = {"http": TimedHTTPConnectionPool,
                                                   "https": TimedHTTPSConnectionPool}
