"""Issue #22: web UI Starts, deadlines, credentials in every form, and lifecycles of the suite's processes.

Each test names what it showed on main before #22."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import requests

from specbench.loadrun import free_port
from tests.conftest import LOCUSTFILE, REPO, wait_until

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
            resp = requests.post(base + "/swarm", data={"user_count": 1, "spawn_rate": 1, **form}, timeout=10)
            assert resp.status_code == 400 and not resp.json()["success"], (form, resp.text)
            assert needle in resp.json()["message"], (form, resp.json())
            time.sleep(0.3)
            assert ui.poll() is None and up(), f"the UI went down after {form}"
        assert not (tmp_path / "runs").exists()  # nothing started
    finally:
        ui.terminate()
        ui.wait(timeout=30)
