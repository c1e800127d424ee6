"""The one emulator launcher (``locustfiles.target``): its own process, stopped by its owner or by its owner's end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from specbench.locustfiles.target import start_emulator_process
from tests.conftest import FAST_LADDER, run_locust, wait_until
from tests.procs import running


def _serves(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/ready", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def test_the_emulator_runs_in_its_own_process_until_stopped() -> None:
    emu = start_emulator_process("eagle3", speed=50, extra=["--max-running-requests", "8"])
    try:
        assert emu.process.pid != os.getpid() and emu.url == f"http://127.0.0.1:{emu.port}"
        with urllib.request.urlopen(emu.url + "/server_info", timeout=5) as resp:
            assert json.loads(resp.read())["max_running_requests"] == 8  # extra flags reach the emulator
    finally:
        emu.stop()
    assert emu.process.returncode == 0  # SIGTERM: a clean exit
    assert not _serves(emu.url)
    emu.stop()  # idempotent


def test_a_bad_profile_is_the_emulators_own_one_line_error() -> None:
    with pytest.raises(RuntimeError, match=r"exited with code 2: error: .*no built-in profile named 'nope'"):
        start_emulator_process("nope")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see the orphan's state")
def test_the_emulator_exits_by_itself_when_its_launcher_is_killed() -> None:
    code = ("import os, sys; from specbench.locustfiles.target import start_emulator_process;"
            "emu = start_emulator_process('baseline', speed=50);"
            "print(emu.process.pid, emu.url, flush=True); os.kill(os.getpid(), 9)")
    parent = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    pid, url = parent.stdout.split()
    wait_until(lambda: not running(int(pid)), timeout_s=10, what="the orphaned emulator to exit (it kept running)")
    assert not _serves(url)


def test_no_host_target_is_a_child_process_and_is_stopped_when_locust_quits(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_locust(None, out, "--emulator-speed", "50", "--ladder", "1", "--max-tokens", "8",
                      "--min-requests", "3", *FAST_LADDER)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r"started the built-in emulator .* at (http://127\.0\.0\.1:\d+)", proc.stderr)
    assert found, proc.stderr[-2000:]
    assert f"Stopped the built-in emulator at {found.group(1)}" in proc.stderr  # by the quitting hook
    assert not _serves(found.group(1)), "the embedded emulator outlived the Locust run"
