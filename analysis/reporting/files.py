"""Writing a report's files whole, or not at all: a disk that refuses one is named, never half a file left.

A full, read-only or unwritable disk raises ``OutputWriteError``, one line naming the path and the system's
reason, which the command lines print and exit 2 with; each file is written beside its place and renamed
over it once whole, so no 0-byte or cut PNG (or report) is left for a reader to take as the real one (#53).
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

__all__ = ["OutputWriteError", "make_out_dir", "write_whole"]


class OutputWriteError(ValueError):
    """The output directory or one of its files could not be written; the message is one line."""


def describe(exc: OSError) -> str:
    """The system's reason with its code, e.g. ``No space left on device (ENOSPC)``."""
    code = errno.errorcode.get(exc.errno or 0, "")
    return f"{exc.strerror or exc}{f' ({code})' if code else ''}"


def make_out_dir(out: Path) -> Path:
    """``out`` made (with its parents) or refused: a dangling symbolic link, a file, a disk that takes none."""
    if out.is_symlink() and not out.exists():
        raise OutputWriteError(f"--out: {out} is a symbolic link to {os.readlink(out)}, which does not exist")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputWriteError(f"--out: cannot create {out}: {describe(exc)}") from None
    return out


def add_report_section(report: Path, section: str, *, first: bool = False) -> None:
    """Add a markdown section to a written report: at its end, or (``first``) before its first ``## `` heading;
    the file is rewritten whole (``write_whole``). Raises ``OutputWriteError`` naming the file."""
    try:
        text = report.read_text(encoding="utf-8")
    except OSError as exc:
        raise OutputWriteError(f"cannot read {report}: {describe(exc)}") from None
    head, sep, rest = text.partition("\n## ")
    if first and sep:
        write_whole(report, f"{head.rstrip()}\n\n{section.strip()}\n\n## {rest}")
    else:
        write_whole(report, f"{text.rstrip()}\n\n{section.strip()}\n")


def write_whole(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` (text as UTF-8) through a temporary file renamed over it, so a refusing disk
    leaves the earlier file (or none), never a cut one; raises ``OutputWriteError`` naming ``path``."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    begun = path.with_name(f".{path.name}.part")
    try:
        with begun.open("wb") as fh:
            fh.write(raw)
        os.replace(begun, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a read-only disk: nothing was begun there either
            begun.unlink(missing_ok=True)
        raise OutputWriteError(f"cannot write {path}: {describe(exc)}") from None
    return path
