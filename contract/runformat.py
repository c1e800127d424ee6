"""The one error a malformed run-directory file raises, and the reader of a versioned JSONL file's lines.

Its own module so that the run reader (``contract.schema``) and the readers of the files it gathers
(``contract.server_metrics``, ``contract.gpu_metrics``) can use them without importing each other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class RunFormatError(ValueError):
    """A run directory file does not follow the schema; the message names file, line and what was expected."""


def read_versioned_lines(path: Path, newest: int, kind: str) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """The JSON objects of a versioned JSONL file, each with its place ('FILE: line N'), and the count of torn
    lines (a killed run: not JSON, or not UTF-8). A line that is JSON but no object with an integer ``schema``,
    or a schema newer than ``newest``, is an error naming the file, the line and the ``kind`` of file; the
    caller checks its own fields."""
    found: list[tuple[str, dict[str, Any]]] = []
    torn = 0
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj: Any = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                torn += 1
                continue
            where = f"{path}: line {lineno}"
            if not isinstance(obj, dict) or not isinstance(obj.get("schema"), int):
                raise RunFormatError(f"{where}: expected a JSON object with an integer 'schema'")
            if obj["schema"] > newest:
                raise RunFormatError(f"{where}: {kind} schema {obj['schema']} is newer than this suite reads "
                                     f"({newest})")
            found.append((where, obj))
    return found, torn
