"""Built-in emulators as child processes, for the demo and the end-to-end tests.

Each emulator is its own process, as a real server would be, so it never shares a core's event loop with
the load generator that measures it.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import requests


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EmulatorProcess:
    """A running ``python -m emulator``; stop it with ``stop()`` (SIGTERM, then SIGKILL)."""

    profile: str
    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_emulator_process(profile: str, *, speed: float, extra: list[str] | None = None,
                           ready_timeout: float = 30.0) -> EmulatorProcess:
    """Start an emulator on a free loopback port and wait until it answers /ready."""
    port = free_port()
    cmd = [sys.executable, "-m", "emulator", "--profile", profile, "--port", str(port), "--speed", str(speed)]
    log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the emulator; a pipe could fill
    proc = subprocess.Popen(cmd + list(extra or []), stdout=subprocess.DEVNULL, stderr=log)
    emu = EmulatorProcess(profile=profile, port=port, process=proc)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            err = log.read().decode(errors="replace")
            raise RuntimeError(f"emulator {profile} exited with code {proc.returncode}: {err.strip()[-500:]}")
        try:
            if requests.get(emu.url + "/ready", timeout=1.0).status_code == 200:
                return emu
        except requests.RequestException:
            pass
        time.sleep(0.1)
    emu.stop()
    raise RuntimeError(f"emulator {profile} did not become ready on {emu.url} within {ready_timeout:.0f} s")
