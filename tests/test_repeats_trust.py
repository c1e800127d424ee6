"""compare --repeats, #70: a server that changes between repeats stops the job (its repeat is never merged into the
answer), and a --time-budget too short for every run of every repeat is refused before any server is asked.

Real components only: built-in emulators on 127.0.0.1 (one restarted on its own port between repeats, with another
served model name or the same one), real specbench processes, and a listening socket that counts connections.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from specbench.config import data_path
from specbench.contract.rundir import RunDir, read_run
from specbench.launch import free_port
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import wait_until

SHORT = ["--max-tokens", "32", "--min-step-time", "2", "--max-step-time", "3", "--warmup-time", "1"]


def _profile(tmp_path: Path, model: str) -> str:
    """The baseline profile serving under another model name (what a server restarted on another model says)."""
    text = data_path("emulator/baseline.yaml").read_text(encoding="utf-8")
    path = tmp_path / f"{model}.yaml"
    path.write_text(text.replace("served_model_name: kimi-k2.5-int4", f"served_model_name: {model}"),
                    encoding="utf-8")
    return str(path)


CHANGES = {"other-model": "model kimi-k2.5-int4 -> other-model",
           "": "it did not say who it is: down, or still restarting?"}


@pytest.mark.parametrize(("model", "interleave"), [("other-model", "ladder"), ("", "ladder"),
                                                   ("kimi-k2.5-int4", "ladder"), ("other-model", "level")])
def test_a_baseline_restarted_between_repeats_stops_the_job_only_when_its_model_changed(tmp_path, emulator, model,
                                                                                         interleave):
    """--repeats 2 runs baseline, spec, spec, baseline (whole ladders, or the first level of two). While the spec
    runs, the baseline is stopped and started again on its port: with another model (or not started again: "")
    the job stops before repeat 2's baseline run (one line, exit 2, the report says why, no answer over repeats);
    with the same model (the near miss) the repeats merge as before."""
    port = free_port()
    base = start_emulator_process("baseline", speed=10, extra=["--port", str(port)])
    spec = emulator("baseline", speed=10)
    out = tmp_path / "report"
    cmd = [sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec", spec.url,
           "--out", str(out), "--ladder", "4" if interleave == "ladder" else "4,8", *SHORT, "--repeats", "2",
           "--interleave", interleave, "--time-budget", "2m"]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    again = None
    try:
        wait_until(lambda: RunDir(out / "spec").has_meta(), timeout_s=120, what="the spec's first run started")
        base.stop()
        if model:
            again = start_emulator_process(_profile(tmp_path, model), speed=10, extra=["--port", str(port)])
        stdout, stderr = job.communicate(timeout=400)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        base.stop()
        if again is not None:
            again.stop()
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "Traceback" not in stderr
    if model == "kimi-k2.5-int4":  # the same server back: nothing to say, the answer over both repeats
        assert job.returncode == 0, (stdout + stderr)[-3000:]
        assert json.loads((out / "repeats.json").read_text())["repeats"] == 2
        assert "Stopped" not in report and "changed" not in stderr
        return
    assert job.returncode == 2, (stdout + stderr)[-3000:]
    assert stderr.strip().splitlines()[-1] == (
        f"specbench: error: baseline: the server at {base.url} changed before repeat 2 ({CHANGES[model]}); "
        "stopped: repeats of different servers are not one comparison, so the report covers only "
        "what was measured before the change")
    assert not (out / "repeats.json").exists()  # one repeat of each: no answer over repeats
    assert not RunDir(out / "repeat-2" / "baseline").has_records()  # the changed server was never measured
    stop = report.index("## Stopped before the plan's end")  # above the verdict, escaped as Markdown
    assert stop < report.index("## Verdict")
    shown = CHANGES[model].replace(">", "\\>")  # Markdown-escaped
    assert f"changed before repeat 2 ({shown})" in report
    assert "Repeats recorded by every configuration: 1 of the 2 asked for" in report
    assert [s["target_c"] for s in read_run(out / "baseline").steps] == [4]  # repeat 1 stands as measured


class _Listener:
    """A TCP port that counts the connections made to it: did anything ask the server?"""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def _budget_job(tmp_path: Path, budget: str, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", url, "--spec", url,
                           "--out", str(tmp_path / budget), "--repeats", "3", "--time-budget", budget,
                           "--ladder", "1,2,4,8", *extra], capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_a_budget_too_short_for_every_repeat_is_refused_before_any_server_is_asked(tmp_path):
    """2 servers x 3 repeats x 4 levels, each level its own run: 24 runs, each needing its level's window (a 2 s
    warm-up and the default --min-step-time of 10 s, 12.63 s after the drain reserve, #76) and 3 s to start and stop
    Locust, 376 s in all. 60 s, 122 s and 375 s are refused in one line before any connection; 376 s (the near
    miss) passes the check and goes on to the servers."""
    listener = _Listener()
    try:
        for budget, shown in (("60s", "0.00"), ("122s", "2.08"), ("375s", "12.62")):
            proc = _budget_job(tmp_path, budget, listener.url)
            assert proc.returncode == 2, proc.stderr
            seconds = budget.removesuffix("s")
            assert proc.stderr.strip().splitlines() == [
                f"specbench: error: --time-budget: {seconds} s for 24 runs (2 servers x 3 repeats x 4 levels, each "
                f"level its own run) gives each {shown} s after 3 s to start and stop Locust; a run needs at least "
                "12.63 s (12 s a level: its warm-up and --min-step-time): give at least 376 s, fewer repeats or "
                "fewer levels"], proc.stderr
            assert not (tmp_path / budget).exists()
        assert listener.connections == 0  # refused before any preflight request
        proc = _budget_job(tmp_path, "376s", "http://127.0.0.1:9")
        assert proc.returncode == 2 and "--time-budget" not in proc.stderr, proc.stderr
        assert "baseline server http://127.0.0.1:9: not reachable" in proc.stderr
        # whole ladders alternating: 6 runs of 4 levels each need 50.53 s + 3 s: 322 s
        proc = _budget_job(tmp_path, "321s", listener.url, "--interleave", "ladder")
        assert proc.returncode == 2 and "give at least 322 s" in proc.stderr, proc.stderr
        # a shorter window asked for needs less: --min-step-time 2 and --warmup-time 1, 3.16 s a run: 148 s
        proc = _budget_job(tmp_path, "147s", listener.url, "--min-step-time", "2", "--warmup-time", "1")
        assert proc.returncode == 2 and "a run needs at least 3.16 s (3 s a level" in proc.stderr, proc.stderr
        assert "give at least 148 s" in proc.stderr
        assert listener.connections == 0
    finally:
        listener.close()


def test_a_budget_the_runs_outgrow_stops_the_job_before_a_run_its_share_cannot_hold(tmp_path, emulator):
    """21 s for 4 runs of one level passes the up-front check (2.25 s a run after 3 s for Locust; --min-step-time 0
    asks for no window beyond the 2 s warm-up), but at speed 1
    a request of 512 tokens lasts about 5 s, so the first run outgrows its share (its final drain waits for it):
    the next share falls under the 2.11 s a step needs, and the job stops there in one line (exit 2) instead of
    starting a child that would refuse it; nothing is left running."""
    base = emulator("baseline", speed=1)
    spec = emulator("baseline", speed=1)
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec",
                           spec.url, "--out", str(out), "--ladder", "1", "--max-tokens", "512", "--warmup-time", "0",
                           "--min-step-time", "0",
                           "--repeats", "2", "--time-budget", "21s"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert "Traceback" not in proc.stderr and "Locust exit code" not in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"specbench: error: --time-budget: (baseline|spec), repeat [12] would get \d+\.\d\d s, less "
                        r"than the 2\.11 s a run needs \(the runs so far took longer than their shares\); stopped "
                        r"before it, after [123] of 4 runs: give a longer --time-budget or fewer repeats", last), last
    assert not (out / "repeats.json").exists()
    if (out / "report.md").exists():  # repeat 1 was whole: its report says why the repeats are missing
        assert "## Stopped before the plan's end" in (out / "report.md").read_text(encoding="utf-8")
