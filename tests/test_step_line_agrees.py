"""The live step line and the report say one thing about each step (#61).

The line a step prints when its books close, ``summarize``'s row, the report's step table and comparison.json
come from one computation (``analysis.records.summary.closed_step_row``). Three real runs against an emulator: a
quiet one, a starved one (answers longer than the budget's steps, so the last level ends with requests cancelled
and earlier steps' requests still streaming in later windows) and one stopped mid-step. In each, every step's
line and its report row agree field by field; the line may leave a field out, never show another value.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import summarize_run
from specbench.analysis.reporting.columns import RATE_COLUMNS, STEP_COLUMNS
from specbench.analysis.reporting.stepline import parse_step_line
from tests.conftest import FAST_LADDER, locust_cmd, run_locust, wait_until

SERVER_SIDE_FLAGS = {"server_token_gap"}  # judged against /metrics samples, which only the report reads
CELLS = {c.header: c for c in (*STEP_COLUMNS, *RATE_COLUMNS)}


def agree(out: Path, stderr: str) -> list[dict[str, str]]:
    """Assert every step line of ``stderr`` matches the run's summarize row cell by cell; return the lines."""
    lines = [p for line in stderr.splitlines() if (p := parse_step_line(line)) is not None]
    summary = summarize_run(load_run(out))
    steps = {s["index"]: s for s in load_run(out).steps}
    assert [int(p["step"]) for p in lines] == [r.step for r in summary.rows], stderr[-3000:]
    for parsed, row in zip(lines, summary.rows, strict=True):
        where = (out.name, row.level_text, parsed)
        for header, cell in parsed.items():
            if header in CELLS:
                assert cell == CELLS[header].cell(row), (header, where)
        assert parsed["level"] == row.level_text, where
        assert parsed["flags"] == ",".join(f for f in row.flags if f not in SERVER_SIDE_FLAGS), where
        step = steps[row.step]  # steps.jsonl's own figures are the same numbers
        assert step["achieved_c"] == row.achieved_c and step["throughput_tok_s"] == row.throughput_tok_s, where
    return lines


def test_quiet_run(tmp_path: Path, emulator) -> None:
    emu = emulator("baseline", speed=20)
    out = tmp_path / "quiet"
    proc = run_locust(emu.url, out, "--ladder", "1,4", "--max-tokens", "32", "--min-requests", "8", *FAST_LADDER)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = agree(out, proc.stderr)
    assert len(lines) == 2 and all(p["tok/s"] != "-" for p in lines)


def test_starved_run(tmp_path: Path, emulator) -> None:
    # 512-token answers under a 24 s budget for C=1, 8 and 64: requests outlive their steps, the top level's
    # window is short of finished requests, and the budget's drain cancels what is still streaming.
    emu = emulator("baseline", speed=3)
    out = tmp_path / "starved"
    proc = run_locust(emu.url, out, "--ladder", "1,8,64", "--max-tokens", "512", "--time-budget", "24s",
                      "--step-ci", "0", timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = agree(out, proc.stderr)
    assert len(lines) == 3
    assert any(p["flags"] for p in lines), "a starved run is expected to flag some step"


def test_run_stopped_mid_step(tmp_path: Path, emulator) -> None:
    emu = emulator("baseline", speed=10)
    out = tmp_path / "stopped"
    proc = subprocess.Popen(locust_cmd(emu.url, out, "--ladder", "2,6", "--max-tokens", "64", "--min-requests",
                                       "200", "--min-step-time", "1", "--max-step-time", "5"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    steps_file = out / "steps.jsonl"
    try:
        wait_until(lambda: steps_file.exists() and steps_file.read_text().strip(), timeout_s=90, poll_s=0.2,
                   what="the first step's line")
        time.sleep(1.5)  # inside the second step
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = agree(out, err)
    assert [p["ended_by"] for p in lines] == ["max_time", "stopped"]


