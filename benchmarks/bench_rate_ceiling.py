"""How many requests per second can one load process start on time? Measured, not assumed.

    .venv/bin/python benchmarks/bench_rate_ceiling.py [--rates 100,200,400,700,1000] [--processes 0,2] [--seconds 4]

Open loop sends each request when its arrival schedule says (``scheduled_s``); a process that cannot keep up sends
late (``start_s - scheduled_s``) or drops arrivals when every user is busy. For each number of load processes (0:
one process, Locust's local runner; N: N worker processes) one real headless run of the suite walks the rate
ladder (constant arrivals, so lateness is the client's alone) against the emulator at speed 100 (two output
tokens, a few ms per request), and each step is judged **on time**: lateness p90 within 1 ms, p99 within 5 ms,
no drop, and at least 98% of the asked rate sent in the window. The ceiling is the highest rate on time with every
rate below it on time too; a last run at 0.9x the ceiling checks it holds. The rate cap per process
(``contract.limits.RATE_PER_PROCESS``) and ``--processes auto`` (``AUTO_RATE_PER_PROCESS``) are read beside it.

The emulator shares this machine's cores with the load processes: on a 2-core machine it is a large part of what
limits the rate, so the figures are this machine's, printed with its core count. Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from specbench.contract.limits import AUTO_RATE_PER_PROCESS, RATE_PER_PROCESS  # noqa: E402
from specbench.loadrun import LOCUSTFILE  # noqa: E402
from specbench.locustfiles.target import start_emulator_process  # noqa: E402

ON_TIME_P90_MS = 1.0
ON_TIME_P99_MS = 5.0
MIN_SENT_SHARE = 0.98


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def ladder_run(url: str, rates: list[float], processes: int, seconds: float, out: Path) -> list[dict]:
    """One run of the rate ladder; per step: rate, sent share, lateness p50/p90/p99 (ms), drops, on time."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary", "--host", url,
           "--out", str(out), "--rate-ladder", ",".join(f"{r:g}" for r in rates), "--arrivals", "constant",
           "--max-tokens", "2", "--min-requests", "1", "--min-step-time", str(seconds),
           "--max-step-time", str(seconds * 4), "--step-ci", "0", "--max-in-flight", "512",
           *(["--processes", str(processes)] if processes else [])]
    subprocess.run(cmd, check=True, capture_output=True, timeout=len(rates) * (seconds * 5 + 30) + 120,
                   cwd=out.parent)
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    rows = []
    for step in steps:
        t0, t1 = step.get("steady_start_s"), step.get("end_s")
        mine = [r for r in records if r["step"] == step["index"] and t0 is not None and t0 <= r["start_s"] < t1]
        late = [1000 * (r["start_s"] - r["scheduled_s"]) for r in mine if r.get("scheduled_s") is not None]
        sent = (step.get("achieved_rate") or 0.0) / step["target_rate"]
        p90, p99 = pct(late, 90), pct(late, 99)
        on_time = (bool(late) and p90 <= ON_TIME_P90_MS and p99 <= ON_TIME_P99_MS and not step.get("dropped")
                   and sent >= MIN_SENT_SHARE)
        rows.append({"rate": step["target_rate"], "n": len(late), "sent": sent, "p50": pct(late, 50), "p90": p90,
                     "p99": p99, "dropped": step.get("dropped", 0), "on_time": on_time,
                     "cpu": max((step.get("load_cpu") or {"-": float("nan")}).values())})
    return rows


def ceiling(rows: list[dict]) -> float | None:
    """The highest rate on time with every lower rate on time too."""
    best = None
    for row in sorted(rows, key=lambda r: r["rate"]):
        if not row["on_time"]:
            break
        best = row["rate"]
    return best


def print_rows(label: str, rows: list[dict]) -> None:
    for row in rows:
        print(f"{label:<12} {row['rate']:>7g} {row['n']:>6} {row['sent']:>6.1%} {row['p50']:>7.2f} {row['p90']:>7.2f} "
              f"{row['p99']:>7.2f} {row['dropped']:>5} {row['cpu']:>6.0f}  {'on time' if row['on_time'] else 'late'}")


def sleep_lateness(n: int = 400) -> str:
    """How late the pacer's sleep wakes (kernel timer) against gevent's, interleaved, in a gevent process."""
    code = (
        "import random, time, gevent, numpy as np\n"
        "from specbench.locustfiles.precisesleep import PreciseSleeper\n"
        "s = PreciseSleeper(); late = {'timer': [], 'gevent': []}\n"
        f"for i in range({n}):\n"
        "    d = random.uniform(0.002, 0.01); due = time.monotonic() + d\n"
        "    kind = 'timer' if i % 2 else 'gevent'\n"
        "    s.sleep_until(due) if kind == 'timer' else gevent.sleep(d)\n"
        "    late[kind].append((time.monotonic() - due) * 1000)\n"
        "for kind, v in late.items():\n"
        "    p = np.percentile(v, [50, 90, 99])\n"
        "    print(f'{kind}: late p50 {p[0]:.3f} ms, p90 {p[1]:.3f} ms, p99 {p[2]:.3f} ms')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    return proc.stdout.strip() or proc.stderr.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,200,400,700,1000", help="the rate ladder per process count")
    parser.add_argument("--processes", default="0,2", help="load process counts to measure (0: one process)")
    parser.add_argument("--seconds", type=float, default=4.0, help="least measured window per rate")
    args = parser.parse_args(argv)
    base_rates = [float(r) for r in args.rates.split(",")]
    print(f"{os.cpu_count()} cores; cap {RATE_PER_PROCESS:g} requests/s per process, --processes auto adds one per "
          f"{AUTO_RATE_PER_PROCESS:g}; on time: lateness p90 <= {ON_TIME_P90_MS:g} ms, p99 <= {ON_TIME_P99_MS:g} ms, "
          f"no drop, >= {MIN_SENT_SHARE:.0%} sent")
    print(f"{'processes':<12} {'rate':>7} {'n':>6} {'sent':>6} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'drop':>5} "
          f"{'cpu %':>6}")
    print("one sleep of 2-10 ms, how late it wakes (the pacer's kernel timer against gevent's sleep):")
    print(sleep_lateness())
    emu = start_emulator_process("baseline", speed=100.0, extra=["--max-running-requests", "1024"])
    summary = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for processes in (int(p) for p in args.processes.split(",")):
                scale = max(1, processes)
                rates = [r * scale for r in base_rates if r * scale <= RATE_PER_PROCESS * scale]
                rows = ladder_run(emu.url, rates, processes, args.seconds, Path(tmp) / f"p{processes}")
                label = "1 (local)" if processes == 0 else str(processes)
                print_rows(label, rows)
                top = ceiling(rows)
                held = None
                if top is not None:
                    check = ladder_run(emu.url, [0.9 * top], processes, args.seconds * 2, Path(tmp) / f"p{processes}c")
                    print_rows(label + " @0.9x", check)
                    held = check[0]["on_time"]
                summary.append((label, top, held))
    finally:
        emu.stop()
    for label, top, held in summary:
        per = f"{top / max(1, int(label.split()[0])):g} per process" if top else "none on time"
        print(f"processes {label}: ceiling {top if top is not None else '-'} requests/s ({per}); 0.9x the ceiling "
              f"{'on time' if held else 'late' if held is not None else 'not run'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
