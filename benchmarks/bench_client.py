"""Which HTTP client should the streaming Locust user read SSE with? Measured, not guessed.

``python benchmarks/bench_client.py [--events 200] [--gap-ms 20] [--ttft-ms 300] [--users 1,20] [--rounds 5]``

Five ways of sending a streamed completion and reading its chunked SSE, each inside a real Locust user run by a
local runner:

* e: ``locustfiles.transport.StreamClient`` + ``locustfiles.sse.iter_events`` (what ``locustfiles.user`` does);
* a: ``HttpUser`` + ``resp.raw.read1(65536)`` + ``locustfiles.sse.iter_events`` (what it did before its own
  client);
* b: ``HttpUser`` + requests ``resp.iter_lines()``;
* c: ``FastHttpUser`` + ``resp._response.readline(b"\\n")`` (geventhttpclient's private API);
* d: ``FastHttpUser`` + ``client.iter_lines`` (``iter_content(chunk_size=1024)``; the known 1,024-byte buffering).

The SSE server is this module with ``--serve``, in its own process so its CPU is not charged to the client. It
stamps every event with the ``time.time()`` at which it wrote it, so the client measures how late each event was
seen (first-event error, and lag of all events) on one clock. CPU cost is ``time.process_time()`` of this process
per parsed event, in a burst (no gaps: parsing cost) and paced (``--gap-ms``: a wake-up per event, as from a real
server). The machine is shared, so clients are interleaved within each round and CPU is reported as a ratio to
(a) taken round by round.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs

import gevent
from gevent.event import Event
from locust import FastHttpUser, HttpUser, constant
from locust.env import Environment
from locust.event import Events

from specbench.locustfiles.sse import DONE, iter_events
from specbench.locustfiles.transport import Endpoint, StreamClient

READ_SIZE = 65536  # as in locustfiles.transport
HEADERS = {"Accept": "text/event-stream", "Accept-Encoding": "identity", "Content-Type": "application/json"}
BODY = {"model": "bench", "messages": [{"role": "user", "content": "hi"}], "stream": True}
EVENT = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench",'
         b'"choices":[{"index":0,"delta":{"content":" tok%d"},"finish_reason":null}],"sent":%.6f}\n\n')
FIRST_ERROR_LIMIT_MS = 2.0
MEASURE_TIMEOUT_S = 60.0
SERVER_LIFETIME_S = 900.0


# -- server (child process) ------------------------------------------------------------------------------------


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _stream(sock: socket.socket, events: int, gap_s: float, ttft_s: float) -> None:
    """Headers at once, first event after ``ttft_s``, one chunk (one send) per event, paced on a schedule."""
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    due = time.perf_counter() + ttft_s
    for i in range(events):
        if i:
            due += gap_s
        delay = due - time.perf_counter()
        if delay > 0:
            gevent.sleep(delay)
        sock.sendall(_chunk(EVENT % (i, time.time())))
    sock.sendall(_chunk(b"data: [DONE]\n\n"))
    sock.sendall(b"0\r\n\r\n")


def _handle(sock: socket.socket, counters: dict[str, int]) -> None:
    """HTTP/1.1 keep-alive loop; the query string says how to stream, ``/stats`` reports counters and closes."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as uvicorn: no Nagle delay on small events
    rfile = sock.makefile("rb")
    streamed = False
    try:
        while True:
            line = rfile.readline(65536)
            if not line:
                return
            target = line.split(b" ")[1]
            length = 0
            while (header := rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
                name, _, value = header.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length:
                rfile.read(length)
            path, _, query = target.partition(b"?")
            if path == b"/stats":
                body = json.dumps(counters).encode()
                head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                sock.sendall(head + body)
                return
            if not streamed:
                streamed = True
                counters["connections"] += 1
            counters["streams"] += 1
            q = {k: v[0] for k, v in parse_qs(query.decode()).items()}
            _stream(sock, int(q.get("events", "20")), float(q.get("gap_ms", "0")) / 1000.0,
                    float(q.get("ttft_ms", "0")) / 1000.0)
    except OSError:
        return
    finally:
        rfile.close()
        sock.close()


def serve() -> None:
    """Run the SSE server on a free loopback port, print it, exit with the parent (or after a bounded life)."""
    from gevent.server import StreamServer

    counters = {"connections": 0, "streams": 0}
    server = StreamServer(("127.0.0.1", 0), lambda sock, _addr: _handle(sock, counters))
    server.start()
    print(f"PORT {server.server_port}", flush=True)
    parent, born = os.getppid(), time.monotonic()
    while os.getppid() == parent and time.monotonic() - born < SERVER_LIFETIME_S:
        gevent.sleep(0.5)
    server.stop(timeout=1)


@contextmanager
def sse_server() -> Iterator[str]:
    """The server as a child process of this module; yields its base URL and always stops it."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"],
                            stdout=subprocess.PIPE, text=True)
    try:
        with gevent.Timeout(30, RuntimeError("SSE server did not start")):
            line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("PORT "):
            raise RuntimeError(f"SSE server said {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def server_counters(base: str) -> dict[str, int]:
    """Connections that carried a stream, and streams served: keep-alive reuse is judged from these."""
    host, port = base.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"GET /stats HTTP/1.1\r\nHost: bench\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


# -- clients ---------------------------------------------------------------------------------------------------


@dataclass
class Record:
    """One streamed request as a client saw it: arrival time (``time.time()``) and payload of every event."""

    start: float
    times: list[float] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    done: bool = False
    error: str | None = None

    def consume(self, events: Iterable[tuple[float, bytes]]) -> None:
        """The same loop for every client, so only reading and splitting differ between them."""
        times, payloads = self.times, self.payloads
        for t, payload in events:
            if payload == DONE:
                self.done = True
            else:
                times.append(t)
                payloads.append(payload)


def line_events(lines: Iterable[bytes], clock: Callable[[], float] = time.time) -> Iterator[tuple[float, bytes]]:
    """SSE events from lines (with or without their newline): ``data`` lines joined, dispatched on a blank line."""
    data: list[bytes] = []
    for raw in lines:
        line = raw.rstrip(b"\r\n")
        if not line:
            if data:
                yield clock(), b"\n".join(data)
                data = []
        elif line.startswith(b"data:"):
            payload = line[5:]
            data.append(payload[1:] if payload.startswith(b" ") else payload)
    if data:
        yield clock(), b"\n".join(data)


@dataclass
class Plan:
    """What every user of one measurement does; the controller waits on its events."""

    path: str
    users: int
    per_user: int
    records: list[Record] = field(default_factory=list)
    arrived: int = 0
    left: int = 0
    all_arrived: Event = field(default_factory=Event)
    go: Event = field(default_factory=Event)
    all_left: Event = field(default_factory=Event)


def run_plan(user: Any) -> None:
    """The single task: wait for the start signal, stream ``per_user`` requests, then idle until quit."""
    plan: Plan = user.environment.bench_plan
    plan.arrived += 1
    if plan.arrived == plan.users:
        plan.all_arrived.set()
    plan.go.wait()
    for _ in range(plan.per_user):
        plan.records.append(user.stream_once(plan.path))
    plan.left += 1
    if plan.left == plan.users:
        plan.all_left.set()
    gevent.sleep(MEASURE_TIMEOUT_S)


class BenchUser:
    """Mixin: one task, no wait, so the user count is the concurrency."""

    tasks: ClassVar[list[Callable[[Any], None]]] = [run_plan]
    wait_time = constant(0)


def _read(resp: Any, rec: Record, events: Callable[[Any], Iterable[tuple[float, bytes]]]) -> Record:
    """Consume one response's events into ``rec``; any error is the record's, and marks Locust's entry failed."""
    try:
        rec.consume(events(resp))
    except Exception as exc:
        rec.error = repr(exc)
    if rec.error or not rec.done:
        resp.failure(rec.error or "stream ended without [DONE]")
    return rec


def _read1_events(resp: Any) -> Iterator[tuple[float, bytes]]:
    raw = resp.raw
    yield from iter_events(lambda: raw.read1(READ_SIZE), clock=time.time)
    raw.release_conn()


class ReadOneUser(BenchUser, HttpUser):
    """(a) The suite's way: ``raw.read1`` returns whatever has arrived, ``SSESplitter`` splits it."""

    def stream_once(self, path: str) -> Record:
        rec = Record(time.time())
        with self.client.post(path, json=BODY, headers=HEADERS, stream=True, catch_response=True, name="a",
                              timeout=(5, 30)) as resp:
            return _read(resp, rec, _read1_events)


class TransportUser(BenchUser, HttpUser):
    """(e) The suite's own client: a prepared request on one keep-alive connection, ``read1`` de-chunked."""

    def stream_once(self, path: str) -> Record:
        if not hasattr(self, "stream_client"):
            self.stream_client = StreamClient(Endpoint(self.client.base_url))
        rec = Record(time.time())
        try:
            headers = {k: v for k, v in HEADERS.items() if k != "Content-Type"}  # the client sends its own
            resp = self.stream_client.post(path, headers, json.dumps(BODY).encode(), (5, 30), lambda: None)
            rec.consume(iter_events(resp.read1, clock=time.time))
            resp.close()
        except Exception as exc:
            rec.error = repr(exc)
        self.environment.events.request.fire(request_type="POST", name="e", response_time=0, response_length=0,
                                             context={}, exception=rec.error and Exception(rec.error))
        return rec


class IterLinesUser(BenchUser, HttpUser):
    """(b) requests' ``iter_lines()``: urllib3 yields each HTTP chunk as it arrives."""

    def stream_once(self, path: str) -> Record:
        rec = Record(time.time())
        with self.client.post(path, json=BODY, headers=HEADERS, stream=True, catch_response=True, name="b",
                              timeout=(5, 30)) as resp:
            return _read(resp, rec, lambda r: line_events(r.iter_lines()))


class FastReadlineUser(BenchUser, FastHttpUser):
    """(c) geventhttpclient's ``readline``: 4 KB recv into a bytearray, lines cut from it (private API)."""

    network_timeout = 30.0

    def stream_once(self, path: str) -> Record:
        rec = Record(time.time())
        with self.client.post(path, json=BODY, headers=HEADERS, stream=True, catch_response=True,
                              name="c") as resp:
            return _read(resp, rec, lambda r: line_events(iter(lambda: r._response.readline(b"\n"), b"")))


class FastIterLinesUser(BenchUser, FastHttpUser):
    """(d) ``FastHttpSession.iter_lines``: ``read(1024)`` waits for 1,024 bytes, so events arrive late."""

    network_timeout = 30.0

    def stream_once(self, path: str) -> Record:
        rec = Record(time.time())
        try:
            lines = self.client.iter_lines(path, method="POST", json=BODY, headers=HEADERS, name="d")
            rec.consume(line_events(line.encode() for line in lines))
        except Exception as exc:
            rec.error = repr(exc)
        return rec


CLIENTS: dict[str, tuple[str, type[Any]]] = {
    "a": ("HttpUser raw.read1+SSESplitter", ReadOneUser),
    "e": ("suite transport read1+SSESplitter", TransportUser),
    "b": ("HttpUser iter_lines", IterLinesUser),
    "c": ("FastHttp _response.readline", FastReadlineUser),
    "d": ("FastHttp iter_lines (1024)", FastIterLinesUser),
}


# -- measurement -----------------------------------------------------------------------------------------------


@dataclass
class Measurement:
    """One client, one configuration, one round."""

    records: list[Record]
    expected_events: int
    cpu_s: float
    connections: int
    failures: int

    @property
    def events(self) -> int:
        return sum(len(r.times) for r in self.records)

    @property
    def us_per_event(self) -> float:
        return self.cpu_s / max(self.events, 1) * 1e6

    @property
    def complete(self) -> int:
        return sum(r.done and r.error is None and len(r.times) == self.expected_events for r in self.records)


def measure(user_class: type[Any], base: str, users: int, per_user: int, events: int, gap_ms: float,
            ttft_ms: float) -> Measurement:
    """Run one Locust local runner; CPU is counted only from the start signal to the last user finishing."""
    path = f"/v1/chat/completions?events={events}&gap_ms={gap_ms:g}&ttft_ms={ttft_ms:g}"
    plan = Plan(path, users, per_user)
    env = Environment(user_classes=[user_class], events=Events(), host=base)
    env.bench_plan = plan  # type: ignore[attr-defined]
    runner = env.create_local_runner()
    before = server_counters(base)
    try:
        runner.start(users, spawn_rate=min(users, 100))
        if not plan.all_arrived.wait(MEASURE_TIMEOUT_S):
            raise RuntimeError("users did not start")
        cpu0 = time.process_time()
        plan.go.set()
        finished = plan.all_left.wait(MEASURE_TIMEOUT_S)
        cpu_s = time.process_time() - cpu0
        if not finished:
            raise RuntimeError(f"{user_class.__name__}: measurement exceeded {MEASURE_TIMEOUT_S:.0f} s")
        failures = env.stats.total.num_failures + len(runner.exceptions)
    finally:
        runner.quit()
    after = server_counters(base)
    return Measurement(plan.records, events, cpu_s, after["connections"] - before["connections"], failures)


@dataclass
class Config:
    """Sizes of the three phases; ``--quick`` shrinks them for the smoke test."""

    events: int
    gap_ms: float
    ttft_ms: float
    users: list[int]
    rounds: int
    acc_events: int = 20
    acc_requests: int = 2
    paced_events: int = 100  # 2 s at 20 ms: enough events that per-request overhead stays a small share
    burst_target: int = 8000  # events per burst measurement, so per-request overhead is amortised alike


def burst_per_user(cfg: Config, users: int) -> int:
    return max(1, -(-cfg.burst_target // (cfg.events * users)))


def run_benchmark(cfg: Config) -> dict[str, dict[str, list[Measurement]]]:
    """All phases, clients interleaved inside each round (order rotated per round): results[key][phase]."""
    keys = list(CLIENTS)
    results: dict[str, dict[str, list[Measurement]]] = {k: {} for k in keys}
    paced_users = max(cfg.users)
    with sse_server() as base:
        for key in keys:  # warm-up: imports, first connections, JIT-free but cache-warm code paths
            measure(CLIENTS[key][1], base, 1, 1, 5, 0, 0)
        for rnd in range(cfg.rounds):
            order = keys[rnd % len(keys):] + keys[:rnd % len(keys)]
            phases: list[tuple[str, int, int, int, float, float]] = [
                ("acc", 1, cfg.acc_requests, cfg.acc_events, cfg.gap_ms, cfg.ttft_ms),
                ("paced", paced_users, 1, cfg.paced_events, cfg.gap_ms, 0.0),
            ]
            phases += [(f"burst{u}", u, burst_per_user(cfg, u), cfg.events, 0.0, 0.0) for u in cfg.users]
            for phase, users, per_user, events, gap_ms, ttft_ms in phases:
                for key in order:
                    m = measure(CLIENTS[key][1], base, users, per_user, events, gap_ms, ttft_ms)
                    results[key].setdefault(phase, []).append(m)
    return results


# -- report ----------------------------------------------------------------------------------------------------


def _sent(payload: bytes) -> float:
    return float(json.loads(payload)["sent"])


def accuracy(ms: list[Measurement]) -> tuple[list[float], list[float], list[float]]:
    """First-event error, TTFT, and every event's lag (arrival minus server send), in ms."""
    first, ttft, lag = [], [], []
    for m in ms:
        for r in m.records:
            if r.times:
                first.append((r.times[0] - _sent(r.payloads[0])) * 1000.0)
                ttft.append((r.times[0] - r.start) * 1000.0)
                lag += [(t - _sent(p)) * 1000.0 for t, p in zip(r.times, r.payloads, strict=True)]
    return first, ttft, lag


def cpu_ratio(results: dict[str, dict[str, list[Measurement]]], key: str, phase: str) -> float:
    """Median over rounds of this client's µs/event over (a)'s in the same round."""
    pairs = zip(results[key][phase], results["a"][phase], strict=True)
    return statistics.median(m.us_per_event / ma.us_per_event for m, ma in pairs)


def report(cfg: Config, results: dict[str, dict[str, list[Measurement]]]) -> tuple[str, str]:
    """The aligned table and the one-line verdict."""
    paced_users = max(cfg.users)
    heads: list[tuple[str, str]] = [("client", ""), ("1st-ev err", "med ms"), ("1st-ev err", "max ms"),
                                    ("TTFT", "med ms"), ("all-ev lag", "med ms")]
    for u in cfg.users:
        heads += [(f"burst u={u}", "kev/CPU-s"), (f"burst u={u}", "µs/ev"), (f"burst u={u}", "× a")]
    heads += [(f"paced u={paced_users}", "µs/ev"), (f"paced u={paced_users}", "× a"), ("complete", "req"),
              ("req/", "conn")]
    rows: list[list[str]] = []
    summary: dict[str, tuple[float, float]] = {}
    main_phase = f"burst{max(cfg.users)}"
    for key, (label, _cls) in CLIENTS.items():
        by_phase = results[key]
        first, ttft, lag = accuracy(by_phase["acc"])
        row = [f"{key} {label}", f"{statistics.median(first):.1f}", f"{max(first):.1f}",
               f"{statistics.median(ttft):.1f}", f"{statistics.median(lag):.1f}"]
        for u in cfg.users:
            us = statistics.median(m.us_per_event for m in by_phase[f"burst{u}"])
            row += [f"{1e3 / us:.1f}", f"{us:.1f}", f"{cpu_ratio(results, key, f'burst{u}'):.2f}"]
        us_paced = statistics.median(m.us_per_event for m in by_phase["paced"])
        row += [f"{us_paced:.1f}", f"{cpu_ratio(results, key, 'paced'):.2f}"]
        everything = [m for ms in by_phase.values() for m in ms]
        done = sum(m.complete for m in everything)
        total = sum(len(m.records) for m in everything)
        conns = sum(m.connections for m in everything)
        row += [f"{done}/{total}" + ("" if sum(m.failures for m in everything) == 0 else " FAIL"),
                f"{total / max(conns, 1):.1f}"]
        rows.append(row)
        summary[key] = (statistics.median(first), cpu_ratio(results, key, main_phase))
    widths = [max(len(h[0]), len(h[1]), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths,
                                                                                             strict=True)))

    lines = [fmt([h[0] for h in heads]), fmt([h[1] for h in heads]), "-" * (sum(widths) + 2 * (len(widths) - 1))]
    table = "\n".join(lines + [fmt(r) for r in rows])
    accurate = [k for k, (err, _) in summary.items() if err < FIRST_ERROR_LIMIT_MS]
    rejected = [f"{k} (+{summary[k][0]:.0f} ms)" for k in summary if k not in accurate]
    if not accurate:
        return table, "verdict: no client kept the first-event error under 2 ms"
    best = min(accurate, key=lambda k: summary[k][1])
    verdict = (f"verdict: {best} ({CLIENTS[best][0]}) is cheapest by CPU at burst u={max(cfg.users)} among clients "
               f"with median first-event error < {FIRST_ERROR_LIMIT_MS:g} ms; "
               + ", ".join(f"{k} {summary[k][1]:.2f}×a" for k in accurate)
               + (f"; rejected for accuracy: {', '.join(rejected)}" if rejected else ""))
    return table, verdict


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=200, help="events per burst request (default 200)")
    p.add_argument("--gap-ms", type=float, default=20.0, help="gap between events when paced (default 20)")
    p.add_argument("--ttft-ms", type=float, default=300.0, help="first-event delay, accuracy phase (default 300)")
    p.add_argument("--users", default="1,20", help="concurrent users for the burst phase; paced uses the max")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--quick", action="store_true", help="tiny configuration for the smoke test")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve()
        return 0
    cfg = Config(args.events, args.gap_ms, args.ttft_ms, [int(u) for u in args.users.split(",")], args.rounds)
    if args.quick:
        cfg = Config(events=20, gap_ms=5.0, ttft_ms=50.0, users=[1, 4], rounds=1, acc_events=5, acc_requests=1,
                     paced_events=10, burst_target=400)
    if min(cfg.users) < 1 or cfg.rounds < 1 or cfg.events < 1:
        raise SystemExit("--users, --rounds and --events must be positive")
    t0 = time.perf_counter()
    results = run_benchmark(cfg)
    table, verdict = report(cfg, results)
    print(f"SSE client benchmark: accuracy {cfg.acc_events} events, TTFT {cfg.ttft_ms:g} ms, gap {cfg.gap_ms:g} ms, "
          f"1 user; burst {cfg.events} events/request, ~{cfg.burst_target} events per measurement; paced "
          f"{cfg.paced_events} events at {cfg.gap_ms:g} ms; {cfg.rounds} interleaved rounds; "
          f"CPU = this process's process_time per event (server in a child process)")
    print(table)
    print(verdict)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
