"""The read timeout in a gevent-patched process (every load process): one timer per request
(``locustfiles.silence``), against the scripted servers of tests/test_transport.py. Run by that test module in
its own process, because Locust must monkey-patch first; prints JSON, one entry per case."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import gevent
import locust  # noqa: F401  (monkey-patches before the suite is imported)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specbench.locustfiles.transport import SendFailed, StreamClient, endpoint
from tests.test_transport import CHUNKED_HEAD, Script, chunked, read_all, scripted

LIMIT = (2.0, 0.3)


def main() -> int:
    out: dict[str, object] = {}
    with scripted(Script([[[b""]]], linger_s=3.0)) as url:  # reads the request, answers nothing
        client = StreamClient(endpoint(url))
        began = time.monotonic()
        try:
            client.post("/x", {}, b"{}", LIMIT, lambda: None)
            out["before_head"] = "answered"
        except SendFailed as exc:
            out["before_head"] = exc.status
        out["before_head_s"] = time.monotonic() - began
        out["green"] = client.silence is not None
    with scripted(Script([[[CHUNKED_HEAD, b"3\r\nabc\r\n"]]], linger_s=3.0)) as url:
        resp = StreamClient(endpoint(url)).post("/x", {}, b"{}", LIMIT, lambda: None)
        began = time.monotonic()
        try:
            out["after_head"] = [resp.read1().decode(), resp.read1().decode()]
        except TimeoutError:
            out["after_head"] = "timeout"
        out["after_head_s"] = time.monotonic() - began
        resp.close()
    trickle = [CHUNKED_HEAD, *(b"1\r\n%d\r\n" % i for i in range(8)), b"0\r\n\r\n"]
    with scripted(Script([[trickle]], pause_s=0.1)) as url:  # a byte every 0.1 s for 0.8 s: never silent 0.3 s
        began = time.monotonic()
        resp = StreamClient(endpoint(url)).post("/x", {}, b"{}", LIMIT, lambda: None)
        out["trickle"] = read_all(resp).decode()
        out["trickle_s"] = time.monotonic() - began
    with scripted(Script([[[CHUNKED_HEAD, chunked(b"one")], [CHUNKED_HEAD, chunked(b"two")]]])) as url:
        client = StreamClient(endpoint(url))
        first = read_all(client.post("/x", {}, b"{}", LIMIT, lambda: None))
        gevent.sleep(0.6)  # idle twice the limit between requests: nothing is raised in this greenlet
        second = read_all(client.post("/x", {}, b"{}", LIMIT, lambda: None))
        out["idle_between"] = [first.decode(), second.decode()]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
