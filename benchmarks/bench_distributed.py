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
import tempfile
from pathlib import Path

from specbench.loadrun import free_port
from specbench.locustfiles.target import start_emulator_process

from floodrun import flood


def one_run(url: str, processes: int, users: int, seconds: float, out: Path) -> dict[str, float]:
    extra: list[str] = []
    if processes > 1:
        port = free_port()
        extra = ["--processes", str(processes), "--master-bind-port", str(port), "--master-port", str(port)]
    got = flood(url, f"p{processes}", users, seconds, out, extra)
    return {"events_s": got.events_s, "cpu_us_per_event": got.cpu_us_per_event, "tok_s": got.tok_s, "cpu": got.cpu}


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
