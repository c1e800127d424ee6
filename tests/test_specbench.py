"""specbench end to end: preflight, both ladders through Locust, the report, its numbers, and its failures."""

from __future__ import annotations

import json
import math
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench.analysis import compare_runs, comparison_json, load_run
from tests.conftest import COMPARE_PAIR_LADDER, SHORT_DEMO_LADDER, wait_until
from tests.tinyservers import tiny_server

SHORT = ["--ladder", "1,4", "--max-tokens", "48", "--min-requests", "10", "--min-step-time", "1",
         "--max-step-time", "60", "--step-ci", "0"]


def specbench(*args: str, timeout: float = 300.0, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def test_compare_against_two_emulators_reports_the_analysis_of_its_own_runs(compare_pair):
    out, proc, base_url, _ = compare_pair  # its equivalence check is judged in tests/test_equivalence.py
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert "baseline: " + base_url in proc.stdout and "no speculation" in proc.stdout
    assert "speculative algorithm=EAGLE3" in proc.stdout
    for name in ("report.md", "comparison.json", "comparison.csv", "baseline/records.jsonl", "spec/steps.jsonl"):
        assert (out / name).exists(), name
    assert len(list(out.glob("*.png"))) >= 3
    written = json.loads((out / "comparison.json").read_text())
    again = comparison_json(compare_runs(load_run(out / "baseline"), load_run(out / "spec")))
    assert [lv["target_c"] for lv in written["levels"]] == list(COMPARE_PAIR_LADDER)
    for got, want in zip(written["levels"], again["levels"], strict=True):
        for key in ("spec_tok_s", "baseline_tok_s", "ratio", "ratio_low", "ratio_high", "per_request_ratio"):
            assert _close(got[key], want[key]), (key, got[key], want[key])
    # the report's throughput is the ladder's own window figure, step by step
    for role, key in (("baseline", "baseline_tok_s"), ("spec", "spec_tok_s")):
        steps = {s["target_c"]: s["throughput_tok_s"] for s in load_run(out / role).steps}
        for level in written["levels"]:
            assert _close(level[key], steps[level["target_c"]])
    assert written["verdict"]["text"] in proc.stdout
    assert written["verdict"]["text"].lower() in (out / "report.md").read_text().lower()
    assert all(lv["ratio"] < 1 for lv in written["levels"]), "the calibrated eagle3 profile loses to baseline"


def test_shortened_demo_shows_the_seed_pattern(short_demo):
    out, proc = short_demo  # also judged by tests/test_console.py: one run of the command for both
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert "report: " in proc.stdout
    comparison = json.loads((out / "comparison.json").read_text())
    ratios = [lv["ratio"] for lv in comparison["levels"]]
    assert [lv["target_c"] for lv in comparison["levels"]] == list(SHORT_DEMO_LADDER)
    assert comparison["verdict"]["kind"] == "baseline_wins_all", comparison["verdict"]
    assert ratios[0] > ratios[-1], ratios  # the gap widens with load


# -- preflight failures -----------------------------------------------------------------------------------------


@pytest.fixture(params=["down", "401", "404", "no-stream"])
def broken_server(request) -> Iterator[tuple[str, str]]:
    if request.param == "down":
        with socket.socket() as sock:  # a free port: nothing listens once it is closed
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        yield f"http://127.0.0.1:{port}", "not reachable"
        return
    mode, expected = {"401": ("unauthorized", "answers 401"), "404": ("no_route", "does not serve"),
                      "no-stream": ("no_stream", "does not stream")}[request.param]
    with tiny_server(mode) as server:
        yield server.url, expected


def test_preflight_failure_is_one_clear_line_and_exit_2_before_any_load(tmp_path, emulator, broken_server):
    good = emulator("baseline", speed=20)
    url, expected = broken_server
    started = time.monotonic()
    proc = specbench("compare", "--baseline", good.url, "--spec", url, "--out", str(tmp_path / "r"), *SHORT,
                     timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("specbench: error: spec server") and expected in lines[0], lines
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r" / "baseline").exists(), "no load before both servers pass preflight"
    assert time.monotonic() - started < 30


def test_ctrl_c_during_the_spec_run_keeps_what_was_recorded_and_writes_a_partial_report(tmp_path, emulator):
    base = emulator("baseline", speed=20)
    # The spec server runs 2 requests at once, so its C=64 step cannot end within a minute: the signal below
    # lands while the spec run is still going, however slowly this machine runs the test (a run that had already
    # ended would have nothing to interrupt).
    spec = emulator("eagle3", speed=5, extra=["--max-running-requests", "2"])
    out = tmp_path / "report"
    proc = subprocess.Popen([sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec",
                             spec.url, "--out", str(out), "--ladder", "2,8,64", "--max-tokens", "48",
                             "--min-requests", "10", "--min-step-time", "1", "--max-step-time", "120",
                             "--step-ci", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    steps = out / "spec" / "steps.jsonl"
    wait_until(lambda: steps.exists() and steps.read_text().strip(), timeout_s=180,
               what="the spec run's first closed step")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    assert "partial report" in stdout
    report = (out / "report.md").read_text()
    assert "partial" in report.lower()
    assert json.loads((out / "comparison.json").read_text())["levels"][0]["target_c"] == 2
