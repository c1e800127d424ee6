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

from array import array
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from specbench.contract.evidence import LEFT_OUT_KINDS

#: the fields read into numpy arrays (with a null mask where null is allowed), and the Arrow types accepted
_FLOATS = ("start_s", "e2e_s", "ttft_s", "send_lag_ms", "scheduled_s", "target_rate", "recv_lag_ms",
           "write_ms")
_INTS = ("schema", "step", "target_c", "output_tokens", "max_tokens", "prompt_seq", "worker", "prompt_tokens",
         "cached_tokens", "http_status", "turn")
_NOT_NULL = ("schema", "start_s", "e2e_s", "output_tokens")  # required by read_records / load_run's type checks
#: the fields the screening reads as arrays: kept as arrays even where null throughout
_ARRAYS_READ = ("start_s", "e2e_s", "ttft_s", "output_tokens", "max_tokens")
_REQUIRED_PRESENT = ("request_id", "status")  # required keys that are not numbers: never null here
_TIMES, _COUNTS = "chunk_ms", "chunk_tokens"


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
            if not isinstance(column, np.ndarray):  # a list, or text as _Text or _Codes
                self.read[key] = (_LIST, column, None)
            else:
                mask = nulls.get(key)
                self.read[key] = (_NUMBER, _view(column), _view(mask) if mask is not None and mask.any() else None)
        # times as whole microseconds (int32) where that holds every value bit for bit (contract.compact's test)
        self.read[_TIMES] = (_MICROS, times, _view(offsets)) if times.dtype == np.int32 else \
            (_CHUNKS, _view(times), _view(offsets))
        self.read[_COUNTS] = (_CHUNKS, _view(counts), _view(offsets))


_LIST, _NUMBER, _CHUNKS, _MICROS = range(4)


def chunk_ms(cols: Columns, where: Any) -> np.ndarray:
    """The chunk times (ms, float64) at ``where`` of the flat times: the values parsed, bit for bit."""
    times = cols.times[where]
    return times / 1000.0 if times.dtype == np.int32 else times


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
        if kind == _MICROS:
            return memoryview(column[other[i]:other[i + 1]] / 1000.0)
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
        status = cols.values["status"]
        if isinstance(status, _Codes):
            cols.cache["ok"] = np.array([v == "ok" for v in status.values], dtype=bool)[np.asarray(status.codes)]
        else:
            cols.cache["ok"] = np.fromiter((s == "ok" for s in status), dtype=bool, count=cols.n)
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
    times = np.repeat(cols.values["start_s"][idx], lengths) + chunk_ms(cols, pos) / 1000.0
    cum = cols.counts[pos].astype(float)
    new = cum.copy()
    new[1:] -= cum[:-1]
    new[firsts[lengths > 0]] = cum[firsts[lengths > 0]]  # np.diff(cum, prepend=0.0): a record's first from 0
    return times, new, owner


_SLICE = 2048  # records whose chunks are worked on at once: a step of a million-record run in small arrays


def ok_arrivals(records: Any, window: tuple[float, float] | None) -> Iterator[tuple[np.ndarray, np.ndarray]] | None:
    """(times, tokens) of every chunk of the ok records with chunks (and, with ``window`` (t0, t1), that started
    before t1 and ended at t0 or later), in record order, a slice of records at a time; None where ``records`` are
    not columns."""
    found = columns_of(records)
    if found is None:
        return None
    cols, idx = found
    off = cols.offsets
    keep = ok_mask(cols)[idx] & (off[idx + 1] > off[idx])
    if window is not None:
        start, e2e = cols.values["start_s"][idx], cols.values["e2e_s"][idx]
        keep &= ~((start >= window[1]) | (start + e2e < window[0]))
    chosen = idx[keep]
    return (token_arrivals_of(cols, chosen[i:i + _SLICE])[:2] for i in range(0, len(chosen), _SLICE))


def itl_samples_of(records: Any) -> np.ndarray | None:
    """``analysis.records.request_metrics.itl_samples_s`` of every record, concatenated in record order (the
    same arithmetic element by element); None where ``records`` are not columns."""
    found = columns_of(records)
    if found is None:
        return None
    cols, every = found
    off = cols.offsets
    pooled = array("d")
    for i in range(0, len(every), _SLICE):
        idx = every[i:i + _SLICE]
        lengths = off[idx + 1] - off[idx]
        owner = np.repeat(np.arange(len(idx)), lengths)
        firsts = np.cumsum(lengths) - lengths
        pos = np.repeat(off[idx] - firsts, lengths) + np.arange(int(lengths.sum()))
        ms, cum = chunk_ms(cols, pos), cols.counts[pos].astype(float)
        pair = owner[1:] == owner[:-1]  # a gap between two chunks of one record
        gaps_s = (ms[1:] - ms[:-1])[pair] / 1000.0
        new = (cum[1:] - cum[:-1])[pair].astype(int)
        keep = new > 0
        pooled.frombytes(np.repeat(gaps_s[keep] / new[keep], new[keep]).tobytes())
    return np.frombuffer(pooled, dtype=float)


def span_mask(records: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(start_s, start_s + e2e_s) of ``records`` as arrays, in order; None where they are not columns."""
    found = columns_of(records)
    if found is None:
        return None
    cols, idx = found
    start = cols.values["start_s"][idx]
    return start, start + cols.values["e2e_s"][idx]


_FLAT_SLICE = 1 << 22  # chunks tested at once: a million-record run's flags never all held


def _records_where(test: Callable[[np.ndarray], np.ndarray] | None, flat: np.ndarray,
                   offsets: np.ndarray) -> np.ndarray:
    """Per record (``offsets`` cut ``flat``): whether ``test`` holds for any of its elements, or with ``test`` None,
    whether any element is below the one before it in the same record; a slice of ``flat`` at a time."""
    hits = []
    for a in range(0, len(flat), _FLAT_SLICE):
        b = min(a + _FLAT_SLICE, len(flat))
        if test is not None:
            hits.append(np.flatnonzero(test(flat[a:b])) + a)
        elif b > max(a, 1):
            part = flat[max(a, 1) - 1:b]
            hits.append(np.flatnonzero(part[1:] < part[:-1]) + max(a, 1))
    out = np.zeros(len(offsets) - 1, dtype=bool)
    where = np.concatenate(hits) if hits else np.zeros(0, dtype=np.int64)
    owner = np.searchsorted(offsets, where, side="right") - 1
    if test is None:
        owner = owner[offsets[owner] != where]  # a record's first element has no earlier one of its own
    out[owner] = True
    return out


def _repeated(ids: Any) -> np.ndarray:
    """Per record: its request id is one an earlier record had (the ids as ``_Text``, or a list)."""
    duplicate = np.zeros(len(ids), dtype=bool)
    if isinstance(ids, _Text) and len(ids):
        import pyarrow as pa  # present: the columns were read by it

        offsets = np.concatenate(([0], ids.ends)).astype(np.int64)
        text = pa.LargeStringArray.from_buffers(len(ids), pa.py_buffer(offsets), pa.py_buffer(ids.data))
        first_seen = text.dictionary_encode().indices.to_numpy(zero_copy_only=False)  # codes in order of first use
        duplicate[1:] = first_seen[1:] <= np.maximum.accumulate(first_seen)[:-1]
        return duplicate
    seen: set[Any] = set()
    for i, rid in enumerate(ids):
        duplicate[i] = rid in seen
        seen.add(rid)
    return duplicate


def problem_kinds(cols: Columns) -> np.ndarray:
    """Per record: the index in ``LEFT_OUT_KINDS`` of why it is left out (the first kind that applies), -1 kept.

    The rules of ``contract.evidence.record_problem`` and ``screen_records``, on the arrays."""
    n, off, times = cols.n, cols.offsets, cols.times  # whole microseconds order and sign as the ms do
    kinds = np.full(n, -1, dtype=np.int64)
    duplicate = _repeated(cols.values["request_id"])

    def scalar(key: str) -> tuple[np.ndarray, np.ndarray]:
        values = cols.values[key]
        present = ~cols.nulls[key] if key in cols.nulls else np.ones(n, dtype=bool)
        return values, present

    start, _ = scalar("start_s")
    e2e, _ = scalar("e2e_s")
    ttft, has_ttft = scalar("ttft_s") if "ttft_s" in cols.values else (np.zeros(n), np.zeros(n, dtype=bool))
    non_finite = ~np.isfinite(start) | ~np.isfinite(e2e) | (has_ttft & ~np.isfinite(ttft))
    non_finite |= _records_where(lambda t: ~np.isfinite(t), times, off)
    negative = (e2e < 0) | (has_ttft & (ttft < 0)) | _records_where(lambda t: t < 0, times, off)
    reversed_ = _records_where(None, times, off)
    impossible = _impossible_tokens(cols) & ok_mask(cols)
    for k, flags in enumerate((duplicate, non_finite, negative, reversed_, impossible)):
        kinds[(kinds < 0) & flags] = k
    return kinds


def _impossible_tokens(cols: Columns) -> np.ndarray:
    """``contract.evidence.token_count_problem`` is not None, per record (any status)."""
    off, counts = cols.offsets, cols.counts  # the narrowest integers that hold them: compared, never summed
    final = cols.values["output_tokens"].astype(np.int64)
    bad = _records_where(lambda c: c < 0, counts, off) | (final < 0) | _records_where(None, counts, off)
    top = np.maximum(final, 0)
    lengths = np.diff(off)
    has = lengths > 0
    if has.any():
        top[has] = np.maximum(top[has], np.maximum.reduceat(counts, off[:-1][has]).astype(np.int64))
    top = np.maximum(top, final)
    if "max_tokens" in cols.values:
        limit = cols.values["max_tokens"].astype(np.int64)
        given = (~cols.nulls["max_tokens"] if "max_tokens" in cols.nulls else True) & (limit != 0)
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
        gather = _Gather(pa, newest, frozenset(statuses))
        for batch in reader:
            gather.add(batch)
            pa.default_memory_pool().release_unused()  # the block's parse, given back before the next
        return ColumnRecords(gather.columns()) if gather.n else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, _NotExact):
        return None


class _NotExact(Exception):
    """A block the columnar reader cannot hold exactly as ``json`` parses it: read line by line instead."""


#: text fields whose values are mostly distinct: held as UTF-8 bytes end to end (``_Text``), not one str each
_DISTINCT_TEXT = frozenset(("request_id", "server_request_id", "answer_digest", "conversation_id", "error"))


class _Text:
    """A text column of mostly distinct values: one UTF-8 buffer and where each value ends; None where null."""

    __slots__ = ("data", "ends", "nulls")

    def __init__(self, data: bytearray, ends: np.ndarray, nulls: np.ndarray | None):
        self.data, self.ends, self.nulls = data, ends, nulls

    def __getitem__(self, i: int) -> str | None:
        if self.nulls is not None and self.nulls[i]:
            return None
        return self.data[self.ends[i - 1] if i else 0:self.ends[i]].decode()

    def __len__(self) -> int:
        return len(self.ends)

    def __iter__(self) -> Iterator[str | None]:
        return (self[i] for i in range(len(self.ends)))


class _Codes:
    """A text column of few distinct values: each record's code into the list of values (None included)."""

    __slots__ = ("codes", "values")

    def __init__(self, codes: np.ndarray, values: list[Any]):
        self.codes, self.values = memoryview(codes), values  # type: ignore[arg-type]  # numpy's buffer

    def __getitem__(self, i: int) -> Any:
        return self.values[self.codes[i]]

    def __len__(self) -> int:
        return len(self.codes)

    def __iter__(self) -> Iterator[Any]:
        values = self.values
        return (values[c] for c in self.codes)


class _Gather:
    """The blocks of Arrow's reader appended to growing buffers, each block let go once read."""

    def __init__(self, pa: Any, newest: int, statuses: frozenset[str]):
        self.pa, self.newest, self.statuses = pa, newest, statuses
        self.names: tuple[str, ...] | None = None
        self.n = 0
        self.times: array[Any] = array("i")
        self.counts: array[Any] = array("h")
        self.lengths = array("q")
        self.numbers: dict[str, tuple[array[Any], bytearray]] = {}
        self.texts: dict[str, tuple[bytearray, array[int], bytearray]] = {}
        self.codes: dict[str, tuple[array[int], dict[Any, int], list[Any]]] = {}
        self.lists: dict[str, list[Any]] = {}

    def add(self, batch: Any) -> None:
        pa, names = self.pa, tuple(batch.schema.names)
        if self.names is None:
            if len(set(names)) != len(names) or _TIMES not in names or _COUNTS not in names or \
                    not all(k in names for k in (*_NOT_NULL, *_REQUIRED_PRESENT)):
                raise _NotExact
            self.names = names
        elif names != self.names:
            raise _NotExact  # fields in another order or missing in part of the file: the line reader keeps the order
        times, off_t = _list_values(batch.column(_TIMES), pa, ints=False)
        counts, off_c = _list_values(batch.column(_COUNTS), pa, ints=True)
        if not np.array_equal(off_t, off_c):
            raise _NotExact  # chunk lists of different lengths: the line reader names the line
        self._add_times(times.astype(float, copy=False))
        self._add_counts(counts)
        self.lengths.frombytes(np.diff(off_t).astype(np.int64).tobytes())
        for name in names:
            if name not in (_TIMES, _COUNTS):
                self._field(name, batch.column(name))
        self.n += batch.num_rows

    def _add_times(self, times: np.ndarray) -> None:
        """Times kept as whole microseconds (int32) while that holds them bit for bit (``contract.compact``'s
        test: -0.0, NaN and a fourth decimal do not), else as float64 from then on."""
        if self.times.typecode == "i":
            micros = np.rint(times * 1000.0)
            if not len(times) or (np.abs(micros).max() <= 2**31 - 1
                                  and (micros.astype(np.int64) / 1000.0).tobytes() == times.tobytes()):
                self.times.frombytes(micros.astype(np.int32).tobytes())
                return
            self.times = array("d", (np.frombuffer(self.times, dtype=np.int32) / 1000.0).tobytes())
        self.times.frombytes(times.tobytes())

    def _add_counts(self, counts: np.ndarray) -> None:
        """Counts kept as int16 while they fit (most runs), else int32; past that the line reader reads the file."""
        low, high = (int(counts.min()), int(counts.max())) if len(counts) else (0, 0)
        if low < -2**31 or high > 2**31 - 1:
            raise _NotExact
        if self.counts.typecode == "h" and (low < -2**15 or high > 2**15 - 1):
            self.counts = array("i", self.counts)
        self.counts.frombytes(counts.astype(np.int16 if self.counts.typecode == "h" else np.int32).tobytes())

    def _field(self, name: str, column: Any) -> None:
        pa, typ = self.pa, column.type
        if name in _FLOATS or name in _INTS:
            values, nulls = _numbers(column, pa, ints=name in _INTS)
            if name in _NOT_NULL and nulls.any():
                raise _NotExact
            if name == "schema" and values.max(initial=0) > self.newest:
                raise _NotExact
            buf, mask = self.numbers.setdefault(name, (array("q" if name in _INTS else "d"), bytearray()))
            buf.frombytes(values.tobytes())
            mask.extend(nulls.astype(np.uint8).tobytes())
            return
        if name == "spec" and not (pa.types.is_struct(typ) or pa.types.is_null(typ)):
            raise _NotExact  # load_run's type check names a spec that is not an object
        if pa.types.is_float64(typ) or pa.types.is_int64(typ):
            raise _NotExact  # a number where the record has text or an object: keep json's exact value
        text = pa.types.is_string(typ) or pa.types.is_null(typ)
        if name in _DISTINCT_TEXT and text:
            self._text(name, column)
        elif text and name not in self.lists:
            self._code(name, column)
        elif name in self.codes or name in self.texts:
            raise _NotExact  # text in one block, objects in another: read line by line
        else:
            self.lists.setdefault(name, []).extend(column.to_pylist())
        self._required(name, column)

    def _required(self, name: str, column: Any) -> None:
        """A missing or null request id, a status not in the schema's: the line reader names the line."""
        if name == "request_id" and column.null_count:
            raise _NotExact
        if name == "status" and not set(column.unique().to_pylist()) <= self.statuses:
            raise _NotExact

    def _text(self, name: str, column: Any) -> None:
        data, ends, nulls = self.texts.setdefault(name, (bytearray(), array("q"), bytearray()))
        if self.pa.types.is_null(column.type):
            ends.extend([len(data)] * len(column))
            nulls.extend(b"\x01" * len(column))
            return
        _, offset_buffer, raw = column.buffers()  # validity, int32 offsets, UTF-8 data
        offsets = np.frombuffer(offset_buffer, dtype=np.int32)[column.offset:column.offset + len(column) + 1]
        offsets = offsets.astype(np.int64)
        data_bytes = raw.to_pybytes()[offsets[0]:offsets[-1]] if raw is not None else b""
        ends.frombytes((offsets[1:] - offsets[0] + len(data)).tobytes())
        data.extend(data_bytes)
        nulls.extend(column.is_null().to_numpy(zero_copy_only=False).astype(np.uint8).tobytes())

    def _code(self, name: str, column: Any) -> None:
        codes, index, values = self.codes.setdefault(name, (array("I"), {}, []))
        if self.pa.types.is_null(column.type):
            column = column.cast(self.pa.string())
        encoded = column.dictionary_encode()  # codes in this block; nulls have none
        local = []
        for value in [*encoded.dictionary.to_pylist(), *([None] if encoded.indices.null_count else [])]:
            if value not in index:
                index[value] = len(values)
                values.append(value)
            local.append(index[value])
        indices = encoded.indices.fill_null(len(local) - 1) if encoded.indices.null_count else encoded.indices
        block = np.asarray(local, dtype=np.int64)[indices.to_numpy(zero_copy_only=False).astype(np.int64)] \
            if local else np.zeros(len(column), dtype=np.int64)
        codes.frombytes(block.astype(np.uint32).tobytes())

    def columns(self) -> Columns:
        assert self.names is not None
        values: dict[str, Any] = {}
        nulls: dict[str, np.ndarray] = {}
        for name, (buf, mask) in self.numbers.items():
            null = np.frombuffer(mask, dtype=bool)
            if null.all() and name not in _ARRAYS_READ:  # null throughout: nothing to hold but the None
                values[name] = _Codes(np.zeros(self.n, dtype=np.int8), [None])
                continue
            array_ = np.frombuffer(buf, dtype=np.int64 if buf.typecode == "q" else float)
            values[name] = _narrow(array_) if buf.typecode == "q" else array_
            if null.any():
                nulls[name] = null
        for name, (data, ends, text_nulls) in self.texts.items():
            null_text = np.frombuffer(text_nulls, dtype=bool)
            values[name] = _Text(data, np.frombuffer(ends, dtype=np.int64),
                                 null_text if null_text.any() else None)
        for name, (codes, _, distinct) in self.codes.items():
            values[name] = _Codes(_narrow(np.frombuffer(codes, dtype=np.uint32).astype(np.int64)), distinct)
        values.update(self.lists)
        ids, server_ids = values.get("request_id"), values.get("server_request_id")
        if isinstance(ids, _Text) and isinstance(server_ids, _Text) and server_ids.nulls is None and \
                np.array_equal(ids.ends, server_ids.ends) and ids.data == server_ids.data:
            values["server_request_id"] = ids  # the server's ids are the suite's: held once
        offsets = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(self.lengths, dtype=np.int64), out=offsets[1:])
        counts = np.frombuffer(self.counts, dtype=np.int16 if self.counts.typecode == "h" else np.int32)
        times = np.frombuffer(self.times, dtype=np.int32 if self.times.typecode == "i" else float)
        return Columns(self.names, values, nulls, offsets, times, counts)


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` (int64) in the smallest signed integer type that holds them all."""
    low, high = (int(values.min()), int(values.max())) if len(values) else (0, 0)
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return values.astype(dtype)
    return values


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
