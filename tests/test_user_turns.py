"""The suite's user sends its next request from inside its task (``LLMUser._straight_on``) only where Locust's
task loop would have done nothing else: real programmatic runs (tests/scripts/user_turns.py) against the emulator
show Locust's stop, task choice and wait still hold."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from specbench.contract.rundir import read_run
from tests.conftest import REPO

SCRIPT = REPO / "tests" / "scripts" / "user_turns.py"


def _run(url: str, out: Path, case: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, str(SCRIPT), url, str(out), case], capture_output=True, text=True,
                          timeout=240, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def server(emulator):
    return emulator("baseline", speed=10)


def test_a_graceful_step_down_stops_users_after_their_request(tmp_path, server):
    """Locust's step down with a stop timeout marks running users stopping and waits for them: a user going
    straight on would be waited for until the timeout (60 s) and then killed."""
    result = _run(server.url, tmp_path / "run", "stop")
    assert result["users_after"] == 2
    assert result["step_down_s"] < 10.0, result
    records = read_run(tmp_path / "run").records
    assert records and all(r["status"] == "ok" for r in records), "stopped after their requests, none cut"


def test_a_second_task_still_gets_its_turns(tmp_path, server):
    result = _run(server.url, tmp_path / "run", "mixed")
    records = read_run(tmp_path / "run").records
    assert records
    assert result["other_runs"] >= max(10, len(records) // 4), (result, len(records))


def test_a_wait_between_tasks_is_still_waited(tmp_path, server):
    _run(server.url, tmp_path / "run", "wait")
    by_user = defaultdict(list)
    for r in read_run(tmp_path / "run").records:
        by_user[r["user"]].append(r)
    gaps = [b["start_s"] - (a["start_s"] + a["e2e_s"]) for rs in by_user.values() for a, b in itertools.pairwise(rs)]
    assert gaps and min(gaps) >= 0.29, gaps
