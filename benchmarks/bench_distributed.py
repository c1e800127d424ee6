"""SSE events per second and CPU per event with 1, 2 and 4 load processes, against the emulator at its fastest.

    python benchmarks/bench_distributed.py [--users 64] [--seconds 8] [--speed 100]

One ladder step of C users per run (1 = the local runner; 2 and 4 = ``--processes N``: a master and N
workers), against the ``baseline`` emulator profile sped up ``--speed`` times (its fastest setting: decode
steps of well under a millisecond). Events = chunks that carried output, from the master's records; CPU = the
step's ``load_cpu`` (every load process, master included) times the step's length. Prints figures, asserts
nothing: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from locustfiles.target import start_emulator_process
from specbench.loadrun import LOCUSTFILE, free_port


def one_run(url: str, processes: int, users: int, seconds: float, out: Path) -> dict[str, float]:
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary", "--host", url,
           "--out", str(out), "--label", f"p{processes}", "--ladder", str(users), "--max-tokens", "256",
           "--min-requests", "1", "--min-step-time", str(seconds), "--max-step-time", str(seconds * 3),
           "--warmup-time", "1"]
    if processes > 1:
        port = free_port()
        cmd += ["--processes", str(processes), "--master-bind-port", str(port), "--master-port", str(port)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=seconds * 6 + 60)
    step = json.loads((out / "steps.jsonl").read_text().splitlines()[0])
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    t0, t1 = step["steady_start_s"], step["end_s"]
    events = sum(1 for r in records for ms in r["chunk_ms"] if t0 <= r["start_s"] + ms / 1000.0 < t1)
    cpu_s = sum(step.get("load_cpu", {}).values()) / 100.0 * (t1 - step["start_s"])
    all_events = sum(len(r["chunk_ms"]) for r in records if r["start_s"] >= step["start_s"] - 1)
    return {"events_s": events / (t1 - t0), "cpu_us_per_event": 1e6 * cpu_s / max(all_events, 1),
            "tok_s": step["throughput_tok_s"], "cpu": step.get("load_cpu", {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--speed", type=float, default=100.0)
    args = parser.parse_args()
    emu = start_emulator_process("baseline", speed=args.speed)
    try:
        print(f"baseline emulator x{args.speed:g}, C={args.users}, 256-token requests, {args.seconds:g} s window")
        print(f"{'processes':>9} {'SSE events/s':>13} {'CPU us/event':>13} {'tok/s':>9}  CPU % per process")
        with tempfile.TemporaryDirectory() as tmp:
            for n in (1, 2, 4):
                r = one_run(emu.url, n, args.users, args.seconds, Path(tmp) / f"p{n}")
                print(f"{n:>9} {r['events_s']:>13.0f} {r['cpu_us_per_event']:>13.0f} {r['tok_s']:>9.0f}  {r['cpu']}")
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
