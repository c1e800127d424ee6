"""Each ladder step's measured window, from steps.jsonl or, for a killed run, from its records.

A step's window is [steady_start_s, end_s] as the ladder wrote it. A run killed mid-step has no line for
that step; its window is then rebuilt from the step's ``phase == "measured"`` records (earliest start to
latest end) and marked partial, because requests still in flight at the kill were never written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.contract.columnar import span_mask
from specbench.contract.schema import RequestRecord, RunData, StepRecord
from specbench.contract.window import measured_in_window


@dataclass(frozen=True)
class StepWindow:
    """One ladder step and its measured window (t0/t1 None when the step never reached steady state)."""

    index: int
    target_c: int
    t0: float | None
    t1: float | None
    partial: bool  # rebuilt from records: the run was killed during this step
    min_requests: int | None  # what the ladder asked the window to measure; None when unknown
    ended_by: str | None
    target_rate: float | None = None  # open loop: requests/s asked for; None in closed loop
    dropped: int = 0  # open loop: requests due while every user was busy (from steps.jsonl)
    arrival_dispersion: float | None = None  # open loop: how the send count was judged (None: as Poisson)
    receive_clock: str | None = None  # the chunk times' clock as steps.jsonl says (None: not said)
    refused: int = 0  # the step's refused requests as steps.jsonl counts them, its window's or not

    @property
    def bounds(self) -> tuple[float, float] | None:
        """(t0, t1) of a usable window, None when there is none."""
        if self.t0 is None or self.t1 is None or self.t1 <= self.t0:
            return None
        return self.t0, self.t1


def step_windows(run: RunData) -> list[StepWindow]:
    """All steps of a run in index order: written steps first-hand, unwritten ones rebuilt from records."""
    windows = {s["index"]: window_from_step(s) for s in run.steps}
    for index, recs in _records_by_step(run.records).items():
        if index not in windows:
            windows[index] = _from_records(index, recs)
    return [windows[i] for i in sorted(windows)]


def overlapping(records: Sequence[RequestRecord], t0: float, t1: float) -> list[RequestRecord]:
    """Records in flight at some time in [t0, t1]: the only ones a window figure can depend on."""
    spans = span_mask(records)
    if spans is not None:  # records read as columns: the same test on the arrays
        return [records[i] for i in np.flatnonzero((spans[0] <= t1) & (spans[1] >= t0)).tolist()]
    return [r for r in records if r["start_s"] <= t1 and r["start_s"] + r["e2e_s"] >= t0]


def measured_ok(records: Sequence[RequestRecord], window: StepWindow) -> list[RequestRecord]:
    """Successful requests that started and finished inside the window: the per-request statistics set."""
    if window.bounds is None:
        return []
    inside = measured_in_window(records, *window.bounds)
    return [r for r in inside if r["status"] == "ok"]


def window_from_step(step: StepRecord) -> StepWindow:
    """A step's window as its steps.jsonl line gives it."""
    t0 = step.get("steady_start_s")
    t1 = step.get("end_s")
    return StepWindow(
        index=step["index"],
        target_c=step["target_c"],
        t0=float(t0) if t0 is not None else None,
        t1=float(t1) if t1 is not None and t0 is not None else None,
        partial=False,
        min_requests=step.get("min_requests"),
        ended_by=step.get("ended_by"),
        target_rate=step.get("target_rate"),
        dropped=int(step.get("dropped") or 0),
        arrival_dispersion=step.get("arrival_dispersion"),
        receive_clock=step.get("receive_clock"),
        refused=int(step.get("requests_refused") or 0),
    )


def _records_by_step(records: Sequence[RequestRecord]) -> dict[int, list[RequestRecord]]:
    by_step: dict[int, list[RequestRecord]] = {}
    for rec in records:
        index = rec.get("step")
        if index is not None:
            by_step.setdefault(index, []).append(rec)
    return by_step


def _from_records(index: int, records: list[RequestRecord]) -> StepWindow:
    targets = Counter(c for r in records if (c := r.get("target_c")) is not None)
    target_c = targets.most_common(1)[0][0] if targets else 0
    measured = [r for r in records if r.get("phase") == "measured"]
    t0 = min((r["start_s"] for r in measured), default=None)
    t1 = max((r["start_s"] + r["e2e_s"] for r in measured), default=None)
    rates = Counter(r.get("target_rate") for r in records if r.get("target_rate") is not None)
    target_rate = rates.most_common(1)[0][0] if rates else None
    return StepWindow(index, target_c, t0, t1, partial=True, min_requests=None, ended_by=None,
                      target_rate=target_rate)
