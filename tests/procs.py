"""The process table as tests read it from Linux's /proc: whether a process still runs, and what runs below one.

Tests that prove a process ended (or that nothing was left behind) need a zombie to count as ended: it has
exited and only waits for its parent to reap it, which an orphan's new parent may do late.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any


def _stat_fields(stat: Path) -> list[str] | None:
    """The fields of a /proc/PID/stat after the command name (state first, then the parent id); None once gone."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` exists and has not exited (a zombie, Z, or a dying process, X, has)."""
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    return fields is not None and fields[0] not in ("Z", "X")


def parents(*, with_exited: bool = False) -> dict[int, int]:
    """Every running process's parent id; with ``with_exited``, zombies' too."""
    table: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields is not None and (with_exited or fields[0] not in ("Z", "X")):
            table[int(stat.parent.name)] = int(fields[1])
    return table


def children(pid: int, *, with_exited: bool = False) -> list[int]:
    """The direct children of ``pid``; with ``with_exited``, the ones not yet reaped too."""
    return [child for child, parent in parents(with_exited=with_exited).items() if parent == pid]


def descendants(pid: int) -> set[int]:
    """Every running process below ``pid``."""
    table = parents()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in table.items() if parent in frontier} - found
        found |= frontier
    return found


def end_stopped(*procs: subprocess.Popen[str]) -> None:
    """Kill each process still running, continuing it first (a test may have left it SIGSTOPped)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait(timeout=30)


def terminate(proc: subprocess.Popen[Any], timeout_s: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it has not ended within ``timeout_s``; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
