"""What a Locust child tells the specbench that started it, through an inherited pipe: memory, not disk.

The child's exit code 3 means both "a step failed more than --max-error-rate" and "the disk refused the run's
files"; a comparison goes on after the first and must stop at the second (the next run would meet the same
full disk, and the report after it too). A file cannot carry the difference when the disk is what failed, so
the parent passes the write end of a pipe (its number in ``SPECBENCH_STATUS_FD``) and reads what the child
wrote there once it has exited: one ``KIND<TAB>TEXT`` line per event (#53).
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["DISK", "STATUS_FD_ENV", "read_status", "tell_parent"]

STATUS_FD_ENV = "SPECBENCH_STATUS_FD"
DISK = "disk"  # the disk refused a line: TEXT is "cannot write PATH: REASON (CODE)"
_MAX_READ = 65536


def tell_parent(kind: str, text: str) -> None:
    """One line to the parent, if one listens; never raises (a child started by hand has no such pipe)."""
    fd = os.environ.get(STATUS_FD_ENV, "")
    if not fd.isdigit():
        return
    line = (kind + "\t" + " ".join(text.split()) + "\n").encode("utf-8", "replace")[:4000]
    with contextlib.suppress(OSError):  # the parent is gone or the number is not ours: nothing to tell
        os.write(int(fd), line)  # under PIPE_BUF bytes: one atomic write


def read_status(fd: int) -> dict[str, str]:
    """The first line of each kind the child wrote (the write ends may still be open in its workers, so this
    reads only what is there, without waiting)."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while len(data) < _MAX_READ and (chunk := os.read(fd, _MAX_READ)):
            data += chunk
    except BlockingIOError:
        pass
    found: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        kind, _, text = line.partition("\t")
        found.setdefault(kind, text)
    return found
