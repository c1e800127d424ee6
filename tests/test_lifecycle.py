"""Issue #22: web UI Starts, deadlines, credentials in every form, and lifecycles of the suite's processes.

Each test names what it showed on main before #22."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

from specbench.launch import free_port
from tests.conftest import LOCUSTFILE, REPO, wait_until
from tests.procs import descendants, running

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_a_bad_web_ui_start_is_refused_and_the_ui_stays_up(tmp_path, emulator):
    """On main: a form naming an unset key variable returned success, then the whole UI process exited."""
    emu = emulator("baseline", speed=50)
    port = free_port()
    env = {k: v for k, v in ENV.items() if k != "NO_SUCH_KEY_22"}
    ui = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", emu.url,
                           "--web-port", str(port), "--ladder", "1", "--step-ci", "0"], cwd=tmp_path, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(base + "/", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    try:
        wait_until(up, timeout_s=30, what="the web UI")
        for form, needle in (({"api_key_env": "NO_SUCH_KEY_22"}, "NO_SUCH_KEY_22"),
                             ({"ladder": "4,4"}, "--ladder"), ({"temperature": "nan"}, "--temperature"),
                             ({"max_tokens": "many"}, "bad form value"), ({"prompts": "nope"}, "nope"),
                             ({"user_count": "5000", "load_mode": "users"}, "users")):
            resp = requests.post(base + "/swarm", data={"user_count": 1, "spawn_rate": 1, **form},
                                 headers={"Origin": base}, timeout=10)  # as the UI's page sends it (#53)
            assert resp.status_code == 400 and not resp.json()["success"], (form, resp.text)
            assert needle in resp.json()["message"], (form, resp.json())
            time.sleep(0.3)
            assert ui.poll() is None and up(), f"the UI went down after {form}"
        assert not (tmp_path / "runs").exists()  # nothing started
    finally:
        ui.terminate()
        ui.wait(timeout=30)


def test_kill_9_of_compare_leaves_no_process_behind(tmp_path, emulator):
    """On main: the Locust child (and its --processes worker) kept sending load after specbench died."""
    base, spec = emulator("baseline", speed=50), emulator("eagle3", speed=50)
    job = subprocess.Popen([sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec",
                            spec.url, "--out", str(tmp_path / "c"), "--processes", "1", "--ladder", "1,2",
                            "--min-step-time", "60", "--max-step-time", "120", "--step-ci", "0", "--max-tokens", "32"],
                           cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    below: set[int] = set()
    try:
        # The Locust master and its worker are up once the first request is recorded.
        wait_until(lambda: (tmp_path / "c" / "baseline" / "records.jsonl").exists(), timeout_s=60,
                   what="the baseline's first record")
        below = descendants(job.pid)
        assert len(below) >= 2, below  # master and worker (the emulators are the test's, not specbench's)
        job.kill()
        job.wait(timeout=10)
        wait_until(lambda: not any(map(running, below)), timeout_s=5, what=f"no process left of {below}")
    finally:
        if job.poll() is None:
            job.kill()
        for pid in filter(running, below):  # on failure: leave nothing running
            os.kill(pid, 9)


@pytest.mark.parametrize("after_s", [0.0, 0.5])
def test_sigterm_to_demo_after_its_baseline_run_stops_at_once_and_leaves_the_spec_run_partial(tmp_path, after_s):
    """The signal lands between the two runs (0 s) or as the spec run starts (0.5 s): exit 130 within seconds,
    the spec run is absent or marked partial (never complete), and no child process is left."""
    out = tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "specbench.cli", "demo", "--speed", "50", "--out", str(out),
                             "--ladder", "1,4", "--step-ci", "0", "--min-step-time", "1", "--max-step-time", "20",
                             "--time-budget", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, env=ENV)
    try:
        wait_until(lambda: _complete(out / "baseline" / "meta.json"), timeout_s=120, poll_s=0.05,
                   what="the baseline run's complete meta.json")
        time.sleep(after_s)
        children = psutil.Process(proc.pid).children(recursive=True)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert took < 10, took
    spec_meta = out / "spec" / "meta.json"
    assert not spec_meta.exists() or json.loads(spec_meta.read_text())["partial"] is True
    _gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, alive


def _complete(meta: Path) -> bool:
    try:
        return json.loads(meta.read_text())["partial"] is False
    except (OSError, ValueError, KeyError):
        return False


LOST_SIGNAL_SCRIPT = """
import os, signal, sys, time
from pathlib import Path
from specbench.contract import interrupts
from specbench.loadrun import LoadRun, execute

interrupts.install()
sent = []
def term_once():  # SIGTERM arrives while Popen forks: its handler runs in an at-fork callback, which drops errors
    if not sent:
        sent.append(1)
        os.kill(os.getpid(), signal.SIGTERM)
os.register_at_fork(after_in_parent=term_once)
run = LoadRun(sys.argv[1], "lost", Path(sys.argv[2]), extra=["--ladder", "1", "--min-step-time", "30",
                                                           "--max-step-time", "30", "--step-ci", "0"])
began = time.monotonic()
result = execute(run)
print(f"interrupted={result.interrupted} took={time.monotonic() - began:.1f}")
"""


UNRAISABLE_SCRIPT = """
import signal
from specbench.contract import interrupts

interrupts.install()
class Drops:
    def __init__(self, error):
        self.error = error
    def __del__(self):  # an exception raised here cannot propagate: Python reports it as unraisable
        if self.error is None:
            interrupts.on_signal(signal.SIGTERM, None)
        raise self.error
Drops(ValueError("not a signal"))
print("after ValueError", flush=True)
Drops(None)
print("after SIGTERM", flush=True)
interrupts.raise_if_pending()
"""


def test_only_the_dropped_interrupt_of_a_recorded_signal_goes_unprinted():
    """Python's report of an unraisable exception stays for every other error; the recorded signal still ends
    the command where ``raise_if_pending`` is called."""
    proc = subprocess.run([sys.executable, "-c", UNRAISABLE_SCRIPT], capture_output=True, text=True, timeout=60,
                          env=ENV)
    assert proc.stdout.splitlines() == ["after ValueError", "after SIGTERM"], (proc.stdout, proc.stderr)
    assert proc.stderr.count("Exception ignored") == 1 and "ValueError: not a signal" in proc.stderr, proc.stderr
    assert proc.stderr.rstrip().endswith("KeyboardInterrupt: SIGTERM") and proc.returncode != 0, proc.stderr


def test_a_signal_dropped_during_a_fork_still_stops_the_run(tmp_path, emulator):
    """A SIGTERM whose KeyboardInterrupt Python drops ("Exception ignored", here in an at-fork callback, as it
    happened in a CI run of ``specbench demo``) still interrupts the run at once: the child gets SIGTERM and the
    run is marked interrupted, instead of running its 30 s step to the end, and Python's report of the dropped
    exception ("Exception ignored ... Traceback", which reads as a crash) is not printed."""
    emu = emulator("baseline", speed=50)
    proc = subprocess.run([sys.executable, "-c", LOST_SIGNAL_SCRIPT, emu.url, str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120, env=ENV, cwd=tmp_path)
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("interrupted=True"), (proc.stdout, proc.stderr[-2000:])
    assert float(line.split("took=")[1]) < 25.0, line  # the 30 s step did not run to its end
