"""A record held in memory for analysis in about a third of the space its parsed JSON takes.

Why: a run of a million requests is read whole by ``summarize``; as parsed JSON each record costs 5-7 KB (a
Python float object per chunk time, a string object per repeated label), so a long run did not fit in memory.
Chunk lists become ``array`` buffers (8 bytes a time, 4 a count, read by index, ``len`` and numpy alike)
and the strings that repeat across records (field names; label, api, category, status ...) are shared.
Nothing changes value: a list holding anything but plain numbers is left as it is, for the type check to name.
"""

from __future__ import annotations

from array import array
from typing import Any

#: record fields whose string values repeat across a run's records (shared: one object per distinct value)
SHARED_STRING_FIELDS = ("label", "api", "prompt_id", "category", "phase", "user", "chunk_tokens_source",
                        "output_tokens_source", "status", "finish_reason", "model")
_INT32 = 2**31 - 1


def _plain_numbers(values: list[Any]) -> bool:
    return all(type(v) is float or type(v) is int for v in values)


def compact_record(parsed: dict[str, Any], shared: dict[str, str]) -> dict[str, Any]:
    """``parsed`` in less memory; ``shared`` maps each string seen to the one object kept for it."""
    record = {shared.setdefault(k, k): v for k, v in parsed.items()}  # the JSON parser makes new keys per line
    times, counts = record.get("chunk_ms"), record.get("chunk_tokens")
    if isinstance(times, list) and _plain_numbers(times):
        record["chunk_ms"] = array("d", times)
    if isinstance(counts, list) and all(type(v) is int and -_INT32 <= v <= _INT32 for v in counts):
        record["chunk_tokens"] = array("i", counts)
    for key in SHARED_STRING_FIELDS:
        value = record.get(key)
        if type(value) is str:
            record[key] = shared.setdefault(value, value)
    return record
