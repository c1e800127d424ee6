"""The pacer's lock (``locustfiles.freeusers``): one holder at a time, handed to the newest waiter first, the
earliest free moment among the waiters kept, and a waiter killed in the queue or just handed the lock never
leaves it stuck."""

from __future__ import annotations

import gevent

from specbench.locustfiles.freeusers import FreeUsers


def _user(lock: FreeUsers, name: str, since: float, served: list[str], hold_s: float = 0.01) -> None:
    with lock.turn(since):
        served.append(name)
        gevent.sleep(hold_s)


def test_newest_waiter_first_and_one_holder_at_a_time():
    lock, served = FreeUsers(), []
    holders = [0]

    def user(name: str, since: float) -> None:
        with lock.turn(since):
            holders[0] += 1
            assert holders[0] == 1
            served.append(name)
            gevent.sleep(0.01)
            holders[0] -= 1

    first = gevent.spawn(user, "a", 1.0)
    gevent.sleep(0)  # "a" holds it
    later = [gevent.spawn(user, name, since) for name, since in (("b", 2.0), ("c", 3.0), ("d", 4.0))]
    gevent.sleep(0)
    assert lock.oldest_free_since(9.0) == 2.0  # the waiters' earliest
    gevent.joinall([first, *later], timeout=2)
    assert served == ["a", "d", "c", "b"]
    assert lock.oldest_free_since(9.0) == 9.0
    with lock.turn(10.0):  # free again: taken at once
        pass


def test_a_killed_waiter_leaves_the_queue_and_a_killed_receiver_passes_the_lock_on():
    lock, served = FreeUsers(), []
    queued: list[gevent.Greenlet] = []

    def holder() -> None:
        with lock.turn(1.0):
            served.append("a")
            gevent.sleep(0.02)  # the others queue meanwhile
            queued[0].kill()  # "c", killed while waiting: gone from the queue
            assert lock.oldest_free_since(9.0) == 2.0
        # released: handed to "b", the newest waiter; an exception thrown into it before it ran (a stop) must
        # pass the lock on to "d" (this greenlet is left suspended: throw() returns to the hub)
        queued[1].throw(gevent.GreenletExit())

    a = gevent.spawn(holder)
    gevent.sleep(0)
    queued.append(gevent.spawn(_user, lock, "c", 3.0, served))
    d = gevent.spawn(_user, lock, "d", 2.0, served)
    gevent.sleep(0)
    queued.append(gevent.spawn(_user, lock, "b", 4.0, served))
    d.join(1)
    assert d.dead and queued[1].dead and served == ["a", "d"], served
    a.kill(block=False)
    with lock.turn(10.0):  # and it is free after
        pass
