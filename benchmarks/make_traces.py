"""Write the small example traces in config/traces/ (generated here, never downloaded): one of each format.

    python benchmarks/make_traces.py [OUT_DIR]

The traffic is bursty on purpose (quiet stretches at a low rate, bursts at several times it) and the Mooncake
rows share prefix blocks the way chat traffic does: a few long system prompts that many requests start with,
and follow-ups that resend an earlier request's blocks. Seeded, so the files are the same on every run.
"""

from __future__ import annotations

import csv
import json
import math
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "config" / "traces"


def bursty_times(n: int, seed: int, base_rate: float = 2.0, burst_rate: float = 12.0, period_s: float = 10.0,
                 burst_s: float = 3.0) -> list[float]:
    """Arrival times (s) of ``n`` requests: Poisson at ``base_rate``, at ``burst_rate`` in the first ``burst_s``
    of every ``period_s``."""
    rng = random.Random(f"{seed}:times")
    times, t = [], 0.0
    while len(times) < n:
        rate = burst_rate if (t % period_s) < burst_s else base_rate
        t += rng.expovariate(rate)
        times.append(t)
    return [x - times[0] for x in times]


def mooncake_rows(n: int, seed: int, **kw: float) -> list[dict[str, object]]:
    """Mooncake rows: 3 shared system prompts of 2 blocks; a third of requests follow up an earlier one."""
    rng = random.Random(f"{seed}:rows")
    next_id = 100
    system = [[i * 2, i * 2 + 1] for i in range(3)]
    rows: list[dict[str, object]] = []
    for t in bursty_times(n, seed, **kw):
        if rows and rng.random() < 1 / 3:  # a follow-up: an earlier request's blocks, then new ones
            parent = rng.choice(rows)
            head = list(parent["hash_ids"])[:-1] or list(parent["hash_ids"])  # type: ignore[call-overload]
        else:
            head = list(rng.choice(system))
        extra = rng.randint(1, 3)
        ids = head + list(range(next_id, next_id + extra))
        next_id += extra
        input_len = (len(ids) - 1) * 512 + rng.randint(64, 512)
        rows.append({"timestamp": int(t * 1000), "input_length": input_len,
                     "output_length": rng.randint(16, 256), "hash_ids": ids})
    for row in rows:  # ids match the input length: one per 512-token block
        assert len(row["hash_ids"]) == math.ceil(int(row["input_length"]) / 512)  # type: ignore[arg-type]
    return rows


def write_mooncake(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r, separators=(", ", ": ")) + "\n" for r in rows), encoding="utf-8")


def write_burstgpt(path: Path, n: int, seed: int) -> None:
    rng = random.Random(f"{seed}:burstgpt")
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"])
        for t in bursty_times(n, seed):
            req, resp = rng.randint(32, 1500), rng.randint(16, 300)
            w.writerow([f"{t + 5.0:.3f}", rng.choice(["ChatGPT", "GPT-4"]), req, resp, req + resp, "Conversation log"])


def write_azure(path: Path, n: int, seed: int) -> None:
    rng = random.Random(f"{seed}:azure")
    start = datetime(2023, 11, 16, 18, 15, 46)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
        for t in bursty_times(n, seed):
            stamp = start + timedelta(seconds=t)
            w.writerow([stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{stamp.microsecond:06d}0",
                        rng.randint(32, 2000), rng.randint(8, 300)])


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    write_mooncake(out / "mooncake-example.jsonl", mooncake_rows(120, seed=1))
    write_burstgpt(out / "burstgpt-example.csv", 120, seed=2)
    write_azure(out / "azure-example.csv", 120, seed=3)
    for name in ("mooncake-example.jsonl", "burstgpt-example.csv", "azure-example.csv"):
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
