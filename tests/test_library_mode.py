"""The suite driven programmatically (Locust as a library): one Environment, our user, shape and hooks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specbench.contract.rundir import read_run

SCRIPT = Path(__file__).resolve().parent / "scripts" / "programmatic_ladder.py"
REPO = SCRIPT.parent.parent.parent


def test_programmatic_local_runner_runs_the_ladder_and_records_every_request(tmp_path, emulator):
    emu = emulator("eagle3", speed=20)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(SCRIPT), emu.url, str(out), "--ladder", "1,3", "--max-tokens", "32",
                           "--min-requests", "8", "--min-step-time", "1", "--step-ci", "0", "--label", "lib", "--api",
                           "chat"],
                          capture_output=True, text=True, timeout=180, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["completed"]
    run = read_run(out)
    assert [s["target_c"] for s in run.steps] == [1, 3]
    assert run.records and all(r["status"] == "ok" and r["api"] == "chat" for r in run.records)
    assert all(r["output_tokens"] == 32 and r["spec"] is not None for r in run.records)
    assert run.meta.partial is False and run.meta.server["speculative"]["algorithm"] == "EAGLE3"
    counts = {(e["method"], e["name"]): e["num_requests"] for e in result["entries"]}
    assert counts[("POST", "/v1/chat/completions C=  3")] > 0
    assert counts[("TTFT", "/v1/chat/completions C=  3")] > 0
