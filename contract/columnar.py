"""records.jsonl read by Apache Arrow's JSON reader into columns, for a long run's analysis.

Why: ``summarize`` of a million records spent minutes parsing each line in Python, compacting it
(``contract.compact``), unpacking its chunk lists again on every read and screening it record by record.
Arrow's JSON reader (``pyarrow.json.open_json``) parses the lines in native code, a block at a time, into
columns; here each block becomes a few numpy arrays (every record's chunk times in one float64 array, its
cumulative counts in one int16/int32 array, the scalar numbers as arrays) and Python lists for the rest, and
the block is let go, so the memory held is the columns, not the parsed JSON.

The records are still the contract's mappings: ``ColumnRecord`` is read like the dict a line parses to, its
``chunk_ms`` and ``chunk_tokens`` a ``memoryview`` of the run's arrays (no copy, no unpacking), numbers as Python
``float`` and ``int``. records.jsonl stays the one file; nothing is cached beside it.

The columnar path reads only what it can read exactly as ``json`` would: every column of the type the schema
says (numbers where numbers go, lists of numbers, a known status, the chunk lists of equal length, no required
key missing, no schema version newer than this suite's). Anything else (a torn or non-JSON line, a wrong type, a
number Arrow cannot hold, a block whose types differ from the first) returns None, and the caller reads the file
line by line as before, which gives the same records or the same one-line error. ``screen`` keeps out what
``contract.evidence.screen_records`` keeps out, by the same rules, on the arrays.

Two things a reader of a record can tell apart, and nothing in analysis does: a ``ColumnRecord`` has every field
some record of the file has (null where its own line had none: ``get`` reads the same), and an integer written
in a field of floats (``"start_s": 5``) reads as the float of the same value (5.0), as Arrow's column holds it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from specbench.contract.evidence import LEFT_OUT_KINDS

#: the fields read into numpy arrays (with a null mask where null is allowed), and the Arrow types accepted
_FLOATS = ("start_s", "e2e_s", "ttft_s", "send_lag_ms", "scheduled_s", "target_rate")
_INTS = ("schema", "step", "target_c", "output_tokens", "max_tokens", "prompt_seq", "worker", "prompt_tokens",
         "cached_tokens", "http_status", "turn")
_NOT_NULL = ("schema", "start_s", "e2e_s", "output_tokens")  # required by read_records / load_run's type checks
_REQUIRED_PRESENT = ("request_id", "status")  # required keys that are not numbers: never null here
_TIMES, _COUNTS = "chunk_ms", "chunk_tokens"
_INT16 = 2**15 - 1


class Columns:
    """One run's records as arrays: ``values[field]`` a numpy array (``nulls[field]`` its null mask) or a list.

    ``read[field]``: how a record reads it, (``_LIST``, the list) or (``_NUMBER``, a memoryview of the values, one
    of the null mask or None) or (``_CHUNKS``, a memoryview of the flat values, one of the offsets): a memoryview
    gives a Python float or int per index, without numpy's scalar objects."""

    __slots__ = ("cache", "counts", "keys", "n", "nulls", "offsets", "read", "times", "values", "where")

    def __init__(self, keys: tuple[str, ...], values: dict[str, Any], nulls: dict[str, np.ndarray],
                 offsets: np.ndarray, times: np.ndarray, counts: np.ndarray):
        self.keys = keys
        self.values = values
        self.nulls = nulls
        self.offsets = offsets
        self.times = times
        self.counts = counts
        self.n = len(offsets) - 1
        self.where = {key: i for i, key in enumerate(keys)}
        self.cache: dict[str, np.ndarray] = {}  # arrays derived from the columns (``ok``)
        self.read: dict[str, tuple[int, Any, Any]] = {}
        for key, column in values.items():
            if type(column) is list:
                self.read[key] = (_LIST, column, None)
            else:
                mask = nulls.get(key)
                self.read[key] = (_NUMBER, _view(column), _view(mask) if mask is not None and mask.any() else None)
        self.read[_TIMES] = (_CHUNKS, _view(times), _view(offsets))
        self.read[_COUNTS] = (_CHUNKS, _view(counts), _view(offsets))


_LIST, _NUMBER, _CHUNKS = range(3)


def _view(array: np.ndarray) -> memoryview:
    return memoryview(np.ascontiguousarray(array))  # type: ignore[arg-type]  # numpy arrays export the buffer


class ColumnRecord(Mapping[str, Any]):
    """Record ``i`` of ``Columns``, read-only, read like the dict its line parses to."""

    __slots__ = ("_cols", "_i")

    def __init__(self, cols: Columns, i: int):
        self._cols = cols
        self._i = i

    def __getitem__(self, key: str) -> Any:
        kind, column, other = self._cols.read[key]  # KeyError for a field no record has
        i = self._i
        if kind == _LIST:
            return column[i]
        if kind == _NUMBER:
            return None if other is not None and other[i] else column[i]
        return column[other[i]:other[i + 1]]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._cols.where else default

    def __contains__(self, key: object) -> bool:
        return key in self._cols.where

    def __iter__(self) -> Iterator[str]:
        return iter(self._cols.keys)

    def __len__(self) -> int:
        return len(self._cols.keys)

    def __repr__(self) -> str:
        return f"ColumnRecord({dict(self)!r})"


class ColumnRecords(list[Any]):  # a list of ColumnRecord, as read_records returns
    """The records of one ``Columns``, type-checked and screenable as arrays (``typed``, ``screen``)."""

    typed = True  # load_run's per-record type checks hold by construction

    def __init__(self, cols: Columns):
        super().__init__(ColumnRecord(cols, i) for i in range(cols.n))
        self.columns = cols

    def screen(self) -> tuple[list[Any], dict[str, int]]:
        """``contract.evidence.screen_records`` of these records, on the arrays."""
        kinds = problem_kinds(self.columns)
        kept = [rec for rec, kind in zip(self, kinds, strict=True) if kind < 0]
        counts = np.bincount(kinds[kinds >= 0], minlength=len(LEFT_OUT_KINDS))
        return kept, {LEFT_OUT_KINDS[k]: int(c) for k, c in enumerate(counts) if c}


def columns_of(records: Any) -> tuple[Columns, np.ndarray] | None:
    """(their ``Columns``, their indices in it) where ``records`` is a list of ``ColumnRecord`` of one run's
    columns, else None (any other records, or an iterator: the caller goes record by record)."""
    if not isinstance(records, list) or not records or type(records[0]) is not ColumnRecord:
        return None
    cols = records[0]._cols
    if not all(type(r) is ColumnRecord and r._cols is cols for r in records):
        return None
    return cols, np.fromiter((r._i for r in records), dtype=np.int64, count=len(records))


def ok_mask(cols: Columns) -> np.ndarray:
    """Per record of ``cols``: its status is "ok"."""
    if "ok" not in cols.cache:
        cols.cache["ok"] = np.fromiter((s == "ok" for s in cols.values["status"]), dtype=bool, count=cols.n)
    return cols.cache["ok"]


def token_arrivals_of(cols: Columns, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``contract.window.token_arrivals`` of records ``idx``, concatenated: (absolute arrival times in s, tokens
    that arrived at each, the position in ``idx`` of the record each belongs to); element by element the same
    arithmetic, so the same values bit for bit."""
    off = cols.offsets
    lengths = off[idx + 1] - off[idx]
    owner = np.repeat(np.arange(len(idx)), lengths)
    firsts = np.cumsum(lengths) - lengths  # where each record's chunks start in the output
    pos = np.repeat(off[idx] - firsts, lengths) + np.arange(int(lengths.sum()))
    times = np.repeat(cols.values["start_s"][idx], lengths) + cols.times[pos] / 1000.0
    cum = cols.counts[pos].astype(float)
    new = cum.copy()
    new[1:] -= cum[:-1]
    new[firsts[lengths > 0]] = cum[firsts[lengths > 0]]  # np.diff(cum, prepend=0.0): a record's first from 0
    return times, new, owner


def ok_arrivals(records: Any, window: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(times, tokens) of every chunk of the ok records with chunks (and, with ``window`` (t0, t1), that started
    before t1 and ended at t0 or later), in record order; None where ``records`` are not columns."""
    found = columns_of(records)
    if found is None:
        return None
    cols, idx = found
    off = cols.offsets
    keep = ok_mask(cols)[idx] & (off[idx + 1] > off[idx])
    if window is not None:
        start, e2e = cols.values["start_s"][idx], cols.values["e2e_s"][idx]
        keep &= ~((start >= window[1]) | (start + e2e < window[0]))
    times, new, _ = token_arrivals_of(cols, idx[keep])
    return times, new


def itl_samples_of(records: Any) -> np.ndarray | None:
    """``analysis.records.request_metrics.itl_samples_s`` of every record, concatenated in record order (the
    same arithmetic element by element); None where ``records`` are not columns."""
    found = columns_of(records)
    if found is None:
        return None
    cols, idx = found
    off = cols.offsets
    lengths = off[idx + 1] - off[idx]
    owner = np.repeat(np.arange(len(idx)), lengths)
    firsts = np.cumsum(lengths) - lengths
    pos = np.repeat(off[idx] - firsts, lengths) + np.arange(int(lengths.sum()))
    ms, cum = cols.times[pos], cols.counts[pos].astype(float)
    pair = owner[1:] == owner[:-1]  # a gap between two chunks of one record
    gaps_s = (ms[1:] - ms[:-1])[pair] / 1000.0
    new = (cum[1:] - cum[:-1])[pair].astype(int)
    keep = new > 0
    return np.repeat(gaps_s[keep] / new[keep], new[keep])


def span_mask(records: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(start_s, start_s + e2e_s) of ``records`` as arrays, in order; None where they are not columns."""
    found = columns_of(records)
    if found is None:
        return None
    cols, idx = found
    start = cols.values["start_s"][idx]
    return start, start + cols.values["e2e_s"][idx]


def _segment_any(flags: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per record: whether any of its elements (``offsets`` cut the flat ``flags``) is set."""
    running = np.concatenate(([0], np.cumsum(flags, dtype=np.int64)))
    return running[offsets[1:]] > running[offsets[:-1]]


def problem_kinds(cols: Columns) -> np.ndarray:
    """Per record: the index in ``LEFT_OUT_KINDS`` of why it is left out (the first kind that applies), -1 kept.

    The rules of ``contract.evidence.record_problem`` and ``screen_records``, on the arrays."""
    n, off, times = cols.n, cols.offsets, cols.times
    kinds = np.full(n, -1, dtype=np.int64)
    seen: set[Any] = set()
    duplicate = np.zeros(n, dtype=bool)
    for i, rid in enumerate(cols.values["request_id"]):
        duplicate[i] = rid in seen
        seen.add(rid)

    def scalar(key: str) -> tuple[np.ndarray, np.ndarray]:
        values = cols.values[key]
        present = ~cols.nulls[key] if key in cols.nulls else np.ones(n, dtype=bool)
        return values, present

    start, _ = scalar("start_s")
    e2e, _ = scalar("e2e_s")
    ttft, has_ttft = scalar("ttft_s") if "ttft_s" in cols.values else (np.zeros(n), np.zeros(n, dtype=bool))
    non_finite = ~np.isfinite(start) | ~np.isfinite(e2e) | (has_ttft & ~np.isfinite(ttft))
    non_finite |= _segment_any(~np.isfinite(times), off)
    negative = (e2e < 0) | (has_ttft & (ttft < 0)) | _segment_any(times < 0, off)
    step_back = np.zeros(len(times), dtype=bool)
    step_back[1:] = times[1:] < times[:-1]
    step_back[off[:-1][off[:-1] < len(times)]] = False  # a record's first chunk has no earlier one of its own
    reversed_ = _segment_any(step_back, off)
    impossible = _impossible_tokens(cols) & (np.asarray(cols.values["status"], dtype=object) == "ok")
    for k, flags in enumerate((duplicate, non_finite, negative, reversed_, impossible)):
        kinds[(kinds < 0) & flags] = k
    return kinds


def _impossible_tokens(cols: Columns) -> np.ndarray:
    """``contract.evidence.token_count_problem`` is not None, per record (any status)."""
    off, counts = cols.offsets, cols.counts.astype(np.int64)
    final = cols.values["output_tokens"]
    fell = np.zeros(len(counts), dtype=bool)
    fell[1:] = counts[1:] < counts[:-1]
    fell[off[:-1][off[:-1] < len(counts)]] = False
    bad = _segment_any(counts < 0, off) | (final < 0) | _segment_any(fell, off)
    top = np.maximum(final, 0)
    lengths = np.diff(off)
    has = lengths > 0
    if has.any():
        top[has] = np.maximum(top[has], np.maximum.reduceat(counts, off[:-1][has]))
    top = np.maximum(top, final)
    if "max_tokens" in cols.values:
        limit = cols.values["max_tokens"]
        given = ~cols.nulls["max_tokens"] & (limit != 0)
        bad |= given & (top > limit)
    return bad


def read_columns(path: Path, newest: int, statuses: Collection[str]) -> ColumnRecords | None:
    """records.jsonl as ``ColumnRecords``, or None where the columnar reader cannot read it exactly (see above):
    a record whose schema version is above ``newest`` or whose status is not in ``statuses`` included."""
    try:
        import pyarrow as pa
        import pyarrow.json as pj
    except ImportError:  # pragma: no cover - a dependency; the line-by-line reader still reads the file
        return None
    try:
        reader = pj.open_json(path, read_options=pj.ReadOptions(block_size=1 << 22))
        blocks = [_block(batch, pa, newest, frozenset(statuses)) for batch in reader]
        return ColumnRecords(_join(blocks)) if blocks else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, _NotExact):
        return None


class _NotExact(Exception):
    """A block the columnar reader cannot hold exactly as ``json`` parses it: read line by line instead."""


def _numbers(column: Any, pa: Any, ints: bool) -> tuple[np.ndarray, np.ndarray]:
    typ = column.type
    if pa.types.is_null(typ):
        return np.zeros(len(column), dtype=np.int64 if ints else float), np.ones(len(column), dtype=bool)
    if not (pa.types.is_int64(typ) if ints else pa.types.is_float64(typ)):
        raise _NotExact
    nulls = column.is_null().to_numpy(zero_copy_only=False)
    values = column.fill_null(0).to_numpy(zero_copy_only=False)
    return values, nulls


def _list_values(column: Any, pa: Any, ints: bool) -> tuple[np.ndarray, np.ndarray]:
    typ = column.type
    if not pa.types.is_list(typ) or column.null_count:
        raise _NotExact
    item = typ.value_type
    if not (pa.types.is_null(item) or (pa.types.is_int64(item) if ints else pa.types.is_float64(item))):
        raise _NotExact
    flat = column.flatten()
    if flat.null_count:
        raise _NotExact
    values = flat.to_numpy(zero_copy_only=False) if len(flat) else np.zeros(0)
    offsets = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return values.astype(np.int64 if ints else float, copy=False), offsets - offsets[0]


def _block(batch: Any, pa: Any, newest: int, statuses: frozenset[str]) -> dict[str, Any]:
    """One block of lines as arrays and lists; raises ``_NotExact`` where it cannot be read exactly."""
    names = batch.schema.names
    if len(set(names)) != len(names) or _TIMES not in names or _COUNTS not in names:
        raise _NotExact
    out: dict[str, Any] = {"names": tuple(names), "values": {}, "nulls": {}, "n": batch.num_rows}
    times, off_t = _list_values(batch.column(_TIMES), pa, ints=False)
    counts, off_c = _list_values(batch.column(_COUNTS), pa, ints=True)
    if not np.array_equal(off_t, off_c):
        raise _NotExact  # chunk lists of different lengths: the line reader names the line
    out["times"], out["counts"], out["offsets"] = times, counts, off_t
    for name in names:
        if name not in (_TIMES, _COUNTS):
            _field(out, name, batch.column(name), pa)
    for name in (*_NOT_NULL, *_REQUIRED_PRESENT):
        if name not in out["values"]:
            raise _NotExact
    if any(v is None for v in out["values"]["request_id"]) or not set(out["values"]["status"]) <= statuses:
        raise _NotExact
    if out["values"]["schema"].max(initial=0) > newest:
        raise _NotExact
    return out


def _field(out: dict[str, Any], name: str, column: Any, pa: Any) -> None:
    """One field of a block into ``out``: numbers as an array and its null mask, anything else as a list."""
    if name in _FLOATS or name in _INTS:
        values, nulls = _numbers(column, pa, ints=name in _INTS)
        if name in _NOT_NULL and nulls.any():
            raise _NotExact
        out["values"][name], out["nulls"][name] = values, nulls
        return
    if name == "spec" and not (pa.types.is_struct(column.type) or pa.types.is_null(column.type)):
        raise _NotExact  # load_run's type check names a spec that is not an object
    if pa.types.is_float64(column.type) or pa.types.is_int64(column.type):
        raise _NotExact  # a number where the record has text or an object: keep json's exact value
    out["values"][name] = column.to_pylist()


def _shared(values: list[Any], shared: dict[Any, Any]) -> list[Any]:
    return [shared.setdefault(v, v) if type(v) is str else v for v in values]


def _join(blocks: list[dict[str, Any]]) -> Columns:
    """The blocks as one ``Columns``: a field some block lacks is null there; numbers of one dtype throughout."""
    names: list[str] = []
    for block in blocks:
        names.extend(k for k in block["names"] if k not in names)
    if any(block["names"] != tuple(names) for block in blocks):
        raise _NotExact  # fields in another order or missing in part of the file: the line reader keeps the order
    values: dict[str, Any] = {}
    nulls: dict[str, np.ndarray] = {}
    shared: dict[Any, Any] = {}
    for name in names:
        if name in (_TIMES, _COUNTS):
            continue
        if name in blocks[0]["nulls"]:
            values[name] = np.concatenate([b["values"][name] for b in blocks])
            nulls[name] = np.concatenate([b["nulls"][name] for b in blocks])
        else:
            joined: list[Any] = []
            for b in blocks:
                joined.extend(_shared(b["values"][name], shared) if name != "request_id" else b["values"][name])
            values[name] = joined
    if "server_request_id" in values:  # one string object where the ids agree
        values["server_request_id"] = [rid if sid == rid else sid
                                       for sid, rid in zip(values["server_request_id"], values["request_id"],
                                                           strict=True)]
    sizes = np.concatenate([[0], *[np.diff(b["offsets"]) for b in blocks]])
    offsets = np.cumsum(sizes, dtype=np.int64)
    times = np.concatenate([b["times"] for b in blocks]).astype(float, copy=False)
    counts64 = np.concatenate([b["counts"] for b in blocks]).astype(np.int64, copy=False)
    narrow = np.int16 if (len(counts64) == 0 or np.abs(counts64).max() <= _INT16) else np.int32
    if len(counts64) and np.abs(counts64).max() > 2**31 - 1:
        raise _NotExact
    counts = counts64.astype(narrow)
    return Columns(tuple(names), values, nulls, offsets, times, counts)
