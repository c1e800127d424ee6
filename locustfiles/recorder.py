"""Records reach disk as they happen: one ``os.write`` per JSON line, so a SIGKILL loses nothing finished.

Several processes of one run (``--processes``) may append to the same file: each line is written by a single
``O_APPEND`` write, which the kernel keeps whole on a local file system.

When the disk refuses a write (full, read-only, an I/O error), the run cannot keep its promise that nothing
is lost, so it must stop at once and say so: the first failure is reported once, by one line naming the file
and the reason, to the handler the run installs (``on_write_failure``), which stops the run; later lines are
counted, not written, and not raised in every user's greenlet.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specbench.contract.childstatus import DISK, tell_parent
from specbench.contract.redact import redact_obj, redacted_json_line
from specbench.contract.rundir import RunDir
from specbench.contract.schema import RunMeta


class WriteFailures:
    """This process's refused writes: the first one's reason, and how many lines were not written since."""

    def __init__(self) -> None:
        self.first: str | None = None
        self.lines_lost = 0
        self.handler: Callable[[str], None] | None = None

    def record(self, path: Path, exc: OSError) -> None:
        self.lines_lost += 1
        if self.first is not None:
            return
        code = errno.errorcode.get(exc.errno or 0, "")
        self.first = f"cannot write {path}: {exc.strerror or exc}{f' ({code})' if code else ''}"
        tell_parent(DISK, self.first)  # a specbench comparison stops on it, not on "too many errors" (#53)
        if self.handler is not None:
            self.handler(self.first)


WRITE_FAILURES = WriteFailures()


def on_write_failure(handler: Callable[[str], None] | None) -> None:
    """Install what a refused write does (the run's hooks: one line, stop the run); None: nothing."""
    WRITE_FAILURES.handler = handler


class JsonlAppender:
    """Append-only JSONL file written one whole line per system call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:  # a read-only or missing disk: the run stops through the handler
            WRITE_FAILURES.record(path, exc)
            WRITE_FAILURES.lines_lost -= 1  # no line was lost yet

    def write(self, obj: dict[str, Any]) -> None:
        data = redacted_json_line(obj)
        try:
            if self._fd is None:  # a request killed during shutdown still gets its line
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            while data:  # a short write (the disk filling up) is finished or fails on the next call
                data = data[os.write(self._fd, data):]
        except OSError as exc:
            WRITE_FAILURES.record(self.path, exc)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def write_meta(run_dir: Path, meta: RunMeta) -> Path:
    """Write meta.json atomically (temp file + rename), so a reader never sees half of it."""
    target, tmp = RunDir(run_dir).meta_file, RunDir(run_dir).meta_tmp_file
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(redact_obj(meta.to_json()), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:  # the previous meta.json, if any, stays whole: the rename never happened
        WRITE_FAILURES.record(target, exc)
        tmp.unlink(missing_ok=True)
    return target
