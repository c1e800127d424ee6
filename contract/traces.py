"""Request traces (``--trace FILE``): read Mooncake JSONL, BurstGPT CSV and Azure LLM-inference CSV files.

A trace is a list of rows, each one request: when it arrived (seconds after the trace's first request), its
input and output lengths in tokens and, for Mooncake, the ids of its 512-token prompt blocks (``hash_ids``: two
requests sharing a leading id share that block of prompt, so a prefix cache can serve it). The replay
(``locustfiles.replay``) sends row k at ``anchor + time_k / speed`` with exactly those lengths.

Formats (detected from the content when ``--trace-format`` is not given):

* ``mooncake``: JSON lines ``{"timestamp": ms since the start (int), "input_length": int, "output_length": int,
  "hash_ids": [int, ...]}``;
* ``burstgpt``: CSV with header columns ``Timestamp`` (seconds, float), ``Request tokens`` and ``Response tokens``
  (``Model``, ``Total tokens``, ``Log Type`` are read past);
* ``azure``: CSV with header columns ``TIMESTAMP`` (a date-time such as ``2023-11-16 18:15:46.6805900``),
  ``ContextTokens`` and ``GeneratedTokens``.

Rows must be in time order with times at or after zero; lengths whole numbers, input at least 1. A row whose
output length is 0 (a request that failed when recorded: BurstGPT keeps those) is skipped and counted, since a
request for no tokens cannot be replayed. Any other mistake raises ``TraceError`` naming the file, the line and
what was expected. Pure: stdlib only, no Locust.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from specbench.contract.inputcaps import capped_lines, check_plain_size, text_lines
from specbench.contract.jsonlines import json_objects

FORMATS: tuple[str, ...] = ("mooncake", "burstgpt", "azure")
#: Tokens per Mooncake ``hash_ids`` block.
BLOCK_TOKENS = 512

_BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
_AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class TraceError(ValueError):
    """A malformed trace or trace option; the message is one line naming the file (and line) and what was
    expected."""


@dataclass(frozen=True)
class TraceRow:
    """One request of a trace; ``line`` is its line in the file (for messages and the records)."""

    time_s: float  # seconds after the trace's start (the first row's time in Azure traces)
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class Trace:
    name: str  # the file as given
    format: str
    rows: tuple[TraceRow, ...]
    skipped: int = 0  # rows with an output length of 0

    @property
    def duration_s(self) -> float:
        return self.rows[-1].time_s if self.rows else 0.0


@dataclass(frozen=True)
class TraceWindow:
    """A slice of the trace replayed as one step: rows with ``start_s <= time < start_s + length_s`` (trace
    seconds), their times counted from ``start_s`` and divided by the speed."""

    start_s: float
    length_s: float | None  # None: to the end

    def text(self) -> str:
        return f"{self.start_s:g}:{'' if self.length_s is None else f'{self.length_s:g}'}"


@dataclass(frozen=True)
class ReplayStep:
    """What one replay step sends: the window's rows, their due times (seconds after the step's anchor)."""

    window: TraceWindow
    rows: tuple[TraceRow, ...]
    due_s: tuple[float, ...]
    span_s: float  # the window's length after the speed-up (its last due time when open-ended)

    @property
    def mean_rate(self) -> float:
        """Requests/s over the window: the step's nominal rate."""
        return len(self.rows) / self.span_s if self.span_s > 0 else float(len(self.rows))


def detect_format(text: str) -> str | None:
    """mooncake (a JSON object line first), burstgpt or azure (by their header), None when none fits."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if first.startswith("{"):
        return "mooncake"
    header = [c.strip() for c in next(csv.reader([first]), [])]
    # by the time column's name (a missing length column is then reported as such)
    if _BURSTGPT_COLUMNS[0] in header or {"Request tokens", "Response tokens"} & set(header):
        return "burstgpt"
    if _AZURE_COLUMNS[0] in header or {"ContextTokens", "GeneratedTokens"} & set(header):
        return "azure"
    return None


def load_trace(path: str, fmt: str = "") -> Trace:
    """Read and check a trace file; ``fmt`` '' detects the format from the content. Read line by line under the
    caps of ``contract.inputcaps`` (its size before it is opened, lines, one line's length), so a bad row or a
    file past a cap fails as soon as it is read."""
    file = Path(path)
    try:
        if not file.is_file():
            raise TraceError(f"--trace {path[:200]}: no such file")
        check_plain_size(file, f"--trace {path[:200]}", TraceError)
        with file.open("rb") as f:
            return parse_trace(text_lines(capped_lines(f, path, TraceError), path, TraceError), path, fmt)
    except OSError as exc:
        raise TraceError(f"--trace {path[:200]}: cannot read it ({exc.strerror or exc})") from None


def parse_trace(text: str | Iterable[str], name: str, fmt: str = "") -> Trace:
    """The rows of a trace held in ``text``: the whole file, or its lines (without line ends) as they are read
    (``name`` is what messages call it)."""
    if fmt and fmt not in FORMATS:
        raise TraceError(f"--trace-format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    lines = iter(text.splitlines() if isinstance(text, str) else text)
    head: list[str] = []  # the lines up to the first that is not blank: what tells the format
    for line in lines:
        head.append(line)
        if line.strip():
            break
    fmt = fmt or detect_format(head[-1] if head else "") or ""
    if not fmt:
        raise TraceError(f"{name}: cannot tell the trace format: expected Mooncake JSON lines or a CSV header "
                         f"with {', '.join(_BURSTGPT_COLUMNS)} (BurstGPT) or {', '.join(_AZURE_COLUMNS)} (Azure); "
                         "or give --trace-format")
    every = itertools.chain(head, lines)
    rows = _parse_mooncake(every, name) if fmt == "mooncake" else _parse_csv(every, name, fmt)
    kept = [r for r in rows if r.output_tokens > 0]
    if not kept:
        raise TraceError(f"{name}: no requests found (a trace needs at least one row with an output length above 0)")
    return Trace(name, fmt, tuple(kept), skipped=len(rows) - len(kept))


def _shown(value: Any) -> str:
    """A value from the file as messages echo it: at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _whole(value: Any, where: str, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TraceError(f"{where}: expected {key!r} to be a whole number >= {minimum}, got {_shown(value)}")
    try:
        number = float(value)
    except (ValueError, OverflowError):  # OverflowError: an integer of hundreds of digits
        raise TraceError(f"{where}: expected {key!r} to be a whole number >= {minimum}, got {_shown(value)}") from None
    if not math.isfinite(number) or number != int(number) or number < minimum:
        raise TraceError(f"{where}: expected {key!r} to be a whole number >= {minimum}, got {_shown(value)}")
    return int(number)


def _time(value: float, previous: float | None, where: str, key: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"{where}: expected {key!r} to be a time at or after 0, got {_shown(value)}")
    if previous is not None and value < previous:
        raise TraceError(f"{where}: {key!r} {value:g} is earlier than the row before it ({previous:g}); expected "
                         "rows in time order")
    return value


def _parse_mooncake(text: Iterable[str], name: str) -> list[TraceRow]:
    rows: list[TraceRow] = []
    previous: float | None = None
    for lineno, where, obj in json_objects(text, name, TraceError, "timestamp, input_length, output_length"):
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in obj]
        if missing:
            raise TraceError(f"{where}: missing {', '.join(missing)}; expected a Mooncake row {{\"timestamp\": ms, "
                             "\"input_length\": int, \"output_length\": int, \"hash_ids\": [int, ...]}")
        stamp = obj["timestamp"]
        if isinstance(stamp, bool) or not isinstance(stamp, int | float):
            raise TraceError(f"{where}: expected 'timestamp' to be milliseconds since the start, got {_shown(stamp)}")
        try:
            previous = _time(float(stamp), previous, where, "timestamp")
        except OverflowError:  # an integer of hundreds of digits: no float holds it
            raise TraceError(f"{where}: expected 'timestamp' to be a time at or after 0, got {_shown(stamp)}") from None
        inp = _whole(obj["input_length"], where, "input_length", 1)
        out = _whole(obj["output_length"], where, "output_length", 0)
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
            raise TraceError(f"{where}: expected 'hash_ids' to be a list of whole numbers, got {_shown(ids)}")
        if ids and len(ids) != math.ceil(inp / BLOCK_TOKENS):
            raise TraceError(f"{where}: {len(ids)} hash_ids for input_length {inp}; expected one id per "
                             f"{BLOCK_TOKENS}-token block ({math.ceil(inp / BLOCK_TOKENS)})")
        rows.append(TraceRow(previous / 1000.0, inp, out, tuple(ids), lineno))
    return rows


_AZURE_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(\d+))?$")


def _azure_seconds(value: str, where: str) -> float:
    """Seconds since the epoch (naive, read as UTC: only differences matter) of '2023-11-16 18:15:46.6805900'."""
    m = _AZURE_TIME.match(value.strip())
    if m is None:
        raise TraceError(f"{where}: expected 'TIMESTAMP' to be a date-time like 2023-11-16 18:15:46.6805900, "
                         f"got {_shown(value)}")
    try:
        base = datetime.strptime(m.group(1).replace("T", " "), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        raise TraceError(f"{where}: 'TIMESTAMP' {_shown(value)} is not a valid date-time") from None
    frac = float(f"0.{m.group(2)}") if m.group(2) else 0.0
    return (base - datetime(1970, 1, 1)).total_seconds() + frac


def _csv_records(reader: Any, name: str) -> Iterator[list[str]]:
    """The CSV reader's rows; its own refusal (a field over its 131072 characters) as one line naming the line."""
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise TraceError(f"{name} line {reader.line_num}: not a CSV row ({str(e)[:120]})") from None
        yield cells


def _parse_csv(text: Iterable[str], name: str, fmt: str) -> list[TraceRow]:
    reader = csv.reader(line + "\n" for line in text)
    records = _csv_records(reader, name)
    header = [c.strip() for c in next(records, [])]
    columns = _BURSTGPT_COLUMNS if fmt == "burstgpt" else _AZURE_COLUMNS
    missing = [c for c in columns if c not in header]
    if missing:
        raise TraceError(f"{name} line 1: missing column {', '.join(repr(c) for c in missing)}; a {fmt} trace "
                         f"needs {', '.join(columns)}")
    at = [header.index(c) for c in columns]
    rows: list[TraceRow] = []
    previous: float | None = None
    origin: float | None = None
    for index, cells in enumerate(records, start=2):
        if not any(c.strip() for c in cells):
            continue
        where = f"{name} line {reader.line_num if reader.line_num else index}"
        if len(cells) < len(header):
            raise TraceError(f"{where}: {len(cells)} columns, expected {len(header)} as in the header")
        raw_time, raw_in, raw_out = (cells[i].strip() for i in at)
        if fmt == "azure":
            seconds = _azure_seconds(raw_time, where)
            origin = seconds if origin is None else origin
            t = seconds - origin
            if t < 0:
                raise TraceError(f"{where}: 'TIMESTAMP' {raw_time} is earlier than the row before it; expected rows "
                                 "in time order")
        else:
            try:
                t = float(raw_time)
            except ValueError:
                raise TraceError(f"{where}: expected 'Timestamp' to be seconds (a number), "
                                 f"got {_shown(raw_time)}") from None
        previous = _time(t, previous, where, columns[0])
        rows.append(TraceRow(previous, _whole(raw_in, where, columns[1], 1), _whole(raw_out, where, columns[2], 0),
                             (), reader.line_num))
    if fmt == "burstgpt" and rows and rows[0].time_s > 0:  # BurstGPT counts from its own epoch: start at 0
        first = rows[0].time_s
        rows = [TraceRow(r.time_s - first, r.input_tokens, r.output_tokens, r.hash_ids, r.line) for r in rows]
    return rows


_WINDOW = re.compile(r"^(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)?$")


def parse_windows(text: str, where: str = "--trace-window") -> list[TraceWindow]:
    """'' -> the whole trace; 'START:LEN[,START:LEN...]' in trace seconds (LEN may be left empty: to the end)."""
    text = str(text or "").strip()
    if not text:
        return [TraceWindow(0.0, None)]
    windows = []
    for part in text.split(","):
        m = _WINDOW.match(part.strip())
        length = float(m.group(2)) if m is not None and m.group(2) is not None else None
        if m is None or (length is not None and length <= 0):
            raise TraceError(f"{where}: expected START:LEN in trace seconds (e.g. 0:60, or 300:60,900:60 for "
                             f"several windows; LEN positive), got {part.strip()!r}")
        windows.append(TraceWindow(float(m.group(1)), length))
    return windows


def replay_steps(trace: Trace, windows: list[TraceWindow], speed: float) -> list[ReplayStep]:
    """Each window's rows and due times (``(time - start) / speed``); TraceError for a window with no row."""
    if not speed > 0 or not math.isfinite(speed):
        raise TraceError(f"--trace-speed: expected a positive number (2: twice as fast), got {speed!r}")
    steps = []
    for w in windows:
        end = math.inf if w.length_s is None else w.start_s + w.length_s
        rows = tuple(r for r in trace.rows if w.start_s <= r.time_s < end)
        if not rows:
            raise TraceError(f"--trace-window {w.text()}: no request of {trace.name} falls in it (the trace spans "
                             f"0 to {trace.duration_s:g} s)")
        due = tuple((r.time_s - w.start_s) / speed for r in rows)
        span = (w.length_s / speed) if w.length_s is not None else max(due[-1], 1e-3)
        steps.append(ReplayStep(w, rows, due, span))
    return steps


def block_reuse_share(rows: tuple[TraceRow, ...] | list[TraceRow]) -> float:
    """The share of input tokens a perfect prefix cache serves, from ``hash_ids``: per request, the leading
    blocks some earlier request (in time order) already had, at their length in this request."""
    seen: set[int] = set()
    cached = total = 0
    for row in rows:
        total += row.input_tokens
        lead = 0
        for ids in row.hash_ids:
            if ids not in seen:
                break
            lead += 1
        if lead:  # a server keeps at least one token to compute: never all of a prompt
            cached += min(lead * BLOCK_TOKENS, row.input_tokens - 1)
        seen.update(row.hash_ids)
    return cached / total if total else 0.0
