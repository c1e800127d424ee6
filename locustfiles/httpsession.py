"""The one way the suite opens a ``requests`` session (preflight, server info, /metrics, readiness probes).

Why one place: each of them must trust the same certificates (``contract.tls``), ignore the proxy and netrc
environment (a benchmark's requests go to the server named, never elsewhere), and read an answer the way the
load client does. That last point is why this is more than ``requests.Session()``: Python's ``http.client``
skips only ``100 Continue`` and takes any other interim 1xx head (``103 Early Hints``, sent before the real
answer by some proxies and servers) for the answer itself, so a preflight saw "HTTP 103" where the load client
(``locustfiles.transport``) reads through it to the 200. Here every 1xx head except ``101`` is skipped too.
"""

from __future__ import annotations

import http.client
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from specbench.contract import tls


class _SkipInterimResponse(http.client.HTTPResponse):
    """An ``HTTPResponse`` whose status line is the first one outside 1xx (``101`` ends the skipping)."""

    def _read_status(self) -> tuple[str, int, str]:
        while True:
            version, status, reason = super()._read_status()  # type: ignore[misc]  # private, stable since 3.0
            if not 100 <= status < 200 or status == 101:
                return version, status, reason
            http.client._read_headers(self.fp)  # type: ignore[attr-defined]  # the interim head's fields


class _Connection(HTTPConnection):
    response_class = _SkipInterimResponse


class _TlsConnection(HTTPSConnection):
    response_class = _SkipInterimResponse


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TlsPool(HTTPSConnectionPool):
    ConnectionCls = _TlsConnection


class _Adapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _TlsPool}


def new_session() -> requests.Session:
    """A session with the suite's trust (``--ca-bundle`` or the standard variables), no proxy or netrc from the
    environment, and interim 1xx answers skipped."""
    session = requests.Session()
    session.trust_env = False
    session.verify = tls.verify()
    adapter = _Adapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
