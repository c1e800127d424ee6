"""Trace replay accuracy against the emulator's ledger, on more rows than the tests send.

``python benchmarks/bench_trace.py [--rows 600] [--rate 40] [--processes 1,3]``

Writes a bursty Mooncake trace (``make_traces.mooncake_rows``: quiet stretches, bursts at six times the rate,
shared system-prompt blocks and follow-ups), replays it with ``--api generate`` against a fresh emulator
(``--prefix-cache``, speed 20) for each process count, and prints per run: rows sent and how many distinct
rows, the arrival error (emulator arrival - scaled trace time) median / p99 / max in ms, input and output
lengths that differ from the trace, and the cached-token share next to the trace's own block reuse.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import requests
from make_traces import mooncake_rows, write_mooncake

from specbench.contract.rundir import read_run
from specbench.contract.traces import block_reuse_share, load_trace
from specbench.loadrun import free_port
from specbench.locustfiles.target import start_emulator_process

ROOT = Path(__file__).resolve().parents[1]


def replay(trace: Path, rows: list[dict], processes: int, work: Path) -> dict[str, float]:
    emu = start_emulator_process("baseline", speed=20, extra=["--prefix-cache"])
    try:
        out = work / f"run-{processes}"
        cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "sglang.py"), "--headless",
               "--only-summary", "--host", emu.url, "--out", str(out), "--api", "generate", "--trace", str(trace)]
        if processes > 1:
            port = free_port()
            cmd += ["--processes", str(processes), "--master-bind-port", str(port), "--master-port", str(port)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=work)
        if proc.returncode:
            raise SystemExit(proc.stderr[-2000:])
        truth = {e["rid"]: e for e in requests.get(emu.url + "/_emulator/requests", timeout=30).json()}
    finally:
        emu.stop()
    run = read_run(out)
    anchor = run.steps[0]["steady_start_s"]
    errors, wrong = [], 0
    for rec in run.records:
        row, entry = rows[rec["prompt_seq"]], truth[rec["request_id"]]
        errors.append((entry["arrival_s"] - anchor - row["timestamp"] / 1000) * 1000)
        wrong += entry["prompt_tokens"] != row["input_length"] or entry["completion_tokens"] != row["output_length"]
    cached = sum(e["cached_tokens"] for e in truth.values()) / sum(e["prompt_tokens"] for e in truth.values())
    return {"sent": len(run.records), "distinct": len({r["prompt_seq"] for r in run.records}),
            "dropped": run.steps[0]["dropped"], "median_ms": statistics.median(errors),
            "p99_ms": float(np.percentile(errors, 99)), "max_ms": max(errors), "wrong_lengths": wrong,
            "cached_share": cached, "workers": len({r["worker"] for r in run.records})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=600)
    ap.add_argument("--rate", type=float, default=6.0, help="quiet rate, req/s (bursts at 6x)")
    ap.add_argument("--processes", default="1,3")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows = [dict(r) for r in mooncake_rows(args.rows, seed=11, base_rate=args.rate, burst_rate=6 * args.rate)]
        for r in rows:  # short answers: the replay's timing is measured, not the server's capacity
            r["output_length"] = min(int(r["output_length"]), 32)
        trace = work / "trace.jsonl"
        write_mooncake(trace, rows)
        loaded = load_trace(str(trace))
        reuse = block_reuse_share(loaded.rows)
        print(f"trace: {len(rows)} rows over {loaded.duration_s:.1f} s, block reuse {reuse:.3f}")
        for n in (int(x) for x in args.processes.split(",")):
            result = replay(trace, rows, n, work)
            print(json.dumps({"processes": n, **{k: round(v, 3) for k, v in result.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
