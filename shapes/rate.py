"""RateLadder: the open-loop LoadTestShape, walking request rates (``--rate-ladder 0.5,1,2,4``).

It runs a pool of ``--max-in-flight`` users for the whole ladder and tells every process the current step's
rate; the users send on their process's arrival schedule (``shapes.arrivals``, ``locustfiles.pacer``), so
arrivals never wait for answers. Steps follow the concurrency ladder's rules: warm-up (``--warmup-time``, or
until the step's first request has finished: one request lifetime under the new load), then a window of at
least ``--min-requests`` (default max(30, 3 x rate)) and ``--min-step-time``, capped by ``--max-step-time``.
In open loop a window's requests are those *sent* in it (finished in it or after it: the step's books close
only once all are recorded), so an overloaded step is not held open waiting for requests that finish in time.
Without ``--rate-ladder`` it is exactly the ``ConcurrencyLadder`` it extends, so one locustfile serves both.
"""

from __future__ import annotations

from contract.policy import default_min_requests_at_rate
from shapes.books import StepBook
from shapes.ladder import ConcurrencyLadder


class RateLadder(ConcurrencyLadder):
    """Open loop when ``--rate-ladder`` is set; the closed-loop ladder otherwise."""

    def _new_book(self, index: int, now: float) -> StepBook:
        if not self.settings.open_loop:
            return super()._new_book(index, now)
        rate = self.settings.rate_ladder[index]
        min_requests = self.settings.min_requests or default_min_requests_at_rate(rate)
        return StepBook(index=index, target_c=0, min_requests=min_requests, start_s=now, target_rate=rate)

    def _n_steps(self) -> int:
        return len(self.settings.rate_ladder) if self.settings.open_loop else super()._n_steps()

    def _users(self, book: StepBook) -> tuple[int, float]:
        if book.target_rate is None:
            return super()._users(book)
        pool = self.settings.max_in_flight
        return pool, float(pool)

    def _users_needed(self, book: StepBook) -> int:
        return 1 if book.target_rate is not None else super()._users_needed(book)

    def _measured_so_far(self, book: StepBook, steady: float) -> int:
        if book.target_rate is None:
            return super()._measured_so_far(book, steady)
        finished = sum(1 for r in self.collector.records([book.index]) if r["start_s"] >= steady)
        return finished + sum(1 for start in self.collector.in_flight.values() if start >= steady)

    def _level_text(self, book: StepBook) -> str:
        return f"rate={book.target_rate:g}/s" if book.target_rate is not None else super()._level_text(book)
