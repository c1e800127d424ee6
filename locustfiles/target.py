"""The one launcher of the built-in emulator: ``python -m specbench.emulator`` in its own process, tied to this one.

The load side never imports the emulator: the emulator is a separate program, as a real server would be, so it
never shares a core's event loop with the load that measures it. It listens on ``--port 0`` and prints its URL
as its first stdout line; ``--parent-pid`` makes it exit by itself once this process is gone (even killed), and
``stop()`` ends it (SIGTERM, then SIGKILL). Used by the locustfile's default target (no ``--host``),
``specbench demo``, the benchmarks and the tests. Works in a gevent-patched process (Locust) and in a plain one.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO
from urllib.parse import urlsplit

import requests

from specbench.locustfiles.httpsession import new_session

__all__ = ["EmulatorProcess", "start_emulator_process"]


@dataclass
class EmulatorProcess:
    """A running ``python -m specbench.emulator``: ``url``, ``port``, ``process``; ``stop()`` is idempotent."""

    profile: str
    url: str
    process: subprocess.Popen
    log: IO[bytes] = field(repr=False)

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def start_emulator_process(profile: str = "baseline", *, speed: float | None = None, extra: Sequence[str] | None = None,
                           ready_timeout: float = 30.0) -> EmulatorProcess:
    """Start an emulator on a free loopback port and return once it answers ``/ready`` with 200.

    ``extra`` goes to ``python -m specbench.emulator`` as it is (``--fault-503 0.1``, ``--max-running-requests 8``,
    ...).
    Raises ``RuntimeError`` with the emulator's own error line if it exits or does not become ready in time.
    """
    cmd = [sys.executable, "-m", "specbench.emulator", "--profile", profile, "--port", "0",
           "--parent-pid", str(os.getpid())]
    if speed is not None:
        cmd += ["--speed", str(speed)]
    log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the emulator; a stderr pipe could fill
    proc = subprocess.Popen([*cmd, *(extra or ())], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
    deadline = time.monotonic() + ready_timeout
    emu = EmulatorProcess(profile, "", proc, log)
    try:
        emu.url = _read_url(proc, log, deadline)
        _wait_ready(emu, deadline)
    except BaseException:
        emu.stop()
        raise
    return emu


def _read_url(proc: subprocess.Popen, log: IO[bytes], deadline: float) -> str:
    """The first stdout line, read with select so that a silent child cannot hang the caller past the deadline."""
    assert proc.stdout is not None
    fd, line = proc.stdout.fileno(), b""
    while b"\n" not in line:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RuntimeError(f"emulator did not print its URL within the start timeout: {_tail(log)}")
        if not select.select([fd], [], [], min(remaining, 0.5))[0]:
            continue
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:  # gevent makes the pipe non-blocking; select said readable, try again
            continue
        if not chunk:
            proc.wait(5)
            raise RuntimeError(f"emulator exited with code {proc.returncode}: {_tail(log)}")
        line += chunk
    url = line.split(b"\n", 1)[0].decode(errors="replace").strip()
    if not url.startswith("http"):
        raise RuntimeError(f"emulator printed {url!r} instead of its URL")
    return url


def _wait_ready(emu: EmulatorProcess, deadline: float) -> None:
    """Until /ready says 200: a profile may model a server that loads its model first (``startup_delay_s``)."""
    while True:
        try:
            with new_session() as session, session.get(emu.url + "/ready", timeout=1.0) as resp:
                if resp.status_code == 200:
                    return
        except (requests.RequestException, OSError):
            pass
        if emu.process.poll() is not None:
            raise RuntimeError(f"emulator exited with code {emu.process.returncode}: {_tail(emu.log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"emulator {emu.profile} did not become ready on {emu.url} within the start timeout")
        time.sleep(0.1)


def _tail(log: IO[bytes]) -> str:
    """The end of the emulator's stderr: its one-line error for a bad profile or a busy port."""
    log.seek(0)
    return log.read().decode(errors="replace").strip()[-500:] or "(nothing on stderr)"
