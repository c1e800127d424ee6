"""--load-mode users: Locust's own user count held as one step, in real headless runs against the emulator."""

from __future__ import annotations

import signal
import subprocess
import sys

from specbench.contract.rundir import read_run
from tests.conftest import ledger, locust_cmd, run_flags, run_locust, wait_until


def _summarize(run_dir) -> str:
    return subprocess.run([sys.executable, "-m", "specbench.analysis", "summarize", str(run_dir)], capture_output=True,
                          text=True, timeout=60, check=True).stdout


def test_users_for_a_run_time_is_one_step_that_summarize_reads(tmp_path, emulator):
    emu = emulator("baseline", speed=10)  # requests of ~0.2 s: a busy machine's gaps between them stay small
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--load-mode", "users", "-u", "3", "-t", "4s", "--max-tokens", "64",
                      "--min-requests", "10", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    (step,) = run.steps
    assert step["target_c"] == 3 and step["ended_by"] == "run_time" and not run_flags(step), step
    assert 3.9 <= step["end_s"] - step["start_s"] <= 6.0
    assert abs(step["achieved_c"] - 3) <= 0.15
    assert run.meta.partial is False and run.meta.ladder == [3]
    assert run.meta.settings.load_mode == "users"
    assert {r["user"] for r in run.records} == {"0:0", "0:1", "0:2"}
    assert all(r["status"] == "ok" for r in run.records), "the run time drains requests, it does not cut them"
    table = _summarize(out)
    assert "(no ladder steps" not in table
    assert any(line.split()[:2] == ["0", "3"] for line in table.splitlines()), table


def test_stopping_a_users_run_ends_it_cleanly_with_an_exact_window(tmp_path, emulator):
    """Ctrl-C: the window ends where the oldest request then in flight started; nothing sent is lost.

    Between the stop and Locust's kill the process closes the step's books (a few ms, or a few hundred on a busy
    machine), so requests in flight at the stop may still finish whole: the claims below hold either way. The
    requests last about a second, so the kill still finds some of them in flight and cuts them.
    """
    emu = emulator("baseline", speed=5)
    out = tmp_path / "run"
    proc = subprocess.Popen(locust_cmd(emu.url, out, "--load-mode", "users", "-u", "4", "--max-tokens", "256"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    records = out / "records.jsonl"
    wait_until(lambda: records.exists() and records.read_text().count("\n") >= 12, timeout_s=90,
               what="12 records")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]
    run = read_run(out)
    (step,) = run.steps
    assert step["ended_by"] == "stopped" and run.meta.partial is False
    t0, t1 = step["steady_start_s"], step["end_s"]
    # The window ends at the start of a request that was in flight at the stop: everything before it finished.
    assert t1 in {r["start_s"] for r in run.records}
    overlapping = [r for r in run.records if r["start_s"] < t1 and r["start_s"] + r["e2e_s"] > t0]
    assert overlapping and all(r["status"] == "ok" for r in overlapping)
    cut = [r for r in run.records if r["status"] != "ok"]
    assert cut, "requests in flight at the kill are cut short and recorded"
    assert all(r["status"] == "cancelled" and r["start_s"] >= t1 for r in cut), [(r["status"], r["start_s"] - t1)
                                                                                  for r in cut]
    # Nothing the server was sent is lost: one record per request it saw, and what it aborted was cut by us.
    truth = wait_until(lambda: (rows := ledger(emu.url)) and len(rows) >= len(run.records) and rows,
                       timeout_s=10, what="the emulator's ledger")
    assert sorted(e["rid"] for e in truth) == sorted(r["request_id"] for r in run.records)
    aborted = {e["rid"] for e in truth if e["finish_reason"] == "abort"}
    assert aborted == {r["request_id"] for r in cut}
    assert abs(step["achieved_c"] - 4) <= 0.2
