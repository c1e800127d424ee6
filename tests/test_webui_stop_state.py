"""The web UI after Stop: the page reads ``stopped`` and shows New, never a state it would stay on.

Locust's page polls ``/stats/requests`` only while the state it last read is spawning or running. One read in
the moment between Stop and stopped (``cleanup``, or ``stopping`` on a master) leaves the page on that state
with no New button until it is reloaded: one run of the Chromium test in ``tests/test_webui_tokens.py`` met it
beside another suite run. Here that moment is made seconds long as a user can make it: Locust's
``--stop-timeout`` lets each user finish the request it is streaming (about 3 s each here), and the page's reads
are made every 0.1 s. Before the fix they read ``cleanup`` until the last stream ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import requests

from specbench.launch import free_port
from tests.conftest import LOCUSTFILE, REPO, wait_answering, wait_until
from tests.procs import terminate


def test_reads_across_a_slow_stop_see_running_then_stopped(tmp_path, emulator) -> None:
    emu = emulator("baseline", speed=1)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--stop-timeout", "20", "--host", emu.url,
           "--web-host", "127.0.0.1", "--web-port", str(port), "--ladder", "1", "--min-step-time", "60",
           "--max-step-time", "120", "--step-ci", "0", "--max-tokens", "600"]
    log = (tmp_path / "locust.log").open("w")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        wait_answering(base + "/", timeout_s=30, what="the web UI")
        same_page = {"Origin": base}
        started = requests.post(base + "/swarm", headers=same_page, timeout=30,
                                data={"user_count": "4", "spawn_rate": "4", "load_mode": "users"})
        assert started.json()["success"], started.text

        def state() -> str:
            return str(requests.get(base + "/stats/requests", timeout=30).json()["state"])

        wait_until(lambda: state() == "running", timeout_s=30, poll_s=0.2, what="the run to be running")
        seen: list[tuple[float, str]] = []
        done = threading.Event()

        def page_reads() -> None:  # as the page does, but every 0.1 s, until it reads stopped (at most 60 s)
            end = time.monotonic() + 60
            while not done.is_set() and time.monotonic() < end:
                seen.append((time.monotonic(), state()))
                if seen[-1][1] == "stopped":
                    return
                time.sleep(0.1)

        reader = threading.Thread(target=page_reads)
        reader.start()
        time.sleep(0.5)
        stop_sent = time.monotonic()
        assert requests.post(base + "/stop", headers=same_page, timeout=60).json()["success"]
        stop_s = time.monotonic() - stop_sent  # Locust answers /stop once stopped
        reader.join(timeout=70)
        done.set()
        states = [s for _, s in seen]
        assert states and states[-1] == "stopped", states
        assert set(states) <= {"running", "stopped"}, sorted(set(states))
        # the moment between Stop and stopped outlasted Locust's 2 s cache of the answer (else nothing was tested)
        assert stop_s >= 2.5, (stop_s, states)
        # and a new run starts from the page's New button as before
        again = requests.post(base + "/swarm", headers=same_page, timeout=30,
                              data={"user_count": "2", "spawn_rate": "2", "load_mode": "users"})
        assert again.json()["success"], again.text
        wait_until(lambda: state() == "running", timeout_s=30, poll_s=0.2, what="the second run to be running")
    finally:
        terminate(proc)
        log.close()
