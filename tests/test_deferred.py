"""End-of-request work after the sends: order on a real gevent loop, flush, and a failing item.

Users woken together each queue their booking and then send; the bookings must come after every one of those
sends (that is the send lag saved), and all of them must run.
"""

from __future__ import annotations

import logging

import gevent
import pytest

from specbench.locustfiles.deferred import AfterSends


def test_the_users_woken_together_all_send_before_any_booking() -> None:
    queue, log = AfterSends(), []

    def user(i: int) -> None:
        queue.add(lambda: log.append(f"book {i}"))
        gevent.sleep(0)  # Locust's wait between tasks, then the next request goes out
        log.append(f"send {i}")

    gevent.joinall([gevent.spawn(user, i) for i in range(20)])
    gevent.sleep(0.05)
    sends = [i for i, entry in enumerate(log) if entry.startswith("send")]
    books = [i for i, entry in enumerate(log) if entry.startswith("book")]
    assert len(sends) == len(books) == 20 and max(sends) < min(books), log
    assert [entry for entry in log if entry.startswith("book")] == [f"book {i}" for i in range(20)]  # in order
    assert len(queue) == 0


def test_flush_does_the_queue_at_once_and_a_failing_item_spoils_nothing(caplog: pytest.LogCaptureFixture) -> None:
    queue, done = AfterSends(), []
    queue.add(lambda: done.append(1))
    queue.add(lambda: 1 / 0)
    queue.add(lambda: done.append(3))
    with caplog.at_level(logging.ERROR, logger="specbench.locustfiles.deferred"):
        queue.flush()  # no yield: the greenlet that was started finds nothing left
    assert done == [1, 3] and len(queue) == 0
    assert "record may be missing" in caplog.text and "ZeroDivisionError" in caplog.text
    gevent.sleep(0.01)
    assert done == [1, 3]
