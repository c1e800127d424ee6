"""A server that refuses every request (#70 item 11): named, and over in bounded time.

Before: a server answering every request with 503 (or 429) and ``Retry-After: 3600`` left each step empty (ok/total
0/0, no refusal in its line: the users' first requests were refused before the window opened) and each level ran
to --max-step-time (10 minutes by default). Now the step line and the report name the refusals (count, HTTP
status, the Retry-After asked), the client honours a Retry-After up to 30 s and never an hour, and a step whose
every request was refused ends ("refused") once its window has run --min-step-time. The near miss: a short
Retry-After (1 s) is honoured in full, each user's next send at least that long after the refusal. Such a run
measured nothing and exits 3.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis.records.checks import REFUSED_WORK
from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import summarize_run
from specbench.analysis.reporting.stepline import parse_step_line
from specbench.contract.policy import RETRY_AFTER_MAX_S
from specbench.contract.rundir import read_run
from tests.conftest import run_locust
from tests.tinyservers import tiny_server

ARGS = ("--ladder", "2,3", "--max-tokens", "8", "--min-step-time", "2", "--max-step-time", "120", "--step-ci", "0",
        "--exit-code-on-error", "0")


def _run(root: Path, mode: str) -> dict[str, Any]:
    with tiny_server(mode) as server:
        began = time.monotonic()
        proc = run_locust(server.url, root / mode, *ARGS, timeout=170)
        took = time.monotonic() - began
    return {"proc": proc, "took": took, "dir": root / mode, "run": read_run(root / mode)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("refused")
    return {"hour": _run(root, "refuse_503_3600"), "second": _run(root, "refuse_429_1")}


def _step_lines(stderr: str) -> list[dict[str, str]]:
    return [p for line in stderr.splitlines() if (p := parse_step_line(line)) is not None]


@pytest.mark.parametrize("case", ["hour", "second"])
def test_every_step_names_its_refusals_and_ends_in_bounded_time(runs: dict[str, dict[str, Any]], case: str) -> None:
    done = runs[case]
    proc, run = done["proc"], done["run"]
    # Every request of each step refused: it measured nothing, exit 3 (docs/reference/errors.md), said per step.
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "requests were refused (HTTP 429/503: a full queue or a rate limit); it measured nothing" in proc.stderr
    # two levels, each: warm-up (a user asleep for its 30 s cap at most) + its 2 s window, never an hour
    assert done["took"] < 2 * (RETRY_AFTER_MAX_S + 20), done["took"]
    assert [s["ended_by"] for s in run.steps] == ["refused", "refused"]
    assert all(s["requests_refused"] > 0 for s in run.steps)
    status, asked = ("503", "3600") if case == "hour" else ("429", "1")
    lines = [line for line in proc.stderr.splitlines() if "ended (refused)" in line]
    assert len(lines) == 2, proc.stderr[-3000:]
    for line in lines:
        assert f"as HTTP {status} with Retry-After up to {asked} s" in line, line
    assert all(p["refused"].endswith("(100%)") for p in _step_lines(proc.stderr))
    summary = summarize_run(load_run(done["dir"]))
    assert [r.requests_refused for r in summary.rows] == [s["requests_refused"] for s in run.steps]
    texts = [w.message for w in summary.warnings if w.code == REFUSED_WORK]
    assert len(texts) == 2 and all(f"HTTP {status}" in t and f"up to {asked} s" in t for t in texts), texts


def test_an_hour_long_retry_after_is_honoured_only_up_to_its_cap(runs: dict[str, dict[str, Any]]) -> None:
    refused = [r for r in runs["hour"]["run"].records if r["status"] == "refused"]
    assert refused and all(r["retry_after_s"] == 3600 and r["backoff_s"] == RETRY_AFTER_MAX_S for r in refused)


def test_a_short_retry_after_is_honoured(runs: dict[str, dict[str, Any]]) -> None:
    """The near miss: Retry-After: 1 is waited out in full, before each user's next send."""
    records = runs["second"]["run"].records
    by_user: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_user[r["user"]].append(r)
    gaps = []
    for mine in by_user.values():
        mine.sort(key=lambda r: r["start_s"])
        for before, after in itertools.pairwise(mine):
            assert before["retry_after_s"] == 1 and before["backoff_s"] >= 1.0
            gaps.append(after["start_s"] - (before["start_s"] + before["e2e_s"]))
    assert gaps and min(gaps) >= 1.0 - 0.002, sorted(gaps)[:5]


def test_specbench_run_against_a_server_that_refuses_everything_says_so_before_any_load(tmp_path: Path) -> None:
    """``specbench run`` checks the server first: a refusal of its tiny request is one line naming the status and
    the Retry-After asked (exit 2, docs/reference/errors.md), and no run directory is made."""
    out = tmp_path / "run"
    with tiny_server("refuse_503_3600") as server:
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "run", "--host", server.url, "--label", "x",
                               "--ladder", "2", "--max-tokens", "8", "--out", str(out)],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert line.startswith("specbench: error: server "), line
    assert "refuses every request: /v1/chat/completions answered HTTP 503" in line, line
    assert "it asks to come back in 3600 s: Retry-After" in line, line
    assert not out.exists()
