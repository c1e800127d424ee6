"""One flood run of the suite as Locust itself, read back as events/s and CPU per SSE event.

Shared by the benchmarks that compare load-process setups (bench_distributed.py) and read-loop options
(bench_check_output.py), so both measure the same window the same way.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from specbench.loadrun import LOCUSTFILE


@dataclass(frozen=True)
class FloodFigures:
    events_s: float  # SSE events with tokens that arrived in the step's window, per second
    cpu_us_per_event: float  # load processes' CPU over the whole step, per event of the step
    tok_s: float
    cpu: dict[str, float]  # the step's load_cpu (percent per process)


def flood(url: str, label: str, users: int, seconds: float, out: Path, extra: list[str]) -> FloodFigures:
    """One closed-loop step of ``users`` users with 256-token answers for about ``seconds``; its figures."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary", "--host", url,
           "--out", str(out), "--label", label, "--ladder", str(users), "--max-tokens", "256",
           "--min-requests", "1", "--min-step-time", str(seconds), "--max-step-time", str(seconds * 3),
           "--warmup-time", "1", *extra]
    subprocess.run(cmd, check=True, capture_output=True, timeout=seconds * 6 + 60)
    step = json.loads((out / "steps.jsonl").read_text().splitlines()[0])
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    t0, t1 = step["steady_start_s"], step["end_s"]
    events = sum(1 for r in records for ms in r["chunk_ms"] if t0 <= r["start_s"] + ms / 1000.0 < t1)
    cpu_s = sum(step.get("load_cpu", {}).values()) / 100.0 * (t1 - step["start_s"])
    all_events = sum(len(r["chunk_ms"]) for r in records if r["start_s"] >= step["start_s"] - 1)
    return FloodFigures(events / (t1 - t0), 1e6 * cpu_s / max(all_events, 1), step["throughput_tok_s"],
                        step.get("load_cpu", {}))
