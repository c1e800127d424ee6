"""Issue #53, round two of signals: interrupts that were lost, exit codes that were wrong, a server left running.

Real subprocesses only: the sweep with a real emulator behind a wrapper script, the web UI and the analysis
command as processes, signals sent as a terminal or a CI runner would. Each test names what it showed before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from specbench.contract.lifecycle import group_alive
from specbench.launch import free_port
from tests.conftest import LOCUSTFILE, REPO, read_jsonl, wait_answering, wait_until
from tests.procs import descendants, running

ENV = {**os.environ, "PYTHONPATH": str(REPO)}

# The "server": a launcher that takes 60 s to stop on SIGTERM (a real server saving state, freeing GPUs slowly),
# in front of the built-in emulator. Its pid and the emulator's go to PIDS; the SIGTERM is noted in MARK.
SLOW_STOP_WRAPPER = """#!/bin/bash
trap 'echo term >> "{mark}"; sleep 60' TERM
"{py}" -m specbench.emulator --profile baseline --port "$1" --speed 20 &
echo $! >> "{pids}"; echo $$ >> "{pids}"
wait
"""


def test_a_second_ctrl_c_while_the_sweep_stops_a_slow_server_leaves_nothing_running(tmp_path: Path) -> None:
    """Before: the guardian was killed before the stop's wait, a second SIGINT escaped that wait, and the
    server's launcher (and so its GPUs) ran on for its whole 60 s, past specbench's exit."""
    mark, pids = tmp_path / "term", tmp_path / "pids"
    wrapper = tmp_path / "server.sh"
    wrapper.write_text(SLOW_STOP_WRAPPER.format(mark=mark, pids=pids, py=sys.executable))
    wrapper.chmod(0o755)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("ready_timeout_s: 60\nstop_timeout_s: 60\nconfigurations:\n"
                     f"  - {{name: 'off', baseline: true, command: [{wrapper}, '{{port}}'], "
                     "ready: {url: 'http://127.0.0.1:{port}/ready', interval_s: 0.1}}\n"
                     "  - {name: b, url: 'http://127.0.0.1:9'}\n")
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "specbench.cli", "sweep", str(sweep), "--out", str(out),
                             "--ladder", "1", "--min-step-time", "60", "--max-step-time", "120", "--step-ci", "0",
                             "--max-tokens", "32", "--no-refine"], cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    below: set[int] = set()
    server: list[int] = []
    try:
        wait_until(lambda: (out / "off" / "records.jsonl").exists(), timeout_s=120, what="the first record")
        server = [int(p) for p in pids.read_text().split()]
        below = descendants(proc.pid)  # the Locust run, the guardian, the server's launcher and emulator
        assert set(server) <= below, (server, below)
        proc.send_signal(signal.SIGINT)  # the first Ctrl-C: the run ends, the server is asked to stop
        wait_until(mark.exists, timeout_s=60, what="the server's launcher to get SIGTERM")
        assert proc.poll() is None  # specbench waits for the slow server
        proc.send_signal(signal.SIGINT)  # the second, impatient Ctrl-C
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err[-2000:]
        assert "Traceback" not in err, err[-2000:]
        wait_until(lambda: not any(map(running, below)) and not group_alive(server[-1]), timeout_s=5,
                   what=lambda: f"no process left; running: {sorted(filter(running, below))}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in filter(running, below | set(server)):  # on failure: leave nothing running
            os.kill(pid, signal.SIGKILL)


def _ignoring_sigint() -> None:
    """A child started as a non-interactive shell starts a background job (`cmd &` in a CI script)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(("sig", "sigint_ignored"), [(signal.SIGHUP, False), (signal.SIGINT, True),
                                                     (signal.SIGINT, False), (signal.SIGTERM, False)],
                         ids=["SIGHUP", "SIGINT-ignored-at-start", "SIGINT", "SIGTERM"])
def test_a_signal_to_the_web_ui_closes_the_open_step_and_exits_130(tmp_path: Path, emulator: Any,
                                                                   sig: signal.Signals, sigint_ignored: bool) -> None:
    """Before: SIGHUP killed the UI (exit 129, no line for the open step, meta.json not ended), SIGINT to a UI
    started with SIGINT ignored did nothing at all, and SIGTERM and Ctrl-C ended the run's files before Locust
    stopped the users (exit 130, but no line for the open step). Now each stops the run as the UI's Stop does."""
    emu = emulator("baseline", speed=20)
    port = free_port()
    out = tmp_path / "run"
    ui = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", emu.url, "--web-port",
                           str(port), "--ladder", "1,2", "--min-step-time", "60", "--max-step-time", "120",
                           "--step-ci", "0", "--max-tokens", "32", "--out", str(out)],
                          cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=_ignoring_sigint if sigint_ignored else None)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(base + "/", timeout_s=30, what="the web UI")
        resp = requests.post(base + "/swarm", data={"user_count": 1, "spawn_rate": 1}, headers={"Origin": base},
                             timeout=10)
        assert resp.status_code == 200 and resp.json()["success"], resp.text
        wait_until(lambda: (out / "records.jsonl").exists() and (out / "records.jsonl").stat().st_size,
                   timeout_s=60, what="a first record")
        ui.send_signal(sig)
        _out, err = ui.communicate(timeout=60)
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()
    assert ui.returncode == 130, (ui.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    steps = read_jsonl(out / "steps.jsonl")
    assert [s["index"] for s in steps] == [0], steps  # the open step's line, written as it was closed
    assert json.loads((out / "meta.json").read_text())["partial"] is True


def _reader_waiting(fifos: list[Path], held: list[int]) -> bool:
    """Whether the command has opened one of the FIFOs to read it; that one is then held open (never written),
    so the command waits in its read."""
    for fifo in fifos:
        try:
            held.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            return True
        except OSError:  # ENXIO: no reader yet
            continue
    return False


@pytest.mark.parametrize("sigint_ignored", [False, True])
def test_ctrl_c_on_analysis_exits_130_in_one_line(tmp_path: Path, sigint_ignored: bool) -> None:
    """The run's files are FIFOs, so the real command waits inside its work (as on a large run or a slow disk)
    when Ctrl-C comes. Before: a KeyboardInterrupt traceback, and nothing at all when started with SIGINT
    ignored (the command waited on)."""
    run = tmp_path / "run"
    run.mkdir()
    fifos = [run / name for name in ("meta.json", "steps.jsonl", "records.jsonl")]
    for fifo in fifos:
        os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "specbench.analysis", "summarize", str(run)], cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ignoring_sigint if sigint_ignored else None)
    held: list[int] = []
    try:
        wait_until(lambda: _reader_waiting(fifos, held), timeout_s=30, what="the command to open its run")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        for fd in held:
            os.close(fd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and err.strip().splitlines() == ["interrupted (SIGINT)"], err
