"""What a newcomer sees: specbench commands print the suite's lines, Locust's own output goes to the run's log.

Real runs only: `specbench demo` on its built-in emulators and plain headless Locust against an emulator. A top
level above 100 makes the ladder start users at a rate Locust warns about, so the spawn-rate warning is
really provoked, not assumed away.
"""

from __future__ import annotations

import re

from specbench.contract.rundir import LOG_FILE
from specbench.locustfiles.console import SPAWN_EXPLAINED, SPAWN_WARNING
from tests.conftest import FAST_LADDER, SHORT_DEMO_LADDER, run_locust
from tests.test_specbench import specbench

# Locust's statistics tables and its generic advice, as Locust 2.47 prints them
LOCUST_TABLE_MARKS = ("Response time percentiles", "Aggregated", "# reqs", "failures/s")
LOCUST_ADVICE = ("CPU usage above", SPAWN_WARNING)
TINY = ["--ladder", "1,120", "--max-tokens", "16", "--min-requests", "8", "--min-step-time", "1",
        "--step-ci", "0"]
STEPS = len(SHORT_DEMO_LADDER)
STEP_LINE = re.compile(rf"^step (\d+)/{STEPS} (C=\d+): ended \(\w+\) after [\d.]+ s window; achieved C [\d.]+; "
                       r"ok/total \d+/\d+; tok/s [\d.]+")


def test_demo_terminal_shows_one_line_per_step_and_the_verdict_and_locust_output_goes_to_the_log(short_demo):
    out, proc = short_demo  # the run tests/test_specbench.py judges the report of
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    terminal = proc.stdout + proc.stderr
    for mark in (*LOCUST_TABLE_MARKS, *LOCUST_ADVICE, "locust.main", "locust.runners", "started ("):
        assert mark not in terminal, (mark, terminal[-4000:])
    steps = [STEP_LINE.match(line) for line in proc.stderr.splitlines()]
    levels = [m.group(2) for m in steps if m]
    assert levels == [f"C={c}" for c in SHORT_DEMO_LADDER] * 2, proc.stderr  # baseline then spec, one line a step
    assert sum("Verdict: " in line for line in proc.stdout.splitlines()) == 1
    # The answer first: the verdict within 10 lines of the last run's start, at most ~40 lines of report after it
    # (the whole report is in report.md and with --verbose).
    lines = proc.stdout.splitlines()
    last_run = max(i for i, line in enumerate(lines) if ": ladder against " in line)  # the step lines: stderr
    report = lines[last_run + 1:]
    verdict = next(i for i, line in enumerate(report) if line.startswith("Verdict: "))
    assert verdict < 10 and len(report) <= 40, "\n".join(report)
    assert "Why the ratio moves" not in proc.stdout and "Per category" not in proc.stdout
    first, top = SHORT_DEMO_LADDER[0], SHORT_DEMO_LADDER[-1]
    for run in ("baseline", "spec"):
        log = (out / run / LOG_FILE).read_text()
        assert "Starting Locust" in log and "Response time percentiles" in log and "Aggregated" in log
        assert f"step 1/{STEPS} C={first}: started" in log and f"step {STEPS}/{STEPS} C={top}: ended" in log
        assert SPAWN_WARNING not in log and log.count(SPAWN_EXPLAINED) == 1, log[-3000:]


def test_verbose_demo_also_shows_locusts_tables(tmp_path):
    out = tmp_path / "demo"
    proc = specbench("demo", "--out", str(out), "--verbose", "--time-budget", "0", *TINY[:2], "--max-tokens",
                     "16", "--min-requests", "4", "--min-step-time", "0.5", "--step-ci", "0", timeout=300,
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Response time percentiles" in proc.stderr and "step 1/2 C=1: started" in proc.stderr
    assert SPAWN_WARNING not in proc.stderr and proc.stderr.count(SPAWN_EXPLAINED) == 2  # once per run
    assert "Response time percentiles" in (out / "spec" / LOG_FILE).read_text()
    assert "Why the ratio moves" in proc.stdout and "Per category" in proc.stdout  # the whole report


def test_plain_locust_keeps_its_output_but_explains_the_spawn_rate_warning_once(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    proc = run_locust(emu.url, tmp_path / "run", "--ladder", "1,120", "--max-tokens", "16", "--min-requests",
                      "4", *FAST_LADDER, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Response time percentiles" in proc.stderr and "locust.main" in proc.stderr
    assert "step 1/2 C=1: started" in proc.stderr
    # two starts at a rate of 120 users/s: Locust would warn at each
    assert SPAWN_WARNING not in proc.stderr and proc.stderr.count(SPAWN_EXPLAINED) == 1
    assert not (tmp_path / "run" / LOG_FILE).exists()
