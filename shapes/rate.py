"""RateLadder: the open-loop LoadTestShape, walking request rates (``--rate-ladder 0.5,1,2,4``).

It runs a pool of ``--max-in-flight`` users for the whole ladder and tells every process the current step's
rate; the users send on their process's arrival schedule (``shapes.arrivals``, ``locustfiles.pacer``), so
arrivals never wait for answers. Steps follow the concurrency ladder's rules: warm-up (``--warmup-time``, or
until the step's first request has finished: one request lifetime under the new load), then a window of at
least ``--min-requests`` (default max(30, 3 x rate)) and ``--min-step-time``, capped by ``--max-step-time``.
In open loop a window's requests are those *sent* in it (finished in it or after it: the step's books close
only once all are recorded), so an overloaded step is not held open waiting for requests that finish in time.
Without ``--rate-ladder`` it is exactly the ``ConcurrencyLadder`` it extends, so one locustfile serves both.

With ``--trace`` (#28) the shape is a ``TraceReplay``: each trace window is one step (``locustfiles.replay``):
no warm-up (the window opens ``LEAD_S`` after the pool's users are running, when its first row may fall due, so
every row is measured), its level is the window's mean rate, and it ends once every row has been sent or dropped
and the window's time has passed. Locust holds one shape object per process and a web-UI Start may turn
``--trace`` on or off, so the object takes its run's class at each Start (``reset_time``), once.
"""

from __future__ import annotations

from contract.policy import default_min_requests_at_rate
from contract.traces import ReplayStep
from shapes.books import StepBook
from shapes.ladder import ConcurrencyLadder

LEAD_S = 0.5  # the first row of a window is due this long after the window is announced
USERS_WAIT_S = 10.0  # at most this long for the pool's users to be running before a replay window opens


class RateLadder(ConcurrencyLadder):
    """Open loop when ``--rate-ladder`` is set; the closed-loop ladder otherwise (``TraceReplay`` with --trace)."""

    def reset_time(self) -> None:
        super().reset_time()
        if type(self) in (RateLadder, TraceReplay):  # a subclass of ours keeps its own class
            self.__class__ = TraceReplay if self.settings.trace else RateLadder

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


class TraceReplay(RateLadder):
    """--trace: one open-loop step per trace window, sending the window's rows when due (see the docstring)."""

    def _window(self, index: int) -> ReplayStep:
        return self.settings.trace_steps[index]  # the trace as read once, when the settings were validated

    def _new_book(self, index: int, now: float) -> StepBook:
        step = self._window(index)
        return StepBook(index=index, target_c=0, min_requests=len(step.rows), start_s=now,
                        target_rate=step.mean_rate)

    def _n_steps(self) -> int:
        return len(self.settings.trace_steps)

    def _check_warmup(self, book: StepBook, now: float) -> None:
        # A replay has no warm-up: the window opens LEAD_S from now, once the pool's users are running (the first
        # step of a distributed run spawns them on the workers first; a row due before any user could take it
        # would be dropped), or after USERS_WAIT_S whatever the count.
        users = self.runner.user_count if self.runner is not None else self.settings.max_in_flight
        if users >= self.settings.max_in_flight or now - book.start_s >= USERS_WAIT_S:
            book.steady_start_s = self.live.steady_start_s = now + LEAD_S
            self._broadcast()

    def _end_reason(self, book: StepBook, now: float) -> str | None:
        if now - book.start_s >= (book.max_s if book.max_s is not None else self.settings.max_step_time):
            return "max_time"
        steady = book.steady_start_s
        if steady is None:
            return None
        taken = self._measured_so_far(book, steady) + self.collector.dropped.get(book.index, 0)
        if taken >= book.min_requests and now >= steady + self._window(book.index).span_s:
            return "target"
        return None

    def _end_step(self, book: StepBook, now: float, ended_by: str) -> None:
        if ended_by == "target" and book.steady_start_s is not None:
            # the window is the trace's own: its span, stretched only to take in a last row sent a little late
            starts = [r["start_s"] for r in self.collector.records([book.index])]
            starts += list(self.collector.in_flight.values())
            end = book.steady_start_s + self._window(book.index).span_s
            now = max(end, max(starts, default=end) + 1e-3)
        super()._end_step(book, now, ended_by)

    def _measures_text(self, book: StepBook) -> str:
        return f"sends all {book.min_requests} rows of the window, each when due"

    def _arrivals_kind(self) -> str:
        # a trace's own arrivals: held when (almost) all of its rows were sent, as a constant rate is judged
        return "constant"

    def _level_text(self, book: StepBook) -> str:
        step = self._window(book.index)
        return (f"trace window {step.window.text()} ({len(step.rows)} requests over {step.span_s:.3g} s, "
                f"rate={book.target_rate:g}/s)")
