"""``python -m specbench.emulator`` prints its URL, serves, stops cleanly on signals; bad profiles exit 2."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "specbench.emulator", "--port", "0", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_prints_url_and_stops_on_signal(signum: int) -> None:
    proc = _start("--profile", "eagle3", "--speed", "50")
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "/server_info", timeout=10) as resp:
            assert json.load(resp)["speculative_algorithm"] == "EAGLE3"
        proc.send_signal(signum)
        assert proc.wait(timeout=10) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_fault_flags_reach_the_profile() -> None:
    proc = _start("--fault-503", "1.0", "--speed", "50")
    try:
        url = proc.stdout.readline().strip()
        request = urllib.request.Request(url + "/generate", data=b'{"text": "x"}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=10)
        assert info.value.code == 503
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_bad_profile_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_running_requests: many\nstep_a_ms: 1\nstep_b_ms: 1\n")
    done = subprocess.run([sys.executable, "-m", "specbench.emulator", "--profile", str(bad), "--port", "0"], cwd=REPO,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "'max_running_requests'" in lines[0]
    assert done.stdout == ""
