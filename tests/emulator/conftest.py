"""Shared fixtures: emulators started in-process (thread mode here) and a plain stdlib HTTP client.

The client is deliberately independent of ``benchmarks/loadclient.py``: protocol tests parse the wire with
``http.client`` and ``json`` only. Test files are named ``test_emu_*`` to stay unique in the repo.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

from specbench.emulator import EmulatorHandle, start_emulator

FAST = 50.0


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class StreamReply:
    status: int
    headers: dict[str, str]
    payloads: list[str] = field(default_factory=list)
    complete: bool = True
    body: bytes = b""

    @property
    def events(self) -> list[Any]:
        """Parsed JSON payloads, without the final [DONE]."""
        return [json.loads(p) for p in self.payloads if p != "[DONE]"]


class Http:
    """Blocking stdlib client bound to one emulator URL."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port

    def _conn(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=30)

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Reply:
        conn = self._conn()
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        try:
            conn.request(method, path, body=data, headers={"content-type": "application/json"})
            resp = conn.getresponse()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()

    def post(self, path: str, body: Any) -> Reply:
        return self.request("POST", path, body)

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def stream(self, path: str, body: dict[str, Any]) -> StreamReply:
        conn = self._conn()
        try:
            conn.request("POST", path, body=json.dumps(body).encode(), headers={"content-type": "application/json"})
            resp = conn.getresponse()
            reply = StreamReply(resp.status, {k.lower(): v for k, v in resp.getheaders()})
            try:
                data = resp.read()
            except http.client.IncompleteRead as exc:
                data, reply.complete = exc.partial, False
            reply.body = data
            for block in data.decode().split("\n\n"):
                if block.startswith("data: "):
                    reply.payloads.append(block[len("data: "):])
            return reply
        finally:
            conn.close()


@pytest.fixture(scope="session")
def baseline() -> Iterator[EmulatorHandle]:
    handle = start_emulator("baseline", speed=FAST)
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def eagle3() -> Iterator[EmulatorHandle]:
    handle = start_emulator("eagle3", speed=FAST)
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def base_http(baseline: EmulatorHandle) -> Http:
    return Http(baseline.url)


@pytest.fixture(scope="session")
def spec_http(eagle3: EmulatorHandle) -> Http:
    return Http(eagle3.url)


@pytest.fixture
def make_http() -> type[Http]:
    return Http
