"""The master's in-flight books against a user's order of messages: a user announces its next request before its
previous record arrives (records are booked after the users' next sends, locustfiles.deferred), so the live count
of requests on the wire must leave the ended one out while the books keep it until its record is in.

Before: the web UI's "in flight" showed 5 with 4 users in a fresh-clone CI run beside two others.
"""

from __future__ import annotations

from typing import Any, cast

from specbench.contract.schema import RequestRecord
from specbench.shapes.collector import RequestCollector


def _record(rid: str) -> RequestRecord:
    return cast(RequestRecord, {"request_id": rid, "step": 0})


def _start(rid: str, t: float, after: str | None = None) -> dict[str, Any]:
    return {"request_id": rid, "start_s": t, "step": 0, "after": after}


def test_an_ended_request_leaves_the_live_count_but_stays_in_the_books_until_recorded() -> None:
    books = RequestCollector()
    books.on_start(_start("a1", 1.0))
    books.on_start(_start("b1", 1.0))
    assert books.sending() == 2
    books.on_start(_start("a2", 2.0, after="a1"))  # user a sent again; a1's record still queued
    assert books.sending() == 2 and len(books.in_flight) == 3
    assert not books.none_in_flight_before(1.5)  # the window cannot close without a1's record
    books.on_record(_record("a1"))
    assert books.sending() == 2 and len(books.in_flight) == 2 and books.ended == set()
    books.on_record(_record("b1"))  # a record in time (before its user's next start)
    books.on_start(_start("b2", 3.0, after="b1"))  # names a request already booked: nothing to leave out
    assert books.sending() == 2 and books.none_in_flight_before(2.0)


def test_a_lost_worker_takes_its_ended_requests_with_it() -> None:
    books = RequestCollector()
    books.on_start(_start("w1", 1.0), node="worker-1")
    books.on_start(_start("w2", 2.0, after="w1"), node="worker-1")
    books.on_start(_start("m1", 1.0), node="worker-2")
    assert books.sending() == 2
    books.lose_node("worker-1")
    assert books.sending() == 1 and books.ended == set()


def test_a_window_sees_a_request_sent_two_steps_before_it() -> None:
    # #61: the step line read only the records of its own step and the one before, while the report reads every
    # record in flight during the window: a user's request sent at C=8 that was still streaming through the C=64
    # window counted in the report's achieved C and tokens, not in the line's. Records go by time, not by step.
    books = RequestCollector()
    old = cast(RequestRecord, {"request_id": "x", "step": 0, "start_s": 1.0, "e2e_s": 30.0})
    near = cast(RequestRecord, {"request_id": "y", "step": 2, "start_s": 20.0, "e2e_s": 2.0})
    done = cast(RequestRecord, {"request_id": "z", "step": 1, "start_s": 2.0, "e2e_s": 1.0})
    for rec in (old, near, done):
        books.on_record(rec)
    assert books.overlapping(20.0, 25.0) == [old, near]
    books.drop_ended_before(10.0)  # nothing a later window can hold is kept, and nothing it can is dropped
    assert books.overlapping(0.0, 100.0) == [old, near] and books.records([1]) == []
