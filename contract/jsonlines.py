"""Reading a user's JSONL file (prompt sets, Mooncake traces): one JSON object a line, errors naming the line."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _LongDigits(str):
    """An integer with more digits than Python converts (``sys.get_int_max_str_digits()``), kept as its text."""


def _int_or_long(text: str) -> Any:
    limit = sys.get_int_max_str_digits()
    return _LongDigits(text) if limit and len(text.lstrip("-")) > limit else int(text)


def _long_number_at(value: Any, path: str = "") -> tuple[str, int] | None:
    """(where, digits) of the first over-long integer in ``value``: ``'hash_ids'[3]``, ``[0]`` for a list."""
    if isinstance(value, _LongDigits):
        return path or "the value", len(value.lstrip("-"))
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _long_number_at(item, f"{path}[{key!r}]" if path else repr(key) if isinstance(key, str)
                                else f"[{key}]")
        if found:
            return found
    return None


def syntax_text(exc: json.JSONDecodeError, with_line: bool = False) -> str:
    """A JSON syntax error in words: ``Unterminated string starting at column 59`` (the parser's message ends
    with "at" for some mistakes, "Expecting value" for others)."""
    place = f"line {exc.lineno} column {exc.colno}" if with_line else f"column {exc.colno}"
    return f"{exc.msg} {place}" if exc.msg.endswith(" at") else f"{exc.msg} at {place}"


def decode_problem(text: str) -> tuple[Any, str | None]:
    """``json.loads(text)`` and what is wrong with it beyond a syntax error (raised as JSONDecodeError): JSON
    nested deeper than the parser can go, or a lone UTF-16 surrogate escape (``\\ud800`` without its pair),
    which decodes to no character any file, header or hash can hold, or an integer with more digits than Python
    converts (4300), named by where it stands. (value, None) when it is fine."""
    try:
        value = json.loads(text)
    except RecursionError:
        return None, "JSON nested too deeply (hundreds of levels; a prompt needs two or three)"
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer past Python's digit limit: find where it stands, to name the field
        found = _long_number_at(json.loads(text, parse_int=_int_or_long))
        where, digits = found or ("a number", 0)
        field = f"field {where}" if not where.startswith(("[", "the ")) else f"value {where}"
        return None, (f"{field}: a whole number of {digits} digits; at most {sys.get_int_max_str_digits()} digits "
                      "are read (a count or a time needs a few)")
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        return None, "a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair) is not text"
    return value, None


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def json_objects(text: str | Iterable[str], display: str, error: type[Exception],
                 expected: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Each non-blank line as (line number, ``"FILE line N"``, object); ``error`` (one line naming the file and the
    line) for a line that is not JSON, or not an object (``expected`` says what the object should hold).
    ``text`` is the whole file, or its lines as they are read (a file read line by line fails on its first bad
    line without being read whole)."""
    lines = text.splitlines() if isinstance(text, str) else text
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{display} line {lineno}"
        try:
            obj, problem = decode_problem(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: invalid JSON ({syntax_text(exc)})") from None
        if problem:
            raise error(f"{where}: {problem}")
        if not isinstance(obj, dict):
            raise error(f"{where}: expected a JSON object with {expected}")
        yield lineno, where, obj
