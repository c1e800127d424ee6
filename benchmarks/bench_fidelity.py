"""Does the client measure the server, not itself? TTFT error, send lag and SSE capacity, in one run.

    .venv/bin/python benchmarks/bench_fidelity.py [--seconds 8] [--flood-users 64] [--rounds 2]

Three measurements, each a real headless Locust run of the suite (one load process) against the emulator, judged
against the emulator's ledger (its own receive time ``arrival_s`` and first-token write time ``first_token_s`` per
request id):

* C=8, a server that streams 100 tok/s (10 ms decode steps): TTFT error = the record's ``ttft_s`` minus the
  server's own ``first_token_s - arrival_s``, median and p90; send lag (``send_lag_ms``), the server's receive
  after ``start_s`` (``arrival_s - start_s``) and the turnaround as the server saw it (a request's ``arrival_s``
  after its user's previous request's ``finished_s``: the send lag plus the time the end of the stream waited
  in the client before its read returned);
* C=250, lock-step endings: 40 ms decode steps, every request admitted in one step and ending in one step (the
  emulator starts the request that wakes it alone; the other 249 share steps), so 249 streams end together;
* flood, C=64 against the baseline profile at speed 100 (decode steps well under a millisecond): SSE events/s and
  CPU per event of the suite (the step's ``load_cpu``) and of a minimal raw client (``--raw``: this module in a
  child process, stdlib threads and ``http.client``, counting ``data:`` events), interleaved round by round and
  printed as ratios (the machine is shared).

Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from specbench.loadrun import LOCUSTFILE  # noqa: E402
from specbench.locustfiles.target import start_emulator_process  # noqa: E402

STREAM_PROFILE = """base: baseline
step_a_ms: {step_ms}
step_b_ms: 0.0
prefill_ms_per_token: 0.0
max_running_requests: 512
"""


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def suite_run(url: str, users: int, seconds: float, max_tokens: int, out: Path,
              processes: int = 0, clock: str = "kernel") -> tuple[dict, list[dict]]:
    """One ladder step of ``users`` users for about ``seconds`` of window (``processes`` load processes, 0: one);
    its step line and records."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary", "--host", url,
           "--out", str(out), "--label", f"c{users}", "--ladder", str(users), "--max-tokens", str(max_tokens),
           "--min-requests", "1", "--min-step-time", str(seconds), "--max-step-time", str(seconds * 3),
           "--step-ci", "0", "--receive-clock", clock, *(["--processes", str(processes)] if processes else [])]
    subprocess.run(cmd, check=True, capture_output=True, timeout=seconds * 6 + 90, cwd=out.parent)
    step = json.loads((out / "steps.jsonl").read_text().splitlines()[0])
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return step, records


def ledger(url: str) -> dict[str, dict]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("GET", "/_emulator/requests?clear=1")
    entries = json.loads(conn.getresponse().read())
    conn.close()
    return {e["rid"]: e for e in entries}


def fidelity(url: str, users: int, seconds: float, max_tokens: int, tmp: Path,
             processes: int = 0, clock: str = "kernel") -> dict[str, float]:
    """TTFT error against the ledger, send lag and server receive delay over the window's ok requests."""
    ledger(url)  # cleared
    step, records = suite_run(url, users, seconds, max_tokens, tmp / f"c{users}-{clock}", processes, clock)
    truth = ledger(url)
    t0, t1 = step["steady_start_s"], step["end_s"]
    errors, received, lags, gaps, reads, recv_lags = [], [], [], [], [], []
    previous: dict[str, dict] = {}  # per user, the ledger entry of its last request
    for r in sorted(records, key=lambda r: r["start_s"]):
        e = truth.get(r.get("server_request_id") or "")
        before, previous[r["user"]] = previous.get(r["user"]), e
        if r["status"] != "ok" or e is None or not (t0 <= r["start_s"] and r["start_s"] + r["e2e_s"] <= t1):
            continue
        errors.append(1000 * (r["ttft_s"] - (e["first_token_s"] - e["arrival_s"])))
        received.append(1000 * (e["arrival_s"] - r["start_s"]))
        reads.append(1000 * (r["start_s"] + r["ttft_s"] - e["first_token_s"]))
        if r.get("recv_lag_ms") is not None:
            recv_lags.append(r["recv_lag_ms"])
        if r.get("send_lag_ms") is not None:
            lags.append(r["send_lag_ms"])
        if before is not None and before.get("finished_s") is not None:
            gaps.append(1000 * (e["arrival_s"] - before["finished_s"]))
    return {"n": len(errors), "err_p50": pct(errors, 50), "err_p90": pct(errors, 90),
            "recv_p50": pct(received, 50), "recv_p90": pct(received, 90),
            "read_p50": pct(reads, 50), "read_p90": pct(reads, 90), "rlag_p90": pct(recv_lags, 90),
            "lag_p50": pct(lags, 50), "lag_p90": pct(lags, 90), "gap_p50": pct(gaps, 50), "gap_p90": pct(gaps, 90),
            "cpu": max(step.get("load_cpu", {"-": float("nan")}).values()), "flags": ",".join(step["flags"]) or "-"}


def suite_flood(url: str, users: int, seconds: float, tmp: Path, clock: str = "kernel") -> tuple[float, float]:
    """Events/s (chunks with output, in the window) and CPU us per event (the step's load_cpu over all chunks)."""
    step, records = suite_run(url, users, seconds, 256, tmp, clock=clock)
    t0, t1 = step["steady_start_s"], step["end_s"]
    events = sum(1 for r in records for ms in r["chunk_ms"] if t0 <= r["start_s"] + ms / 1000.0 < t1)
    cpu_s = sum(step.get("load_cpu", {}).values()) / 100.0 * (t1 - step["start_s"])
    all_events = sum(len(r["chunk_ms"]) for r in records if r["start_s"] >= step["start_s"] - 1)
    return events / (t1 - t0), 1e6 * cpu_s / max(all_events, 1)


# -- the raw client (child process) ------------------------------------------------------------------------------


def raw_client(url: str, users: int, seconds: float) -> None:
    """Stdlib threads, one keep-alive ``http.client`` connection each, counting ``data:`` events; prints JSON."""
    parts = urlsplit(url)
    body = json.dumps({"text": "Say something long.", "stream": True,
                       "sampling_params": {"max_new_tokens": 256, "ignore_eos": True}}).encode()
    counts = [0] * users
    stop = threading.Event()

    def worker(i: int) -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        while not stop.is_set():
            conn.request("POST", "/generate", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            while chunk := resp.read1(65536):
                counts[i] += chunk.count(b"data:") - chunk.count(b"data: [DONE]")
        conn.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(users)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # warm-up
    c0, cpu0, w0 = sum(counts), time.process_time(), time.perf_counter()
    time.sleep(seconds)
    c1, cpu1, w1 = sum(counts), time.process_time(), time.perf_counter()
    stop.set()
    events = c1 - c0
    print(json.dumps({"events_s": events / (w1 - w0), "cpu_us_per_event": 1e6 * (cpu1 - cpu0) / max(events, 1)}))


def raw_flood(url: str, users: int, seconds: float) -> tuple[float, float]:
    proc = subprocess.run([sys.executable, __file__, "--raw", url, "--flood-users", str(users), "--seconds",
                           str(seconds)], check=True, capture_output=True, text=True, timeout=seconds + 120)
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["events_s"], data["cpu_us_per_event"]


# -- main -------------------------------------------------------------------------------------------------------


def timing_part(seconds: float, tmp: Path, processes: int = 0, clocks: tuple[str, ...] = ("kernel", "user")) -> None:
    print("TTFT error = record ttft_s - (ledger first_token_s - arrival_s); recv = arrival_s - start_s; read = the "
          "first token's time in the record (start_s + ttft_s) - the ledger's first_token_s (the receive side alone); "
          "rlag = the records' recv_lag_ms (read after the kernel's stamp); gap = the server's view of the user's "
          "turnaround, ledger arrival_s of its request - finished_s of its previous (ms)")
    print(f"{'case':<32} {'n':>5} {'err p50':>8} {'err p90':>8} {'lag p50':>8} {'lag p90':>8} {'recv p50':>9} "
          f"{'recv p90':>9} {'read p50':>9} {'read p90':>9} {'rlag p90':>9} {'gap p50':>8} {'gap p90':>8} "
          f"{'cpu %':>6}  flags")
    for label, users, step_ms, tokens in (("C=8, 100 tok/s", 8, 10.0, 64),
                                          ("C=250, lock-step ends", 250, 40.0, 24)):
        profile = tmp / f"steps{step_ms:g}.yaml"
        profile.write_text(STREAM_PROFILE.format(step_ms=step_ms))
        for clock in clocks:
            emu = start_emulator_process(str(profile), speed=1.0)
            try:
                f = fidelity(emu.url, users, seconds, tokens, tmp, processes, clock)
            finally:
                emu.stop()
            print(f"{label + ', ' + clock:<32} {f['n']:>5} {f['err_p50']:>8.2f} {f['err_p90']:>8.2f} "
                  f"{f['lag_p50']:>8.2f} {f['lag_p90']:>8.2f} {f['recv_p50']:>9.2f} {f['recv_p90']:>9.2f} "
                  f"{f['read_p50']:>9.2f} {f['read_p90']:>9.2f} {f['rlag_p90']:>9.2f} {f['gap_p50']:>8.2f} "
                  f"{f['gap_p90']:>8.2f} {f['cpu']:>6.0f}  {f['flags']}")


def capacity_part(users: int, seconds: float, rounds: int, tmp: Path) -> None:
    emu = start_emulator_process("baseline", speed=100.0, extra=["--max-running-requests", str(max(users, 80))])
    ratios: dict[str, list[float]] = {"kernel": [], "user": []}
    cpu_ratios: dict[str, list[float]] = {"kernel": [], "user": []}
    try:
        print(f"\nflood C={users}, baseline x100, 256-token requests, {seconds:g} s windows; the suite on each "
              "receive clock (both read with recvmsg and stamps; kernel: events take the stamps, user: the event "
              "loop's time), interleaved with the raw client")
        print(f"{'round':>5} {'clock':>7} {'suite ev/s':>11} {'suite us/ev':>12} {'raw ev/s':>9} {'raw us/ev':>10} "
              f"{'ev/s ratio':>11} {'CPU/ev ratio':>13}")
        for k in range(rounds):
            for clock in ("kernel", "user"):
                s_ev, s_cpu = suite_flood(emu.url, users, seconds, tmp / f"flood{k}-{clock}", clock)
                r_ev, r_cpu = raw_flood(emu.url, users, seconds)
                ratios[clock].append(s_ev / r_ev)
                cpu_ratios[clock].append(s_cpu / r_cpu)
                print(f"{k + 1:>5} {clock:>7} {s_ev:>11.0f} {s_cpu:>12.1f} {r_ev:>9.0f} {r_cpu:>10.1f} "
                      f"{ratios[clock][-1]:>11.2f} {cpu_ratios[clock][-1]:>13.2f}")
    finally:
        emu.stop()
    for clock in ("kernel", "user"):
        print(f"median, {clock} clock: suite/raw events/s {statistics.median(ratios[clock]):.2f}x, CPU per event "
              f"{statistics.median(cpu_ratios[clock]):.2f}x the raw client's")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="measured window per run")
    parser.add_argument("--flood-users", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="flood rounds (suite and raw interleaved)")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--processes", type=int, default=0,
                        help="load processes for the timing part (Locust's --processes; 0: one process)")
    parser.add_argument("--skip-capacity", action="store_true")
    parser.add_argument("--raw", metavar="URL", help=argparse.SUPPRESS)  # the raw client's child process
    args = parser.parse_args(argv)
    if args.raw:
        raw_client(args.raw, args.flood_users, args.seconds)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_timing:
            timing_part(args.seconds, Path(tmp), args.processes)
        if not args.skip_capacity:
            capacity_part(args.flood_users, args.seconds, args.rounds, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
