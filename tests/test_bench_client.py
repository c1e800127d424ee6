"""Smoke test for the SSE client benchmark: the tiny configuration runs end to end and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENT_KEYS = "aebcd"  # not imported from the module: importing Locust here would monkey-patch pytest's process


def test_quick_benchmark_prints_table_and_verdict() -> None:
    """A subprocess, as a user runs it: the module monkey-patches via Locust and starts its own server child."""
    proc = subprocess.run([sys.executable, "benchmarks/bench_client.py", "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "1st-ev err" in out and "µs/ev" in out
    for key in CLIENT_KEYS:
        row = next(line for line in out.splitlines() if line.startswith(f"{key} "))
        complete = row.split()[-2]
        done, total = complete.split("/")
        assert done == total, row  # every request ended with [DONE] and all its events
    assert "FAIL" not in out
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert " d (+" in verdict.partition("rejected for accuracy:")[2]  # 1,024-byte buffering shows even here
