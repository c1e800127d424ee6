"""Start and stop llama.cpp's ``llama-server`` for tests and benchmarks (no pytest dependency).

Why a helper: a real server must come up on a free loopback port, be ready before the first request, and
never outlive the test run, even when a test fails or the interpreter is killed. ``LlamaServer`` does exactly
that: it waits for ``GET /health`` == 200, fails with the server's log tail, and stops by PID (SIGTERM, then
SIGKILL). On Linux the child also gets SIGKILL if the thread that started it dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

LLAMA_SERVER_VERSION = "0.3.36"  # llama-cpp-python sdist whose vendored llama.cpp install.sh builds
INSTALL_SCRIPT = "tests/realserver/install.sh"


def cache_root() -> Path:
    """The specbench cache (same rule as install.sh): $SPECBENCH_CACHE or $XDG_CACHE_HOME/specbench."""
    if os.environ.get("SPECBENCH_CACHE"):
        return Path(os.environ["SPECBENCH_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "specbench"


def find_llama_server() -> Path | None:
    """Path of the llama-server to test: $LLAMA_SERVER_BIN if set, else install.sh's cached build, else None.

    A set but unusable $LLAMA_SERVER_BIN raises instead of returning None, so a typo is not a silent skip.
    """
    env = os.environ.get("LLAMA_SERVER_BIN")
    if env:
        path = Path(env)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise FileNotFoundError(f"LLAMA_SERVER_BIN={env} is not an executable file")
        return path
    path = cache_root() / f"llama-server-{LLAMA_SERVER_VERSION}" / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the server is retried on another port if it is taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGKILL it when its parent thread exits."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG


_LIVE: set[LlamaServer] = set()


@atexit.register
def _stop_all() -> None:
    """Last line of defence: stop servers a caller forgot to stop."""
    for server in list(_LIVE):
        server.stop()


class ServerStartError(RuntimeError):
    """llama-server exited or did not become healthy in time; the message carries its log tail."""


class LlamaServer:
    """One llama-server process on 127.0.0.1, optionally with a draft model for speculative decoding.

    Use as a context manager, or call ``start()``/``stop()``. Options map onto llama-server flags:
    ``n_parallel`` -> ``-np`` (slots), ``ctx_size`` -> ``-c`` (shared by all slots), ``threads`` -> ``-t``;
    ``draft`` adds ``-md DRAFT --spec-type draft-simple --spec-draft-n-max N`` (without ``--spec-type`` this
    llama.cpp version loads the draft but never uses it). ``extra_args`` are appended verbatim.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        draft: str | os.PathLike[str] | None = None,
        draft_n_max: int = 8,
        draft_n_min: int | None = None,
        spec_type: str = "draft-simple",
        n_parallel: int = 4,
        ctx_size: int = 8192,
        threads: int = 2,
        metrics: bool = True,
        extra_args: Sequence[str] = (),
        binary: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 60.0,
        stop_timeout: float = 10.0,
    ) -> None:
        found = Path(binary) if binary else find_llama_server()
        if found is None:
            raise FileNotFoundError(
                f"llama-server is not built: run {INSTALL_SCRIPT} or set LLAMA_SERVER_BIN"
            )
        self.binary = found
        self.model = Path(model)
        self.draft = Path(draft) if draft else None
        self.draft_n_max = draft_n_max
        self.draft_n_min = draft_n_min
        self.spec_type = spec_type
        self.n_parallel = n_parallel
        self.ctx_size = ctx_size
        self.threads = threads
        self.metrics = metrics
        self.extra_args = list(extra_args)
        self.host = host
        self.port = port if port is not None else 0
        self._fixed_port = port is not None
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234`` (valid once started)."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the running server process, or None when not running."""
        return self._proc.pid if self._proc is not None else None

    @property
    def speculative(self) -> bool:
        """Whether this server was started with a draft model."""
        return self.draft is not None

    def command(self) -> list[str]:
        """The full command line (with the port chosen at start)."""
        cmd = [str(self.binary), "-m", str(self.model), "--host", self.host, "--port", str(self.port)]
        cmd += ["--no-webui", "-np", str(self.n_parallel), "-c", str(self.ctx_size), "-t", str(self.threads)]
        if self.metrics:
            cmd.append("--metrics")
        if self.draft is not None:
            cmd += ["-md", str(self.draft), "--spec-type", self.spec_type]
            cmd += ["--spec-draft-n-max", str(self.draft_n_max)]
            if self.draft_n_min is not None:
                cmd += ["--spec-draft-n-min", str(self.draft_n_min)]
        return cmd + self.extra_args

    def log_tail(self, lines: int = 40) -> str:
        """Last lines of the server log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> LlamaServer:
        """Launch and wait until ``/health`` answers 200; retry on a new port if the chosen one was taken."""
        if self._proc is not None:
            return self
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            if not self._fixed_port:
                self.port = free_port(self.host)
            try:
                self._launch_and_wait()
                return self
            except ServerStartError:
                port_taken = "couldn't bind" in self.log_tail(10)
                self.stop()
                if not port_taken or attempt == attempts - 1:
                    raise
            except BaseException:  # e.g. KeyboardInterrupt while waiting: never leave the process behind
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _launch_and_wait(self) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(self.command())}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        _LIVE.add(self)
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                raise ServerStartError(
                    f"llama-server exited with code {code} during start-up; log {self.log_path}:\n"
                    + self.log_tail()
                )
            if self._health() == 200:
                return
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"llama-server not healthy after {self.startup_timeout:.0f} s; log {self.log_path}:\n"
                    + self.log_tail()
                )
            time.sleep(0.05)

    def _health(self) -> int | None:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status
        except OSError:
            return None
        finally:
            conn.close()

    def stop(self) -> None:
        """Stop by PID: SIGTERM, then SIGKILL after ``stop_timeout`` s; always reaps the process."""
        proc, self._proc = self._proc, None
        _LIVE.discard(self)
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        kind = f"draft={self.draft.name}" if self.draft else "no draft"
        return f"LlamaServer({self.model.name}, {kind}, url={self.url}, pid={self.pid})"
