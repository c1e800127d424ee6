"""One ladder run: Locust itself, headless, on the suite's locustfile, in a child process.

The child prints the suite's progress (one line per step, errors) on the terminal; Locust's own log lines and
statistics tables go to the run directory's ``locust.log`` only (``--console progress``), or also to the
terminal with ``verbose`` (``--console all``). Ctrl-C reaches the child too; we wait for it to write what it
has, and the caller then reports on the partial run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from specbench import locustfiles
from specbench.analysis.reporting.files import OutputWriteError, describe
from specbench.contract import interrupts
from specbench.contract.childstatus import DISK, STATUS_FD_ENV, read_status
from specbench.contract.lifecycle import die_with_parent
from specbench.contract.rundir import RunDir
from specbench.launch import free_port
from specbench.progress import watch_on_terminal

LOCUSTFILE = Path(locustfiles.__file__).resolve().parent / "sglang.py"
_RUNNING: set[subprocess.Popen[bytes]] = set()  # the Locust children now running (several at once: the probe)


def stop_running() -> None:
    """SIGTERM to every Locust child still running (each stops in order and writes what it has): for Ctrl-C in the
    main thread while other threads wait on their runs (``specbench.probe``), where no KeyboardInterrupt reaches
    them."""
    for child in list(_RUNNING):
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)


@dataclass
class LoadRun:
    """What to run: the target, its label and run directory, and the options passed on to Locust."""

    host: str | None
    label: str
    run_dir: Path
    suite_config: str | None = None
    processes: int = 0
    extra: list[str] = field(default_factory=list)
    verbose: bool = False  # Locust's own output on the terminal too

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
               "--exit-code-on-error", "0", "--label", self.label, "--out", str(self.run_dir),
               "--logfile", str(RunDir(self.run_dir).log_file), "--console", "all" if self.verbose else "progress"]
        if self.host:
            cmd += ["--host", self.host]
        if self.suite_config:
            cmd += ["--suite-config", self.suite_config]
        if self.processes:  # a free port: never Locust's fixed 5557, which another run may hold
            port = free_port()
            cmd += ["--processes", str(self.processes), "--master-bind-port", str(port), "--master-port", str(port)]
        return cmd + list(self.extra)


@dataclass
class RunResult:
    returncode: int
    interrupted: bool
    disk_error: str | None = None  # the child's "cannot write PATH: REASON": its exit 3 was the disk (#53)

    @property
    def failed(self) -> bool:
        """Any non-zero exit of the child is the command's failure (a crash, bad input, too many errors)."""
        return self.returncode != 0 and not self.interrupted


def _partial(run_dir: Path) -> bool:
    """meta.json says partial: the run was stopped, whichever process got the signal."""
    return RunDir(run_dir).partial()


def execute(run: LoadRun) -> RunResult:
    """Run Locust to the end (or until Ctrl-C) and return how it ended."""
    try:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        RunDir(run.run_dir).log_file.unlink(missing_ok=True)  # the caller has claimed the directory: a fresh log
    except OSError as exc:  # a disk that filled or turned read-only since the directory was checked
        raise OutputWriteError(f"--out: cannot create {run.run_dir}: {describe(exc)}") from None
    # The child gets SIGTERM (stop in order, meta.json partial) when this process ends, even by SIGKILL.
    status_r, status_w = os.pipe()  # the child says there why it stopped (contract.childstatus)
    try:
        child = subprocess.Popen(run.command(), preexec_fn=die_with_parent, pass_fds=(status_w,),
                                 env={**os.environ, STATUS_FD_ENV: str(status_w)})
    finally:
        os.close(status_w)
    _RUNNING.add(child)
    try:
        return _wait(child, run, status_r)
    finally:
        _RUNNING.discard(child)
        os.close(status_r)


def _wait(child: subprocess.Popen[bytes], run: LoadRun, status_r: int) -> RunResult:
    watch = watch_on_terminal(run.run_dir)  # a line now and then inside a long step, on a terminal only
    try:
        interrupts.raise_if_pending()  # a signal during the fork: its KeyboardInterrupt was dropped there
        code = child.wait()
        return RunResult(code, interrupted=code == 130 or (code == 0 and _partial(run.run_dir)),
                         disk_error=read_status(status_r).get(DISK) if code else None)
    except KeyboardInterrupt:
        if child.poll() is None:
            # SIGTERM, not SIGINT: once the suite's hooks are in (Locust's init) both stop the run in order, but a
            # child still importing its locustfile would print a KeyboardInterrupt traceback for SIGINT, while
            # SIGTERM ends it quietly. A terminal's Ctrl-C also reaches the child itself; the hooks take both.
            child.send_signal(signal.SIGTERM)
        try:
            code = child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            code = child.wait()
        return RunResult(code, interrupted=True)
    finally:
        if watch is not None:
            watch.stop()
