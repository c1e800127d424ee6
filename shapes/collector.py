"""The master's view of requests: which are in flight, and the finished records a step's books need.

Only records that can still overlap an open window are kept, so memory stays bounded on long ladders.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from specbench.contract.schema import RequestRecord


class RequestCollector:
    """Fed by the start/record messages; queried by the ladder shape at each tick."""

    def __init__(self) -> None:
        self.in_flight: dict[str, float] = {}  # request_id -> start_s, until its record arrives
        # of those, the ones whose user has since sent its next request: ended, their record still on its way
        # (records are booked after the users' next sends, locustfiles.deferred)
        self.ended: set[str] = set()
        self.node_of: dict[str, tuple[str, int | None]] = {}  # request_id -> (sending node, step)
        self.by_step: dict[int | None, list[RequestRecord]] = defaultdict(list)
        self.finished = 0
        self.dropped: dict[int, int] = defaultdict(int)  # open loop: step -> requests due while all were busy

    def clear(self) -> None:
        self.in_flight.clear()
        self.ended.clear()
        self.node_of.clear()
        self.by_step.clear()
        self.finished = 0
        self.dropped.clear()

    def on_drop(self, data: dict[str, Any]) -> None:
        self.dropped[int(data["step"])] += int(data["count"])

    def on_start(self, data: dict[str, Any], node: str = "local") -> None:
        rid = str(data["request_id"])
        self.in_flight[rid] = float(data["start_s"])
        self.node_of[rid] = (node, data.get("step"))
        after = data.get("after")
        if after in self.in_flight:
            self.ended.add(str(after))

    def on_record(self, record: RequestRecord) -> None:
        self.in_flight.pop(record["request_id"], None)
        self.ended.discard(record["request_id"])
        self.node_of.pop(record["request_id"], None)
        self.by_step[record.get("step")].append(record)
        self.finished += 1

    def lose_node(self, node: str) -> list[int | None]:
        """A worker is gone: forget its requests in flight (they will never be recorded); their steps."""
        lost = [rid for rid, (n, _step) in self.node_of.items() if n == node]
        steps = [self.node_of.pop(rid)[1] for rid in lost]
        for rid in lost:
            self.in_flight.pop(rid, None)
            self.ended.discard(rid)
        return steps

    def sending(self) -> int:
        """Requests on the wire now: in flight, less those ended whose records are still on their way."""
        return len(self.in_flight) - len(self.ended)

    def none_in_flight_before(self, t: float) -> bool:
        """True when every request that started before ``t`` has finished and been recorded."""
        return all(start >= t for start in self.in_flight.values())

    def oldest_in_flight_start(self) -> float | None:
        return min(self.in_flight.values(), default=None)

    def records(self, steps: list[int]) -> list[RequestRecord]:
        out: list[RequestRecord] = []
        for s in steps:
            out.extend(self.by_step.get(s, ()))
        return out

    def overlapping(self, t0: float, t1: float) -> list[RequestRecord]:
        """Records in flight at some time in [t0, t1], whatever step sent them: a request a user started two
        steps before still counts in this window's achieved C and tokens, as it does in the report (#61)."""
        return [r for recs in self.by_step.values() for r in recs
                if r["start_s"] <= t1 and r["start_s"] + r["e2e_s"] >= t0]

    def drop_ended_before(self, t: float) -> None:
        """Forget records that finished before ``t``: no window still to close can contain them."""
        for key in list(self.by_step):
            kept = [r for r in self.by_step[key] if r["start_s"] + r["e2e_s"] >= t]
            if kept:
                self.by_step[key] = kept
            else:
                del self.by_step[key]
