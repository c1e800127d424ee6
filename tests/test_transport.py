"""The users' HTTP/1.1 client against a scripted TCP server on 127.0.0.1: framing, reuse, resend, failures.

The server is real (a listening socket, a thread per connection) and plays, per connection, a list of answers,
each written in pieces with pauses, so bodies arrive split at awkward places; it keeps every request it read.
What the emulator and llama-server tests cannot choose (trailers, 1xx heads, a close after the select check,
framing errors) is played here.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from specbench.contract.receiveclock import KERNEL_STAMPS
from specbench.locustfiles.transport import BrokenStream, Endpoint, SendFailed, StreamClient, endpoint

TIMEOUT = (2.0, 2.0)
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunked(*payloads: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n\r\n"


@dataclass
class Script:
    """Per connection (in accept order): its answers, each a list of byte pieces; None closes the connection
    without answering. After a connection's answers it is closed (``linger``: kept open that long first)."""

    connections: list[list[list[bytes] | None]]
    pause_s: float = 0.002
    linger_s: float = 5.0
    requests: list[tuple[int, bytes]] = field(default_factory=list)  # (connection index, request head)


def _read_request(conn: socket.socket, buf: bytes) -> tuple[bytes, bytes] | None:
    while b"\r\n\r\n" not in buf:
        block = conn.recv(65536)
        if not block:
            return None
        buf += block
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        rest += conn.recv(65536)
    return head, rest[length:]


@contextmanager
def scripted(script: Script) -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve(index: int, conn: socket.socket) -> None:
        buf = b""
        with conn:
            for answer in script.connections[index]:
                got = _read_request(conn, buf)
                if got is None:
                    return
                head, buf = got
                script.requests.append((index, head))
                if answer is None:
                    return  # closed without a byte of response
                for piece in answer:
                    conn.sendall(piece)
                    time.sleep(script.pause_s)
            stop.wait(script.linger_s)

    def accept() -> None:
        index = 0
        while not stop.is_set() and index < len(script.connections):
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(index, conn), daemon=True).start()
            index += 1

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def read_all(resp) -> bytes:
    parts = []
    while block := resp.read1():
        parts.append(block)
    return b"".join(parts)


def post(client: StreamClient, sends: list[int] | None = None, path: str = "/generate"):
    return client.post(path, {"Accept": "text/event-stream"}, b'{"text":"x"}', TIMEOUT,
                       lambda: sends.append(1) if sends is not None else None)


def test_chunks_split_anywhere_arrive_whole_and_the_connection_is_reused() -> None:
    body = chunked(b"data: {\"a\":1}\n\n", b"data: [DONE]\n\n")
    pieces = [CHUNKED_HEAD[:20], CHUNKED_HEAD[20:] + body[:3], body[3:9], body[9:-3], body[-3:]]
    answer_2 = [CHUNKED_HEAD + chunked(b"data: two\n\n")]
    script = Script([[pieces, answer_2]])
    with scripted(script) as url:
        client = StreamClient(Endpoint(url))
        resp = post(client)
        assert resp.status_code == 200 and resp.headers["content-type"] == "text/event-stream"
        assert read_all(resp) == b"data: {\"a\":1}\n\ndata: [DONE]\n\n" and resp.done
        assert read_all(post(client)) == b"data: two\n\n"
    assert [index for index, _ in script.requests] == [0, 0]  # one connection for both
    head = script.requests[0][1].decode()
    assert head.startswith("POST /generate HTTP/1.1\r\n") and "Content-Length: 12" in head
    assert f"Host: 127.0.0.1:{url.rsplit(':', 1)[1]}" in head and "Accept: text/event-stream" in head


def test_one_chunk_per_read_each_read_returns_its_chunk() -> None:
    """Servers write one event per chunk: each read then holds exactly one chunk (the client's quick path)."""
    events = [b"data: %d\n\n" % i for i in range(5)]
    script = Script([[[CHUNKED_HEAD, *(chunked(e)[:-5] for e in events), b"0\r\n\r\n"]]], pause_s=0.02)
    with scripted(script) as url:
        resp = post(StreamClient(Endpoint(url)))
        reads = []
        while block := resp.read1():
            reads.append(block)
    assert reads == events and resp.done


def test_interim_heads_trailers_and_chunk_extensions_are_read_past() -> None:
    answer = [b"HTTP/1.1 100 Continue\r\n\r\n", CHUNKED_HEAD,
              b"5;name=value\r\nhello\r\n0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n"]
    script = Script([[answer, [CHUNKED_HEAD + chunked(b"again")]]])
    with scripted(script) as url:
        client = StreamClient(Endpoint(url))
        assert read_all(post(client)) == b"hello"
        assert read_all(post(client)) == b"again"
    assert [index for index, _ in script.requests] == [0, 0]


def test_sized_and_close_delimited_bodies() -> None:
    sized = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 11\r\n\r\n", b"data: a\n\n",
             b"\n\n"]
    by_close = [b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: b\n\n"]
    script = Script([[sized, by_close], [[CHUNKED_HEAD + chunked(b"c")]]], linger_s=0.0)
    with scripted(script) as url:
        client = StreamClient(Endpoint(url))
        assert read_all(post(client)) == b"data: a\n\n\n\n"
        assert read_all(post(client)) == b"data: b\n\n"  # ends when the server closes
        assert read_all(post(client)) == b"c"  # HTTP/1.0: not kept, so a new connection
    assert [index for index, _ in script.requests] == [0, 0, 1]


def test_a_kept_connection_the_server_closed_is_replaced_before_the_send() -> None:
    """llama-server's habit: the connection is closed soon after each streamed response, without saying so."""
    script = Script([[[CHUNKED_HEAD + chunked(b"one")]], [[CHUNKED_HEAD + chunked(b"two")]]], linger_s=0.0)
    with scripted(script) as url:
        client = StreamClient(Endpoint(url))
        assert read_all(post(client)) == b"one"
        time.sleep(0.2)  # the server has closed it by now
        sends: list[int] = []
        assert read_all(post(client, sends)) == b"two"
    assert sends == [1] and [index for index, _ in script.requests] == [0, 1]


def test_a_request_lost_by_a_reused_connection_is_sent_once_more_on_a_new_one() -> None:
    """The close comes after the reuse check: the server read the request and closed without a byte."""
    script = Script([[[CHUNKED_HEAD + chunked(b"one")], None], [[CHUNKED_HEAD + chunked(b"two")]]])
    with scripted(script) as url:
        client = StreamClient(Endpoint(url))
        assert read_all(post(client)) == b"one"
        sends: list[int] = []
        assert read_all(post(client, sends)) == b"two"
    assert sends == [1]  # the send moment is the first write's
    assert [index for index, _ in script.requests] == [0, 0, 1]


def test_a_new_connection_closed_without_answer_is_a_connect_error_not_resent() -> None:
    script = Script([[None], [[CHUNKED_HEAD + chunked(b"never")]]])
    with scripted(script) as url:
        client = StreamClient(Endpoint(url))
        with pytest.raises(SendFailed) as failed:
            post(client)
    assert failed.value.status == "connect_error" and failed.value.reason == "RemoteDisconnected"
    assert len(script.requests) == 1


def test_broken_bodies_raise_broken_stream() -> None:
    cases = {
        "closed inside": [CHUNKED_HEAD, b"a\r\ndata: x"],
        "bad size": [CHUNKED_HEAD, b"zz\r\nhello\r\n"],
        "no crlf after data": [CHUNKED_HEAD, b"5\r\nhelloXX0\r\n\r\n"],
        "closed inside sized": [b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort"],
    }
    for why, answer in cases.items():
        script = Script([[answer]], linger_s=0.0)
        with scripted(script) as url:
            client = StreamClient(Endpoint(url))
            resp = post(client)
            with pytest.raises(BrokenStream):
                read_all(resp)
            resp.close()
        assert client._sock is None, why  # a broken connection is never reused


def test_compressed_and_non_http_answers_are_broken_streams() -> None:
    for answer in ([b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nxx"],
                   [b"SSH-2.0-OpenSSH_9.6\r\n\r\n"]):
        with scripted(Script([[answer]])) as url:
            client = StreamClient(Endpoint(url))
            with pytest.raises(BrokenStream):
                post(client)
        assert client._sock is None


def test_silence_is_a_timeout_before_and_after_the_head() -> None:
    with scripted(Script([[[b""]]], linger_s=3.0)) as url:  # reads the request, answers nothing
        client = StreamClient(Endpoint(url))
        started = time.monotonic()
        with pytest.raises(SendFailed) as failed:
            client.post("/x", {}, b"{}", (2.0, 0.3), lambda: None)
        assert failed.value.status == "timeout" and time.monotonic() - started < 2.0
    with scripted(Script([[[CHUNKED_HEAD, b"3\r\nabc\r\n"]]], linger_s=3.0)) as url:
        client = StreamClient(Endpoint(url))
        resp = client.post("/x", {}, b"{}", (2.0, 0.3), lambda: None)
        assert resp.read1() == b"abc"
        with pytest.raises(TimeoutError):
            resp.read1()


def test_no_listener_is_a_connect_error_and_on_send_never_runs() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    sends: list[int] = []
    with pytest.raises(SendFailed) as failed:
        post(StreamClient(Endpoint(f"http://127.0.0.1:{port}")), sends)
    assert failed.value.status == "connect_error" and sends == []


def test_url_credentials_and_path_prefix() -> None:
    script = Script([[[CHUNKED_HEAD + chunked(b"ok")]]])
    with scripted(script) as url:
        host = url.removeprefix("http://")
        client = StreamClient(Endpoint(f"http://us%40er:p%3Ass@{host}/api/"))
        assert read_all(post(client, path="/v1/completions")) == b"ok"
    head = script.requests[0][1].decode()
    assert head.startswith("POST /api/v1/completions HTTP/1.1\r\n")
    assert f"Authorization: Basic {base64.b64encode(b'us@er:p:ss').decode()}" in head
    assert f"Host: {host}" in head and "us%40er" not in head


def test_endpoint_refuses_what_is_not_http() -> None:
    for url in ("ftp://127.0.0.1/", "127.0.0.1:80", "http://"):
        with pytest.raises(ValueError):
            Endpoint(url)


def test_https_endpoints_verify_by_default_and_share_one_tls_context() -> None:
    loose = endpoint("https://127.0.0.1:8443/", False)
    assert loose is endpoint("https://127.0.0.1:8443/", False)  # all users of a process: one CA store load
    assert loose.tls is not None and loose.tls.verify_mode == ssl.CERT_NONE and not loose.tls.check_hostname
    assert loose.host_header == "127.0.0.1:8443" and loose.prefix == ""
    strict = Endpoint("https://h.example/")
    assert strict.tls is not None and strict.tls.verify_mode == ssl.CERT_REQUIRED and strict.tls.check_hostname
    assert strict.address == ("h.example", 443) and strict.host_header == "h.example"
    assert Endpoint("http://[::1]:8000").host_header == "[::1]:8000"


def test_the_read_timeout_on_the_event_loop() -> None:
    """In a gevent-patched process (every load process) the read timeout is one timer per request
    (``locustfiles.silence``): silence before and after the head is a timeout after the limit, bytes that keep
    coming are never one, and a finished request leaves nothing to fire while its user is idle."""
    script = Path(__file__).resolve().parent / "scripts" / "green_silence.py"
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["green"], "the load process's path was not taken"
    assert out["before_head"] == "timeout" and 0.28 <= out["before_head_s"] < 2.0, out
    assert out["after_head"] == "timeout" and 0.28 <= out["after_head_s"] < 2.0, out
    assert out["trickle"] == "01234567" and out["trickle_s"] >= 0.7, out
    assert out["idle_between"] == ["one", "two"], out


@pytest.mark.skipif(not KERNEL_STAMPS, reason="kernel receive stamps: Linux on x86-64 or arm64")
def test_a_read_made_late_carries_the_time_its_bytes_arrived() -> None:
    """Kernel receive stamps (``SO_TIMESTAMPNS``): the first event is read 150 ms after it arrived, yet the
    response's ``stamp`` for it is its arrival; the later events, 300 ms apart at the server, carry stamps 300 ms
    apart. A client that does not ask for stamps reads the same bytes with ``stamp`` None."""
    events = [b"data: %d\n\n" % i for i in range(3)]
    pieces = [CHUNKED_HEAD + chunked(events[0])[:-5], *(chunked(e)[:-5] for e in events[1:]), b"0\r\n\r\n"]
    script = Script([[pieces], [pieces]], pause_s=0.3)
    with scripted(script) as url:
        for stamped in (True, False):
            client = StreamClient(Endpoint(url), kernel_stamps=stamped)
            resp = post(client)
            time.sleep(0.15)  # a busy load process: the first event waits in the socket
            stamps, lates = [], []
            while resp.read1():
                stamps.append(resp.stamp)
                lates.append(time.time() - resp.stamp if resp.stamp is not None else None)
            client.close()
            if not stamped:
                assert stamps == [None, None, None]
                continue
            assert len(stamps) == 3 and all(s is not None for s in stamps), stamps
            assert lates[0] is not None and lates[0] > 0.1, lates  # stamped at arrival, not at the late read
            assert all(late is not None and late < 0.05 for late in lates[1:]), lates  # read as they came
            gaps = [b - a for a, b in itertools.pairwise(stamps)]
            assert all(0.25 < g < 0.4 for g in gaps), gaps


def _stamp_into(times: list[float]) -> None:
    times.append(time.perf_counter())


def test_write_time_is_the_hand_over_of_the_request_to_the_kernel() -> None:
    """``written`` is when every byte of the request was in the kernel's hands: at once for a small request; for
    one larger than the socket buffers (32 MB) only after the server, which waits 0.3 s before reading, took in
    what the buffers could not hold."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5.0)

    def serve() -> None:
        for delay_s in (0.0, 0.3):
            conn, _ = listener.accept()
            with conn:
                time.sleep(delay_s)
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(65536)
                head, _, left = head.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]) - len(left)
                while length > 0:  # the body, counted, not kept
                    length -= len(conn.recv(1 << 20))
                conn.sendall(CHUNKED_HEAD + chunked(b"data: [DONE]\n\n"))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        took = []
        for body in (b'{"text":"x"}', b"x" * (32 << 20)):
            client = StreamClient(Endpoint(url))
            began: list[float] = []
            resp = client.post("/generate", {}, body, (2.0, 10.0), functools.partial(_stamp_into, began))
            assert read_all(resp).endswith(b"[DONE]\n\n")
            assert client.written is not None and len(began) == 1
            took.append(client.written - began[0])
            client.close()
        assert took[0] < 0.1, took
        assert took[1] >= 0.25, took
    finally:
        thread.join(10)
        listener.close()
