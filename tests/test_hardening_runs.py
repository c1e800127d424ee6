"""Hardening against real runs: Locust and specbench processes against the emulator or a tiny server on
127.0.0.1. Each run is short and checks several items of issue #11 at once."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

from specbench.analysis import compare_runs, load_run
from specbench.contract.rundir import read_run
from specbench.launch import free_port
from tests.analysis.synthetic_runs import Level, small_pair, write_run
from tests.conftest import FAST_LADDER, LOCUSTFILE, REPO, read_jsonl, wait_answering, wait_until
from tests.tinyservers import tiny_server

SECRET = "sk-runs-DO-NOT-LEAK-5e0b"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "SPECBENCH_TEST_KEY": SECRET}


def locust(cwd: Path, host: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
           "--host", host, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=ENV)


def specbench_popen(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "specbench.cli", *args], cwd=cwd, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


# -- items 14, 2, 5: a server that refuses connections; a label that tries to leave runs/ ---------------------

def test_connection_errors_back_off_flag_the_step_and_fail_the_run(tmp_path):
    with socket.socket() as sock:  # bound but never listening: connection refused, and the port stays ours
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
        work = tmp_path / "work"
        work.mkdir()
        proc = locust(work, dead, "--api", "chat", "--model", "m", "--ladder", "2", "--label", "../../escape",
                      "--min-step-time", "1", "--max-step-time", "3", "--warmup-time", "0.5")
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert re.search(r"step 1 C=2: \d+ of \d+ requests failed \(100%\), above --max-error-rate 5%", proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]  # nothing written outside the work dir
    (run_dir,) = (work / "runs").iterdir()
    assert run_dir.name.startswith("escape-")
    records = read_jsonl(run_dir / "records.jsonl")
    assert records and {r["status"] for r in records} == {"connect_error"}
    # 2 users over ~3.5 s, backing off 0.1, 0.2, 0.4, 0.8, 1.6, 2 s: a handful each, not thousands.
    assert len(records) <= 24, len(records)
    (step,) = read_jsonl(run_dir / "steps.jsonl")
    assert "server_unreachable" in step["flags"] and step["requests_failed"] == step["requests_total"] > 0


# -- item 3 (extends test_api_key_never_reaches_files_or_logs), item 13, item 5 -----------------------------

def test_a_401_echoing_the_key_and_html_answers_leave_no_key_and_are_classified(tmp_path):
    with tiny_server("echo401_html") as server:
        proc = locust(tmp_path, server.url, "--api", "chat", "--model", "tiny", "--ladder", "1",
                      "--api-key-env", "SPECBENCH_TEST_KEY", "--out", "run", "--min-step-time", "1",
                      "--max-step-time", "2", "--warmup-time", "0.3", "--loglevel", "DEBUG")
        assert any(auth == f"Bearer {SECRET}" for _m, _p, auth in server.seen)  # the key did go to the server
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert SECRET not in proc.stdout + proc.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    records = read_jsonl(tmp_path / "run" / "records.jsonl")
    statuses = {r["status"] for r in records}
    assert statuses == {"http_error", "not_streaming"}, statuses
    assert any("<redacted>" in (r["error"] or "") for r in records if r["status"] == "http_error")
    assert all("text/html" in r["error"] for r in records if r["status"] == "not_streaming")


def test_url_credentials_never_reach_meta_or_stdout(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    host = emu.url.replace("http://", "http://alice:hunter2pw@")
    proc = locust(tmp_path, host, "--ladder", "1", "--max-tokens", "8", "--min-requests", "3", "--out", "run",
                  *FAST_LADDER, "--loglevel", "DEBUG")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hunter2pw" not in proc.stdout + proc.stderr
    meta_text = (tmp_path / "run" / "meta.json").read_text()
    assert "hunter2pw" not in meta_text and "alice" not in meta_text
    assert json.loads(meta_text)["server"]["url"].startswith("http://<redacted>@127.0.0.1:")


# -- item 7: a descending ladder --------------------------------------------------------------------------

def test_descending_ladder_records_stopped_users_as_cancelled_and_flags_achieved_c(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    proc = locust(tmp_path, emu.url, "--ladder", "4,1", "--max-tokens", "64", "--min-requests", "8",
                  "--out", "run", *FAST_LADDER)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = read_run(tmp_path / "run")
    statuses = {r["status"] for r in run.records}
    assert statuses == {"ok", "cancelled"}, statuses  # the 3 users leaving C=4 were mid-request: cancelled
    assert run.steps[-1]["achieved_c"] <= 1.05  # they left at once: C=1 ran at 1, not at 2 (ramp-down pacing)
    for step in run.steps:
        above = step["achieved_c"] is not None and step["achieved_c"] > 1.05 * step["target_c"]
        assert above == ("concurrency_above_target" in step["flags"]), step
        assert step["requests_failed"] == 0  # cancelled requests are never server failures


# -- item 5: comparisons give no verdict where a run failed too often -----------------------------------------

def test_comparison_gives_no_verdict_for_a_level_above_the_error_rate(tmp_path):
    base, spec = small_pair()
    base.levels[2] = Level(4, 320.0, tokens=16, error_every=2)  # half the C=4 requests fail
    comparison = compare_runs(load_run(write_run(tmp_path / "b", base)), load_run(write_run(tmp_path / "s", spec)),
                              n_boot=200)
    assert any(w.code == "too_many_errors" and w.target_c == 4 for w in comparison.warnings)
    assert comparison.verdict.kind == "baseline_wins_all"  # still judged on C=1 and C=2
    for spec_level in spec.levels:
        spec_level.error_every = 2
    for level in base.levels:
        level.error_every = 2
    comparison = compare_runs(load_run(write_run(tmp_path / "b2", base)),
                              load_run(write_run(tmp_path / "s2", spec)), n_boot=200)
    assert comparison.verdict.kind == "no_levels" and "no verdict" in comparison.verdict.text


# -- items 5, 6: a child failure is the command's failure -----------------------------------------------------

def test_specbench_run_fails_when_its_locust_child_fails(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    # Locust itself exits 1 on --autoquit without --autostart: it was taken for success before.
    proc = specbench_popen(tmp_path, "run", "--host", emu.url, "--label", "x", "--autoquit", "5")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err[-1500:]
    assert "the load run failed" in err
    with tiny_server("ok_then_500") as server:  # passes preflight, then every request fails
        proc = specbench_popen(tmp_path, "run", "--host", server.url, "--label", "y", "--ladder", "1",
                               "--min-step-time", "1", "--max-step-time", "2", "--warmup-time", "0.3")
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err[-1500:]
    assert "step 1 C=1:" in err and "above --max-error-rate" in err


# -- items 8, 9: signals ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["SIGTERM to specbench", "SIGHUP to specbench", "SIGINT to Locust only"])
def test_signals_stop_every_child_and_a_partial_run_exits_130(tmp_path, emulator, how):
    emu = emulator("baseline", speed=5)
    out = tmp_path / "run"
    proc = specbench_popen(tmp_path, "run", "--host", emu.url, "--label", "x", "--out", str(out),
                           "--ladder", "2", "--max-tokens", "256", "--min-step-time", "60")
    try:
        wait_until(lambda: (out / "records.jsonl").exists() and proc.poll() is None
                   and (out / "records.jsonl").stat().st_size, timeout_s=40, poll_s=0.2,
                   what="a first record while the run goes on")
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "no Locust child"
        if how.startswith("SIGINT"):
            children[0].send_signal(signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM if "TERM" in how else signal.SIGHUP)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, alive
    assert json.loads((out / "meta.json").read_text())["partial"] is True
    assert requests.get(emu.url + "/ready", timeout=5).status_code == 200  # our emulator fixture is untouched


# -- item 1: the web UI ---------------------------------------------------------------------------------------

def _listening_address(pid: int, port: int) -> str | None:
    for conn in psutil.Process(pid).net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port:
            return conn.laddr.ip
    return None


def test_web_ui_binds_loopback_and_refuses_a_new_host_while_a_key_is_in_use(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    port = free_port()
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", emu.url, "--web-port", str(port),
           "--api-key-env", "SPECBENCH_TEST_KEY", "--ladder", "1"]
    with tiny_server("ok") as elsewhere:
        ui = subprocess.Popen(cmd, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_answering(base + "/", timeout_s=30, what="the web UI")
            assert _listening_address(ui.pid, port) == "127.0.0.1"
            resp = requests.post(base + "/swarm", data={"user_count": 1, "spawn_rate": 1, "host": elsewhere.url},
                                 headers={"Origin": base}, timeout=10)  # as the UI's page sends it (#53)
            assert resp.status_code == 403 and "--allow-host-change" in resp.json()["message"]
            time.sleep(1.0)
            assert elsewhere.seen == []  # no request, so no key, went to the other host
        finally:
            ui.terminate()
            ui.wait(timeout=30)
    # An explicit --web-host still wins over the loopback default.
    port = free_port()
    ui = subprocess.Popen([*cmd[:-6], "--web-port", str(port), "--web-host", "0.0.0.0"], cwd=tmp_path, env=ENV,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        address = wait_until(lambda: _listening_address(ui.pid, port), timeout_s=30, poll_s=0.3,
                             what=f"the web UI to listen on port {port}")
        assert address == "0.0.0.0"
    finally:
        ui.terminate()
        ui.wait(timeout=30)


# -- --request-timeout is a total deadline: it holds against a server that never answers and one that only pings --

@pytest.mark.parametrize(("mode", "error"), [("no_head", "no response within the request's 2 s"),
                                             ("ping_sse", "request exceeded 2 s")])
def test_request_timeout_cuts_a_request_that_never_answers_or_only_pings(tmp_path, mode, error):
    """The silence timeout (--read-timeout, 60 s here) never fires: bytes keep coming, or the wait is for the
    head. Before, the total deadline was checked only when an event arrived, so both requests ran until the
    server let go (30 s) and the run until its drain gave up."""
    with tiny_server(mode) as server:
        started = time.monotonic()
        proc = locust(tmp_path, server.url, "--api", "chat", "--model", "m", "--ladder", "1", "--min-step-time", "1",
                      "--max-step-time", "3", "--warmup-time", "0.2", "--request-timeout", "2", "--read-timeout", "60",
                      "--max-error-rate", "1")
        took = time.monotonic() - started
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = read_jsonl(run_dir / "records.jsonl")
    assert records and {r["status"] for r in records} == {"timeout"}, proc.stderr[-2000:]
    assert all(error in (r["error"] or "") and 1.9 < r["e2e_s"] < 3.5 for r in records), records
    assert took < 25, (took, proc.stderr[-2000:])


# -- a server's counts are evidence, not truth: impossible ones fail the request, nothing after [DONE] counts ------

@pytest.mark.parametrize(("mode", "status", "error"), [
    ("negative_count", "bad_count", "negative output token count (-5)"),
    ("huge_count", "bad_count", "1000000000000000 output tokens where the request allowed at most 8"),
    ("after_done", "ok", None),
])
def test_impossible_counts_fail_and_nothing_after_done_counts(tmp_path, mode, status, error):
    """Before: -5 tokens gave negative tok/s and a 'ratio -2.64x' verdict, 10**15 a MemoryError in summarize, and
    a chunk after [DONE] was counted (900 tokens)."""
    with tiny_server(mode) as server:
        proc = locust(tmp_path, server.url, "--api", "chat", "--model", "m", "--ladder", "1", "--max-tokens", "8",
                      "--min-step-time", "1", "--max-step-time", "2", "--warmup-time", "0.2", "--max-error-rate", "1")
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = read_jsonl(run_dir / "records.jsonl")
    assert records and {r["status"] for r in records} == {status}, proc.stderr[-2000:]
    if error is not None:
        assert all(error in r["error"] for r in records), records[0]
        assert "bad_count" in proc.stderr  # Locust's failure table names it
    else:
        assert {r["output_tokens"] for r in records} == {1}
    summary = compare_runs(load_run(run_dir), load_run(run_dir)).spec.rows[0]
    assert summary.throughput_tok_s is None or summary.throughput_tok_s >= 0


# -- a --time-budget holds against a server that goes silent: the drain ends with the budget, not the timeouts ---

@pytest.mark.parametrize("mode", ["silent_sse", "no_head"])
def test_a_silent_server_cannot_hold_a_time_budget(tmp_path, mode):
    """Before: a server silent after its head (or before it) held a 10 s budget until --read-timeout or
    --request-timeout let go (123 s with the audit's settings). Now the drain ends 5 s after the budget's end
    and the requests still in flight are recorded as cancelled."""
    with tiny_server(mode) as server:
        started = time.monotonic()
        proc = locust(tmp_path, server.url, "--api", "chat", "--model", "m", "--ladder", "1,2", "--time-budget", "10s",
                      "--warmup-time", "0.2", "--read-timeout", "90", "--request-timeout", "120",
                      "--max-error-rate", "1", timeout=150)
        took = time.monotonic() - started
    assert "time budget spent" in proc.stderr, proc.stderr[-2000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = read_jsonl(run_dir / "records.jsonl")
    assert records and {r["status"] for r in records} == {"cancelled"}, records
    assert took < 60, (took, proc.stderr[-2000:])  # 10 s + 5 s grace + Locust's start and stop
