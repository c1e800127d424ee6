"""Start a user's server command, wait until it is ready, and stop it with everything it started.

The command runs in a new session (its own process group), so stopping it reaches the launcher script, the
server and any worker processes it forked (SGLang and vLLM start several): SIGTERM to the whole group, then
SIGKILL to whatever is left after the stop timeout. A guardian process (``specbench.guardian``) does the same
if specbench itself ends first, even by SIGKILL, so no server outlives the sweep. Output goes to a log file
whose tail is shown when the server exits early or never becomes ready.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import requests
from urllib3.exceptions import ReadTimeoutError

from specbench.contract.lifecycle import signal_group, stop_group
from specbench.locustfiles.deadline import Deadline, DeadlineExceeded, fetch
from specbench.locustfiles.httpsession import new_session


def free_port() -> int:
    """A loopback TCP port that was free a moment ago, for a ``{port}`` placeholder."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LaunchError(RuntimeError):
    """The server exited or did not become ready in time; the message says which, with its log tail."""


@dataclass
class ServerCommand:
    """One server started from ``command`` (a list runs as is; a string runs through ``/bin/sh -c``)."""

    name: str
    command: str | list[str]
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    stop_timeout_s: float = 30.0
    process: subprocess.Popen[bytes] | None = None
    guardian: subprocess.Popen[bytes] | None = None

    def start(self) -> ServerCommand:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        shown = self.command if isinstance(self.command, str) else " ".join(self.command)
        with open(self.log_path, "ab") as log:
            log.write(f"$ {shown}\n".encode())
            log.flush()
            try:
                self.process = subprocess.Popen(
                    self.command, shell=isinstance(self.command, str), stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **self.env})
            except OSError as exc:
                raise LaunchError(f"{self.name}: cannot start the command ({exc.strerror}): {shown}") from None
        self.guardian = subprocess.Popen(
            [sys.executable, "-m", "specbench.guardian", str(self.process.pid), str(self.stop_timeout_s),
             str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())

    def wait_ready(self, url: str, timeout_s: float, interval_s: float = 0.5) -> float:
        """Poll ``url`` until it answers 200; returns the seconds it took. Raises LaunchError otherwise."""
        assert self.process is not None
        started = time.monotonic()
        deadline = started + timeout_s
        with new_session() as session:
            while True:
                code = self.process.poll()
                if code is not None:
                    raise LaunchError(f"{self.name}: the server command exited with code {code} before it was "
                                      f"ready (log {self.log_path}): {self.log_tail()}")
                per_try = max(1.0, interval_s)
                try:  # each probe whole within its own deadline: a page that trickles is not an answer
                    if fetch(session, "GET", url, deadline=Deadline(per_try), per_read_s=per_try).status == 200:
                        return time.monotonic() - started
                except (requests.RequestException, ReadTimeoutError, DeadlineExceeded):
                    pass
                if time.monotonic() >= deadline:
                    raise LaunchError(f"{self.name}: {url} did not answer 200 within {timeout_s:g} s "
                                      f"(log {self.log_path}): {self.log_tail()}")
                time.sleep(interval_s)

    def stop(self) -> None:
        """SIGTERM to the process group, then SIGKILL to what is left after ``stop_timeout_s``.

        The guardian stays until the group is gone: an interrupt that ends specbench during the wait leaves it
        to finish the stop. A Ctrl-C during the wait (the user's second) sends SIGKILL at once, then goes on
        as an interrupt: before, it escaped the wait after the guardian had been killed, and the server ran on.
        """
        proc = self.process
        if proc is None:
            return
        pgid = proc.pid  # a new session's leader: its pid is the group id
        try:
            stop_group(pgid, self.stop_timeout_s, reap=proc.poll)  # reaped, the leader's zombie does not count
        except KeyboardInterrupt:
            signal_group(pgid, signal.SIGKILL)
            raise
        finally:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                signal_group(pgid, signal.SIGKILL)
                proc.wait()
            self._stop_guardian()
            self.process = None

    def _stop_guardian(self) -> None:
        """Only once the group is gone: the guardian is the stop's backstop, never ended before it."""
        guardian, self.guardian = self.guardian, None
        if guardian is not None:
            guardian.kill()
            guardian.wait()

    def __enter__(self) -> ServerCommand:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
