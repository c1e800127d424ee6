"""A record held in memory for analysis in a fraction of the space its parsed JSON takes.

Why: a run of a million requests is read whole by ``summarize``; as parsed JSON each record costs 5-7 KB (a
Python float object per chunk time, a string object per repeated label, a dict of some 30 keys), so a long run
did not fit in memory. A record is kept as a read-only mapping (``CompactRecord``: readers still take
``record["key"]`` and ``record.get``) of two parts:

* a *shape* shared by every record with the same field names and the same values of the fields that repeat
  across a run (``SHAPE_FIELDS``: label, status, step ...) and of the null ones, so those cost nothing per record;
* a tuple of the record's other values, repeated strings (prompt id, user ...) shared.

The chunk lists are packed into one ``bytes`` per record where that loses nothing: arrival times as whole
microseconds (the load side writes milliseconds to 3 decimals), as gaps of at most 65.5 ms (uint16) where they
all are, and the cumulative counts as per-chunk increments (uint8): 3 bytes a chunk (5 with a longer gap)
instead of 12. Each read unpacks them into the ``array`` (``"d"`` times, ``"i"`` counts) that an unpacked record
holds, bit for bit the values parsed. Lists that cannot be packed so stay ``array`` buffers, or lists when they
hold anything but plain numbers (for the type check to name). The float fields every record has
(``PACKED_FLOAT_FIELDS``: start_s, e2e_s ...) follow in the same bytes as doubles, 8 bytes each instead of a
24-byte float object and its 8-byte reference.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Mapping
from itertools import accumulate
from operator import sub
from typing import Any

import numpy as np

#: record fields whose string values repeat across a run's records (shared: one object per distinct value)
SHARED_STRING_FIELDS = ("label", "api", "prompt_id", "category", "phase", "user", "chunk_tokens_source",
                        "output_tokens_source", "status", "finish_reason", "model")
#: fields with few distinct values in a run: held once per distinct combination (the record's shape)
SHAPE_FIELDS = frozenset(("schema", "label", "api", "category", "phase", "step", "target_c", "worker",
                          "chunk_tokens_source", "output_tokens_source", "status", "http_status", "finish_reason",
                          "max_tokens", "target_rate", "model"))
_INT32 = 2**31 - 1
_NUMBER_TYPES, _INT_TYPE = frozenset((float, int)), frozenset((int,))
# Packed chunk lists: a kind byte, the times as whole microseconds, then each chunk's count increment (uint8).
# _NARROW: the first time (int32) and the gaps after it (uint16: none over 65.5 ms), 3 bytes a chunk;
# _WIDE: every time (int32), 5 bytes a chunk. An empty pair packs to no bytes.
_WIDE, _NARROW = 0, 1
_TIMES, _COUNTS = "chunk_ms", "chunk_tokens"
#: float fields packed (as doubles, after the chunk lists) beside the record's packed chunk lists
PACKED_FLOAT_FIELDS = frozenset(("start_s", "ttft_s", "e2e_s", "send_lag_ms", "scheduled_s"))
_DOUBLE = struct.Struct("<d")
# where a field's value is found: the shape's values, the record's own values, or its packed bytes
_IN_SHAPE, _OWN, _PACKED_TIMES, _PACKED_COUNTS, _PACKED_FLOAT = range(5)
# parts of a shape's key (``_part``): in the packed bytes, as a float in them, null
_IN_PACKED, _FLOAT_PACKED, _NULL = ("packed",), ("packed float",), (None,)
_PLACED = SHAPE_FIELDS | PACKED_FLOAT_FIELDS | {_TIMES, _COUNTS}  # fields held elsewhere than the own values


class _Shape:
    """Field names in the record's order, where each value is found, the shared values, and where in the record's
    own values its packed bytes are (with how many floats they end in)."""

    __slots__ = ("floats", "keys", "packed_at", "values", "where")

    def __init__(self, keys: tuple[str, ...], where: dict[str, tuple[int, int]], values: tuple[Any, ...],
                 packed_at: int, floats: int):
        self.keys = keys
        self.where = where
        self.values = values
        self.packed_at = packed_at
        self.floats = floats


class CompactRecord(Mapping[str, Any]):
    """One record, read-only, read like the dict it was parsed from (see the module docstring)."""

    __slots__ = ("_own", "_shape")

    def __init__(self, shape: _Shape, own: tuple[Any, ...]):
        self._shape = shape
        self._own = own

    def __getitem__(self, key: str) -> Any:
        kind, i = self._shape.where[key]
        if kind == _OWN:
            return self._own[i]
        shape = self._shape
        if kind == _IN_SHAPE:
            return shape.values[i]
        packed = self._own[shape.packed_at]
        end = len(packed) - 8 * shape.floats  # where the chunk lists end and the floats begin
        if kind == _PACKED_FLOAT:
            return _DOUBLE.unpack_from(packed, end + 8 * i)[0]
        return _unpack_times(packed, end) if kind == _PACKED_TIMES else _unpack_counts(packed, end)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._shape.where else default

    def __contains__(self, key: object) -> bool:
        return key in self._shape.where

    def __iter__(self) -> Iterator[str]:
        return iter(self._shape.keys)

    def __len__(self) -> int:
        return len(self._shape.keys)

    def __repr__(self) -> str:
        return f"CompactRecord({dict(self)!r})"


def _plain_numbers(values: list[Any]) -> bool:
    return set(map(type, values)) <= _NUMBER_TYPES


def _pack(times: list[Any], counts: list[Any]) -> bytes | None:
    """``times`` and ``counts`` in ``_WIDE`` or ``_NARROW`` form, or None where either would change a value."""
    if not (len(times) == len(counts) and _plain_numbers(times) and set(map(type, counts)) <= _INT_TYPE):
        return None
    if not times:
        return b""
    try:
        steps = bytes(map(sub, counts, [0, *counts[:-1]]))
        exact = np.array(times, dtype=float)
    except (ValueError, OverflowError):  # a count that falls or rises by over 255; a number beyond a float's range
        return None
    micros = np.rint(exact * 1000.0)
    if not np.abs(micros).max() <= _INT32:  # also true for NaN
        return None
    whole = micros.astype(np.int64)
    if (whole / 1000.0).tobytes() != exact.tobytes():  # bit for bit: -0.0, NaN and 4+ decimals stay unpacked
        return None
    gaps = whole[1:] - whole[:-1]
    if len(gaps) == 0 or (gaps.min() >= 0 and gaps.max() <= 0xFFFF):
        head = bytes((_NARROW,)) + int(whole[0]).to_bytes(4, "little", signed=True) + gaps.astype("<u2").tobytes()
    else:
        head = bytes((_WIDE,)) + whole.astype("<i4").tobytes()
    return head + steps


def _chunks_in(packed: bytes, end: int) -> tuple[int, int]:
    """(chunks, where the count increments start) of chunk lists packed in ``packed[:end]``."""
    if not end:
        return 0, 0
    if packed[0] == _WIDE:
        n = (end - 1) // 5
        return n, 1 + 4 * n
    n = (end - 3) // 3
    return n, 3 + 2 * n


def _unpack_times(packed: bytes, end: int) -> array[float]:
    """The times packed in ``packed[:end]``; a copy of the last ones unpacked when read again at once.

    Why remember them: readers often test a record's times (``not rec["chunk_ms"]``) and then read them."""
    last = _LAST_TIMES[0]
    if last is not None and last[0] is packed:
        return last[1][:]  # a copy: the caller may change it
    out = array("d")
    n, _ = _chunks_in(packed, end)
    if n:
        if packed[0] == _WIDE:
            micros = np.frombuffer(packed, "<i4", n, 1).astype(np.int64)
        else:
            micros = np.empty(n, np.int64)
            micros[0] = int.from_bytes(packed[1:5], "little", signed=True)
            micros[1:] = np.frombuffer(packed, "<u2", n - 1, 5)
            np.cumsum(micros, out=micros)
        out.frombytes((micros / 1000.0).tobytes())
    _LAST_TIMES[0] = (packed, out[:])
    return out


_LAST_TIMES: list[tuple[bytes, array[float]] | None] = [None]  # (packed bytes, their times) last unpacked


def _unpack_counts(packed: bytes, end: int) -> array[int]:
    return array("i", accumulate(packed[_chunks_in(packed, end)[1]:end]))


def _unpacked(record: dict[str, Any]) -> None:
    """The chunk lists as ``array`` buffers in place (when they hold plain numbers that fit)."""
    times, counts = record.get(_TIMES), record.get(_COUNTS)
    if isinstance(times, list) and _plain_numbers(times):
        record[_TIMES] = array("d", times)
    if isinstance(counts, list) and all(type(v) is int and -_INT32 <= v <= _INT32 for v in counts):
        record[_COUNTS] = array("i", counts)


def _part(key: str, value: Any, packed: bool) -> tuple[Any, ...] | None:
    """A field's part of its record's shape key, which tells where its value is held; None: the record's own.

    In the shape: the ``SHAPE_FIELDS`` and any null field (few records differ in which are), keyed so that
    1, 1.0, True and -0.0, 0.0 differ; in the packed bytes (when the chunk lists packed) the chunk lists and the
    ``PACKED_FLOAT_FIELDS``."""
    if value is None:
        return _NULL
    if key not in _PLACED:
        return None
    if packed and (key in (_TIMES, _COUNTS) or (type(value) is float and key in PACKED_FLOAT_FIELDS)):
        return _FLOAT_PACKED if key in PACKED_FLOAT_FIELDS else _IN_PACKED
    if key not in SHAPE_FIELDS:
        return None
    if type(value) is str or type(value) is int:
        return (type(value), value)
    if type(value) is float:
        return (float, value.hex())
    return None


def compact_record(parsed: dict[str, Any], shared: dict[Any, Any]) -> CompactRecord:
    """``parsed`` in less memory; ``shared`` holds what records share (strings, shapes), one per run read."""
    for key in SHARED_STRING_FIELDS:
        value = parsed.get(key)
        if type(value) is str:
            parsed[key] = shared.setdefault(value, value)
    if parsed.get("server_request_id") == parsed.get("request_id"):
        parsed["server_request_id"] = parsed.get("request_id")  # one string object when the ids agree
    times, counts = parsed.get(_TIMES), parsed.get(_COUNTS)
    packed = _pack(times, counts) if isinstance(times, list) and isinstance(counts, list) else None
    if packed is None:
        _unpacked(parsed)
    parts = [_part(key, value, packed is not None) for key, value in parsed.items()]
    own = [value for value, part in zip(parsed.values(), parts, strict=True) if part is None]
    floats = [value for value, part in zip(parsed.values(), parts, strict=True) if part is _FLOAT_PACKED]
    if packed is not None:
        own.append(packed + struct.pack(f"<{len(floats)}d", *floats))
    shape_key = (*parsed, *parts)
    shape = shared.get(shape_key)
    if shape is None:
        shape = shared[shape_key] = _new_shape(parsed, parts, shared)
    return CompactRecord(shape, tuple(own))


def _new_shape(parsed: dict[str, Any], parts: list[tuple[Any, ...] | None], shared: dict[Any, Any]) -> _Shape:
    where: dict[str, tuple[int, int]] = {}
    values: list[Any] = []
    n_own = n_floats = 0
    for (key, value), part in zip(parsed.items(), parts, strict=True):
        key = shared.setdefault(key, key)  # the JSON parser makes new key strings per line
        if part is None:
            where[key] = (_OWN, n_own)
            n_own += 1
        elif part is _FLOAT_PACKED:
            where[key] = (_PACKED_FLOAT, n_floats)
            n_floats += 1
        elif part is _IN_PACKED:
            where[key] = (_PACKED_TIMES if key == _TIMES else _PACKED_COUNTS, 0)
        else:
            where[key] = (_IN_SHAPE, len(values))
            values.append(value)
    keys = tuple(shared.setdefault(k, k) for k in parsed)
    return _Shape(keys, where, tuple(values), n_own, n_floats)
