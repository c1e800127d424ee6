"""Reading a user's JSONL file (prompt sets, Mooncake traces): one JSON object a line, errors naming the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def json_objects(text: str, display: str, error: type[Exception],
                 expected: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Each non-blank line as (line number, ``"FILE line N"``, object); ``error`` (one line naming the file and the
    line) for a line that is not JSON, or not an object (``expected`` says what the object should hold)."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{display} line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise error(f"{where}: expected a JSON object with {expected}")
        yield lineno, where, obj
