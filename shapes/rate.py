"""RateLadder: the open-loop LoadTestShape, walking request rates (``--rate-ladder 0.5,1,2,4``).

It runs a pool of ``--max-in-flight`` users for the whole ladder and tells every process the current step's
rate; the users send on their process's arrival schedule (``shapes.arrivals``, ``locustfiles.pacer``), so
arrivals never wait for answers. Steps follow the concurrency ladder's rules: warm-up (``--warmup-time``, or
until the step's first request has finished: one request lifetime under the new load), then a window of at
least ``--min-requests`` (default max(30, 3 x rate)) and ``--min-step-time``, capped by ``--max-step-time``.
In open loop a window's requests are those *sent* in it (finished in it or after it: the step's books close
only once all are recorded), so an overloaded step is not held open waiting for requests that finish in time.
Without ``--rate-ladder`` it is exactly the ``ConcurrencyLadder`` it extends, so one locustfile serves both.

With ``--trace`` (#28) the shape's schedule is a ``TraceReplay``: each trace window is one step
(``locustfiles.replay``): no warm-up (the window opens ``LEAD_S`` after the pool's users are running, when its
first row may fall due, so every row is measured), its level is the window's mean rate, and it ends once every
row has been sent or dropped and the window's time has passed.

Locust holds one shape object per process and a web-UI Start may turn ``--rate-ladder`` or ``--trace`` on or off,
so the shape keeps one class (the one a locustfile exposes) and picks its run's schedule at each Start
(``reset_time``): none in closed loop (the ladder's own hooks), else ``RateSchedule`` or ``TraceReplay``, whose
hooks stand in for the ladder's of the same name for that run.
"""

from __future__ import annotations

from specbench.contract.policy import default_min_requests_at_rate
from specbench.contract.traces import ReplayStep
from specbench.shapes.books import StepBook
from specbench.shapes.ladder import ConcurrencyLadder

LEAD_S = 0.5  # the first row of a window is due this long after the window is announced
USERS_WAIT_S = 10.0  # at most this long for the pool's users to be running before a replay window opens


#: ConcurrencyLadder's step hooks. An open-loop schedule answers those it defines (under the same name); the others,
#: and all of them in closed loop, stay the ladder's own.
STEP_HOOKS = ("_new_book", "_n_steps", "_users", "_users_needed", "_measured_so_far", "_level_text",
              "_check_warmup", "_end_reason", "_end_step", "_measures_text", "_arrival_dispersion")


class RateLadder(ConcurrencyLadder):
    """The suite's shape: closed loop, ``--rate-ladder`` or ``--trace``, by the schedule chosen at each Start."""

    def __init__(self) -> None:
        super().__init__()
        self.schedule: RateSchedule | None = None  # None: closed loop, the ConcurrencyLadder it extends

    def reset_time(self) -> None:
        super().reset_time()
        cfg = self.settings
        kind = TraceReplay if cfg.trace else RateSchedule if cfg.rate_ladder else None
        self._use_schedule(kind(self) if kind is not None else None)

    def _use_schedule(self, schedule: RateSchedule | None) -> None:
        """Bind the schedule's hooks on this shape, where they shadow the ladder's methods of the same name; the
        previous run's are dropped first, so a Start back to closed loop runs the ladder's own hooks again."""
        self.schedule = schedule
        for hook in STEP_HOOKS:
            vars(self).pop(hook, None)
            answer = getattr(schedule, hook, None)
            if answer is not None:
                setattr(self, hook, answer)


class RateSchedule:
    """--rate-ladder: one open-loop step per rate, a pool of --max-in-flight users (see the module docstring).

    Its methods are ``ConcurrencyLadder`` step hooks (``STEP_HOOKS``), run on the shape in the ladder's place;
    a hook it does not define stays the ladder's.
    """

    def __init__(self, shape: RateLadder) -> None:
        self.shape = shape

    def _new_book(self, index: int, now: float) -> StepBook:
        cfg = self.shape.settings
        rate = cfg.rate_ladder[index]
        min_requests = cfg.min_requests or default_min_requests_at_rate(rate)
        return StepBook(index=index, target_c=0, min_requests=min_requests, start_s=now, target_rate=rate)

    def _n_steps(self) -> int:
        return len(self.shape.settings.rate_ladder)

    def _users(self, book: StepBook) -> tuple[int, float]:
        pool = self.shape.settings.max_in_flight
        return pool, float(pool)

    def _users_needed(self, book: StepBook) -> int:
        return 1

    def _measured_so_far(self, book: StepBook, steady: float) -> int:
        collector = self.shape.collector
        finished = sum(1 for r in collector.records([book.index]) if r["start_s"] >= steady)
        return finished + sum(1 for start in collector.in_flight.values() if start >= steady)

    def _level_text(self, book: StepBook) -> str:
        return f"rate={book.target_rate:g}/s"


class TraceReplay(RateSchedule):
    """--trace: one open-loop step per trace window, sending the window's rows when due (see the docstring)."""

    def _window(self, index: int) -> ReplayStep:
        return self.shape.settings.trace_steps[index]  # the trace as read once, when the settings were validated

    def _new_book(self, index: int, now: float) -> StepBook:
        step = self._window(index)
        return StepBook(index=index, target_c=0, min_requests=len(step.rows), start_s=now,
                        target_rate=step.mean_rate)

    def _n_steps(self) -> int:
        return len(self.shape.settings.trace_steps)

    def _check_warmup(self, book: StepBook, now: float) -> None:
        # A replay has no warm-up: the window opens LEAD_S from now, once the pool's users are running (the first
        # step of a distributed run spawns them on the workers first; a row due before any user could take it
        # would be dropped), or after USERS_WAIT_S whatever the count.
        shape = self.shape
        pool = shape.settings.max_in_flight
        users = shape.runner.user_count if shape.runner is not None else pool
        if users >= pool or now - book.start_s >= USERS_WAIT_S:
            book.steady_start_s = shape.live.steady_start_s = now + LEAD_S
            shape._broadcast()

    def _end_reason(self, book: StepBook, now: float) -> str | None:
        shape = self.shape
        if now - book.start_s >= (book.max_s if book.max_s is not None else shape.settings.max_step_time):
            return "max_time"
        steady = book.steady_start_s
        if steady is None:
            return None
        taken = self._measured_so_far(book, steady) + shape.collector.dropped.get(book.index, 0)
        if taken >= book.min_requests and now >= steady + self._window(book.index).span_s:
            return "target"
        return None

    def _end_step(self, book: StepBook, now: float, ended_by: str) -> None:
        if ended_by == "target" and book.steady_start_s is not None:
            # the window is the trace's own: its span, stretched only to take in a last row sent a little late
            collector = self.shape.collector
            starts = [r["start_s"] for r in collector.records([book.index])]
            starts += list(collector.in_flight.values())
            end = book.steady_start_s + self._window(book.index).span_s
            now = max(end, max(starts, default=end) + 1e-3)
        ConcurrencyLadder._end_step(self.shape, book, now, ended_by)  # then the ladder's own

    def _measures_text(self, book: StepBook) -> str:
        return f"sends all {book.min_requests} rows of the window, each when due"

    def _arrival_dispersion(self) -> float:
        # a trace's own arrivals: held when (almost) all of its rows were sent, as a constant rate is judged
        return 0.0

    def _level_text(self, book: StepBook) -> str:
        step = self._window(book.index)
        return (f"trace window {step.window.text()} ({len(step.rows)} requests over {step.span_s:.3g} s, "
                f"rate={book.target_rate:g}/s)")
