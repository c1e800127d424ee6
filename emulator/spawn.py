"""Run ``python -m emulator`` as a child process (its own core and GIL) and learn its URL.

Used by the calibration and lag benchmarks, so that the client's CPU does not perturb the server.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import gevent

__all__ = ["spawned_emulator"]

REPO_ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def spawned_emulator(profile: str, *, speed: float | None = None, args: Sequence[str] = (),
                     start_timeout_s: float = 30.0) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Yield (process, url); the process is terminated (SIGTERM, then kill) on exit."""
    cmd = [sys.executable, "-m", "emulator", "--profile", profile, "--port", "0", *args]
    if speed is not None:
        cmd += ["--speed", str(speed)]
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=errors, text=True)
        yield from _serve(proc, errors, start_timeout_s)


def _serve(proc: subprocess.Popen[str], errors: IO[str], start_timeout_s: float
           ) -> Iterator[tuple[subprocess.Popen[str], str]]:
    try:
        with gevent.Timeout(start_timeout_s, TimeoutError(f"emulator did not print its URL in {start_timeout_s}s")):
            url = gevent.get_hub().threadpool.apply(proc.stdout.readline).strip()  # type: ignore[union-attr]
        if not url.startswith("http"):
            proc.wait(5)
            errors.seek(0)
            raise RuntimeError(f"emulator failed to start: {errors.read().strip() or url}")
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
