"""Records reach disk as they happen: one ``os.write`` per JSON line, so a SIGKILL loses nothing finished.

Several processes of one run (``--processes``) may append to the same file: each line is written by a single
``O_APPEND`` write, which the kernel keeps whole on a local file system.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from contract.schema import META_FILE, RunMeta


class JsonlAppender:
    """Append-only JSONL file written one whole line per system call."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, obj: dict[str, Any]) -> None:
        if self._fd is None:  # a request killed during shutdown still gets its line
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        line = json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n"
        os.write(self._fd, line.encode("utf-8"))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def write_meta(run_dir: Path, meta: RunMeta) -> Path:
    """Write meta.json atomically (temp file + rename), so a reader never sees half of it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / META_FILE
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(meta.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target
