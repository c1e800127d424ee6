"""The server guardian stops the server's group even when specbench died before the guardian was running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import wait_until, wait_until_or_timeout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_guardian_whose_specbench_is_already_gone_stops_the_group_at_once(tmp_path: Path) -> None:
    """specbench killed while its guardian still imports (a loaded machine): the orphaned guardian may be handed to
    a subreaper, not pid 1, so only the pid specbench gave it shows that its parent is gone. Before the fix it
    waited for a parent death that had already happened, and the server ran on."""
    server = subprocess.Popen(["bash", "-c", "sleep 300 & wait"], start_new_session=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a specbench that has already ended
    guardian = subprocess.Popen([sys.executable, "-m", "specbench.guardian", str(server.pid), "1", str(gone.pid)])
    try:
        wait_until(lambda: server.poll() is not None, timeout_s=30, what="the server's group to be stopped")
        assert guardian.wait(timeout=30) == 0
    finally:
        for proc in (server, guardian):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_guardian_whose_specbench_lives_leaves_the_group_alone(tmp_path: Path) -> None:
    """The same guardian given a living parent (this test) keeps still: the group is stopped only once it is gone."""
    server = subprocess.Popen(["bash", "-c", "sleep 300 & wait"], start_new_session=True)
    guardian = subprocess.Popen([sys.executable, "-m", "specbench.guardian", str(server.pid), "1", str(os.getpid())])
    try:
        # Long enough for a guardian to start and act (the first test's stops the group in well under this).
        assert wait_until_or_timeout(lambda: server.poll() is not None or guardian.poll() is not None,
                                     timeout_s=5, poll_s=0.2) is None
    finally:
        for proc in (guardian, server):
            proc.kill()
            proc.wait()
