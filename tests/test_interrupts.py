"""Issue #53, round two of signals: interrupts that were lost, exit codes that were wrong, a server left running.

Real subprocesses only: the sweep with a real emulator behind a wrapper script, the web UI and the analysis
command as processes, signals sent as a terminal or a CI runner would. Each test names what it showed before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from contract.lifecycle import group_alive
from tests.conftest import REPO, wait_until
from tests.procs import descendants, running

ENV = {**os.environ, "PYTHONPATH": str(REPO)}

# The "server": a launcher that takes 60 s to stop on SIGTERM (a real server saving state, freeing GPUs slowly),
# in front of the built-in emulator. Its pid and the emulator's go to PIDS; the SIGTERM is noted in MARK.
SLOW_STOP_WRAPPER = """#!/bin/bash
trap 'echo term >> "{mark}"; sleep 60' TERM
"{py}" -m emulator --profile baseline --port "$1" --speed 20 &
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
