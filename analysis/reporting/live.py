"""The web UI's Tokens tab as data: a running step's figures so far, and each finished step's final row.

Nothing here is a second definition of a figure. A finished step's row is ``summary.step_figures`` on the step's
window, flagged by ``summary.flag_step``: exactly what ``python -m specbench.analysis summarize`` prints for it. A
running step's row is the same function on the window so far, and "tok/s over the last 10 s" is
``contract.window.window_throughput`` over a 10 s window. Both windows end where they are exact: at the start
of the oldest request still in flight (or now, when none is), since every request that started before that has
finished and been recorded, while a request still streaming has not told its tokens yet.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from specbench.analysis.records.steps import StepWindow
from specbench.analysis.records.summary import StepRow, closed_step_row, flag_step, step_figures
from specbench.analysis.reporting.columns import STEP_COLUMNS
from specbench.analysis.reporting.csvtext import csv_text
from specbench.analysis.reporting.serialize import STEP_FIELDS, clean
from specbench.analysis.table import MISSING, Column, fmt_num
from specbench.contract.schema import RequestRecord, StepRecord
from specbench.contract.window import window_throughput

RECENT_S = 10.0  # the "last 10 s" window


@dataclass(frozen=True)
class OpenStep:
    """A step the shape is running, as the live figures need it."""

    index: int
    target_c: int
    min_requests: int
    start_s: float
    steady_start_s: float | None  # None while warming up


@dataclass(frozen=True)
class TabRow:
    """One row of the tab: a step's figures, plus what only a running step has."""

    row: StepRow
    state: str  # "warming up", "measuring", "closing" (window ended, last requests streaming) or "final"
    in_flight: int | None = None
    recent_tok_s: float | None = None
    recent_start_s: float | None = None
    recent_end_s: float | None = None


def exact_until(now: float, oldest_in_flight_start: float | None) -> float:
    """The latest time up to which every request's tokens are known."""
    return now if oldest_in_flight_start is None else min(now, oldest_in_flight_start)


def final_row(run_name: str, step: StepRecord, records: Sequence[RequestRecord]) -> TabRow:
    """A closed step's row: the same figures and record-based flags ``summarize`` prints for its steps.jsonl line
    and its client figures (the checks against the server's ``/metrics`` samples, ``server_token_gap``, are the
    report's)."""
    row, _ = closed_step_row(run_name, step, records)
    return TabRow(row, "final")


def live_row(run_name: str, step: OpenStep, records: Sequence[RequestRecord], *, now: float,
             oldest_in_flight_start: float | None, in_flight: int) -> TabRow:
    """A running step's figures over its window so far, and its throughput over the last 10 s."""
    until = exact_until(now, oldest_in_flight_start)
    steady = step.steady_start_s
    window = StepWindow(step.index, step.target_c, steady, until if steady is not None else None, partial=False,
                        min_requests=step.min_requests, ended_by=None,
                        target_rate=getattr(step, "target_rate", None))  # open loop: a rate step
    row, _ = flag_step(run_name, step_figures(records, window))
    state = "measuring" if steady is not None and until > steady else "warming up"
    if state == "warming up":
        row = replace(row, flags=())  # no window yet is the state, not a fault
    recent_start = max(step.start_s, until - RECENT_S)
    if until <= recent_start:  # a request from before this step is still streaming: nothing exact yet
        return TabRow(row, state, in_flight)
    return TabRow(row, state, in_flight, window_throughput(records, recent_start, until), recent_start, until)


def closing_row(step: OpenStep) -> TabRow:
    """A step whose window has ended but whose last requests are still streaming: figures once they finish."""
    window = StepWindow(step.index, step.target_c, None, None, partial=False, min_requests=step.min_requests,
                        ended_by=None)
    return TabRow(step_figures([], window), "closing")


def clock(t: float | None) -> str:
    """Local wall-clock time to 10 ms, as the tab shows window edges."""
    if t is None or not math.isfinite(t):
        return MISSING
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 100):02d}"


def _span(t0: float | None, t1: float | None) -> str:
    return MISSING if t0 is None or t1 is None else f"{clock(t0)}-{clock(t1)}"


def _pct(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1%}"


def _key(header: str) -> str:
    """A table key from a header: the web UI camel-cases keys, so keep them to lower-case letters and digits."""
    return re.sub(r"[^a-z0-9]", "", header.lower())


def _step(header: str) -> Column[TabRow]:
    col = next(c for c in STEP_COLUMNS if c.header == header)
    return Column(col.header, lambda t: col.cell(t.row), col.left)


#: The tab's columns: summarize's step columns (same cells), with the live ones beside them.
TAB_COLUMNS: list[Column[TabRow]] = [
    _step("step"),
    _step("C"),
    Column("state", lambda t: t.state, left=True),
    Column("tok/s last 10 s", lambda t: fmt_num(t.recent_tok_s)),
    _step("tok/s"),
    _step("tok/s 95% CI"),
    _step("per-req tok/s"),
    _step("pct reqs"),
    _step("TTFT p50/p99 ms"),
    _step("ITL p50/p99 ms"),
    Column("in flight", lambda t: MISSING if t.in_flight is None else str(t.in_flight)),
    _step("achieved C"),
    Column("error rate", lambda t: _pct(t.row.error_rate)),
    _step("ok/total"),
    _step("TPOT p50/p99 ms"),
    _step("latency avg/p50/p99 s"),
    _step("accept len"),
    _step("flags"),
    Column("window", lambda t: _span(t.row.window_start_s, t.row.window_end_s), left=True),
    Column("last 10 s", lambda t: _span(t.recent_start_s, t.recent_end_s), left=True),
]


def tab_structure() -> list[dict[str, str]]:
    """Locust's ``extended_tables`` structure for the tab."""
    return [{"key": _key(c.header), "title": c.header} for c in TAB_COLUMNS]


def tab_cells(rows: Sequence[TabRow]) -> list[dict[str, str]]:
    """The rows as the web UI shows them (every value already a formatted string; ``name`` keys the row)."""
    out = []
    for t in rows:
        cells = {_key(c.header): c.cell(t) for c in TAB_COLUMNS}
        cells["name"] = f"{t.row.step}-{t.state}"
        out.append(cells)
    return out


LIVE_FIELDS: tuple[str, ...] = ("state", "in_flight", "recent_tok_s", "recent_start_s", "recent_end_s")


def tab_csv(rows: Sequence[TabRow]) -> str:
    """The tab's data with full-precision numbers: the live fields, then every field of summarize's rows."""
    records: list[dict[str, Any]] = []
    for t in rows:
        step = asdict(t.row)
        step["failures"] = [f"{k}={v}" for k, v in step["failures"].items()]
        records.append(clean({**{f: getattr(t, f) for f in LIVE_FIELDS}, **step}))
    return csv_text((*LIVE_FIELDS, *STEP_FIELDS), records)
