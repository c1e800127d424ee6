"""--load-mode users: Locust's own user count held as one step, in real headless runs against the emulator."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from contract.schema import read_run
from tests.conftest import locust_cmd, run_locust


def _summarize(run_dir) -> str:
    return subprocess.run([sys.executable, "-m", "analysis", "summarize", str(run_dir)], capture_output=True,
                          text=True, timeout=60, check=True).stdout


def test_users_for_a_run_time_is_one_step_that_summarize_reads(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--load-mode", "users", "-u", "3", "-t", "4s", "--max-tokens", "32",
                      "--min-requests", "10", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    (step,) = run.steps
    assert step["target_c"] == 3 and step["ended_by"] == "run_time" and not step["flags"], step
    assert 3.9 <= step["end_s"] - step["start_s"] <= 6.0
    assert abs(step["achieved_c"] - 3) <= 0.15
    assert run.meta.partial is False and run.meta.ladder == [3]
    assert run.meta.settings["load_mode"] == "users"
    assert {r["user"] for r in run.records} == {"0:0", "0:1", "0:2"}
    assert all(r["status"] == "ok" for r in run.records), "the run time drains requests, it does not cut them"
    table = _summarize(out)
    assert "(no ladder steps" not in table
    assert any(line.split()[:2] == ["0", "3"] for line in table.splitlines()), table


def test_stopping_a_users_run_ends_it_cleanly_with_an_exact_window(tmp_path, emulator):
    emu = emulator("baseline", speed=5)
    out = tmp_path / "run"
    proc = subprocess.Popen(locust_cmd(emu.url, out, "--load-mode", "users", "-u", "4", "--max-tokens", "64"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    records = out / "records.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (records.exists() and records.read_text().count("\n") >= 30):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]
    run = read_run(out)
    (step,) = run.steps
    assert step["ended_by"] == "stopped" and run.meta.partial is False
    t0, t1 = step["steady_start_s"], step["end_s"]
    cut = [r for r in run.records if r["status"] != "ok"]
    assert cut, "requests in flight at the stop are cut short and recorded"
    # The window ends where the oldest cut request started: everything overlapping it finished whole.
    assert all(r["start_s"] >= t1 for r in cut), (t1, [r["start_s"] for r in cut])
    assert min(r["start_s"] for r in cut) == t1
    overlapping = [r for r in run.records if r["start_s"] < t1 and r["start_s"] + r["e2e_s"] > t0]
    assert overlapping and all(r["status"] == "ok" for r in overlapping)
    assert abs(step["achieved_c"] - 4) <= 0.2
