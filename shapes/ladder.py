"""ConcurrencyLadder: a closed-loop LoadTestShape that walks C = 1, 2, 5, ... with honest windows.

Each step starts all C users at once (users wait 0 between requests, so users = concurrency), warms up
until every user has finished one request (or for a set time), then measures until both a minimum number of
requests and a minimum time are reached, capped by a maximum time; optionally it ends early once the
throughput's confidence interval is tight. Requests in flight at a step's end are not killed: they finish
as the next step warms up, and the step's books close only when the last of them is recorded, so its
window figures are exact. After the last step the shape drains, then ends the test.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from locust import LoadTestShape

from analysis.batch_means import window_precision
from contract.schema import StepRecord
from contract.settings import SuiteSettings, parse_duration, settings_of
from shapes.books import (
    StepBook,
    close_step,
    count_measured,
    describe_close,
    step_min_requests,
    warmup_end,
    warmup_stable_s,
)
from shapes.budget import describe_forecast, describe_plan, step_share
from shapes.collector import RequestCollector
from shapes.live import STEP_MESSAGE, LiveStep

log = logging.getLogger("specbench.ladder")
STOP_MARGIN = 0.9  # a step stops once its recorded part is within 90% of --step-ci


class ConcurrencyLadder(LoadTestShape):
    """Runs the whole ladder once per Start; Locust calls ``reset_time`` before each run's first tick."""

    def __init__(self) -> None:
        super().__init__()
        self.collector = RequestCollector()
        self.on_step_closed: list[Callable[[StepRecord], None]] = []
        self.settings = SuiteSettings.from_options(None)  # the defaults, until a Start brings options
        self._reset_ladder()

    # -- Locust's contract ----------------------------------------------------------------------------------

    def reset_time(self) -> None:
        super().reset_time()
        if self._just_started():  # MasterRunner.start() calls this again right after the first tick
            return
        options = self.runner.environment.parsed_options if self.runner is not None else None
        if options is not None:
            self.settings = settings_of(options)
        self._reset_ladder()
        if self.runner is not None:  # a web-UI restart: the previous run's stats are still there
            self.runner.stats.clear_all()

    def tick(self) -> tuple[int, float] | None:
        now = time.time()
        self._close_ready_books(force=False)
        if self._finished:
            return None
        if self._draining:
            return self._drain_tick(now)
        if self._book is None:
            self._begin_step(0, now)
        book = self._book
        assert book is not None
        if book.steady_start_s is None:
            self._check_warmup(book, now)
        ended_by = self._end_reason(book, now)
        if ended_by is not None:
            self._end_step(book, now, ended_by)
            if book.index + 1 < len(self.settings.ladder):
                self._begin_step(book.index + 1, now)
            else:
                self._draining = True
                self._drain_started = now
                self.live.draining = True
                self._broadcast()
                return self._drain_tick(now)
        assert self._book is not None
        return self._book.target_c, float(self._book.target_c)

    def _just_started(self) -> bool:
        return (len(self.books) == 1 and self.books[0].end_s is None and not self.collector.in_flight
                and self.collector.finished == 0)

    # -- steps -----------------------------------------------------------------------------------------------

    def _reset_ladder(self) -> None:
        self.collector.clear()
        self.live = LiveStep()
        self.books: list[StepBook] = []
        self._book: StepBook | None = None
        self._draining = False
        self._drain_started = 0.0
        self._finished = False
        self.completed = False  # the whole ladder ran and drained on its own

    def _broadcast(self) -> None:
        if self.runner is not None:
            self.runner.send_message(STEP_MESSAGE, self.live.to_message())

    def _begin_step(self, index: int, now: float) -> None:
        cfg = self.settings
        target = cfg.ladder[index]
        min_requests = cfg.min_requests or step_min_requests(target, cfg.step_ci)
        book = StepBook(index=index, target_c=target, min_requests=min_requests, start_s=now)
        previous = self.collector.records([index - 1]) if index > 0 else []
        book.stable_s = warmup_stable_s([r["ttft_s"] for r in previous
                                         if r["status"] == "ok" and r.get("ttft_s") is not None])
        self._plan_budget(book, now)
        self.books.append(book)
        self._book = book
        self.live = LiveStep(index=index, target_c=target)
        if self.settings.warmup_time > 0:  # a set warm-up time is known now
            book.steady_start_s = now + self.settings.warmup_time
            self.live.steady_start_s = book.steady_start_s
        self._broadcast()
        log.info("step %d/%d C=%d: started (measures >= %d requests and >= %.0f s%s; at most %.0f s)",
                 index + 1, len(cfg.ladder), target, min_requests, cfg.min_step_time,
                 f", until tok/s is within +-{cfg.step_ci:.0%}" if cfg.step_ci > 0 else "",
                 book.max_s if book.max_s is not None else cfg.max_step_time)

    def _plan_budget(self, book: StepBook, now: float) -> None:
        """With --time-budget: this step's share of what is left, the plan (first step), the forecast."""
        cfg = self.settings
        if not cfg.time_budget:
            return
        budget_s = parse_duration(cfg.time_budget)
        if book.index == 0:
            log.info(describe_plan(list(cfg.ladder), budget_s, cfg.max_step_time, cfg.step_ci))
        elapsed = now - self.books[0].start_s if self.books else 0.0
        book.max_s = step_share(budget_s, elapsed, len(cfg.ladder) - book.index, cfg.max_step_time)
        self._forecast(book)

    def _forecast(self, book: StepBook) -> None:
        """What this step's share of the budget buys, from the last closed step with an interval (the pilot)."""
        pilot = next((b for b in reversed(self.books) if b.closed and b.halfwidth is not None), None)
        if pilot is None or book.max_s is None or pilot.steady_start_s is None or pilot.end_s is None:
            return
        line = describe_forecast(book.target_c, book.max_s, pilot.target_c, pilot.end_s - pilot.steady_start_s,
                                 pilot.halfwidth, self.settings.step_ci)
        if line:
            log.info(line)

    def _check_warmup(self, book: StepBook, now: float) -> None:
        # The window opens at this tick, not back-dated to when the last user finished its first request:
        # every process then tags requests with the same phase the step's books use. It opens when every
        # user has finished a request of this step, or when the requests in flight have stayed at C for
        # book.stable_s (the users kept from the previous step need not start over).
        if len(self.collector.in_flight) >= book.target_c:
            book.at_target_since = book.at_target_since or now
        else:
            book.at_target_since = None
        stable = (book.stable_s is not None and book.at_target_since is not None
                  and now - book.at_target_since >= book.stable_s)
        if stable or warmup_end(self.collector.records([book.index]), book.start_s, book.target_c) is not None:
            book.steady_start_s = now
            self.live.steady_start_s = now
            self._broadcast()

    def _end_reason(self, book: StepBook, now: float) -> str | None:
        cfg = self.settings
        if now - book.start_s >= (book.max_s if book.max_s is not None else cfg.max_step_time):
            return "max_time"
        steady = book.steady_start_s
        if steady is None or now < steady:
            return None
        measured = count_measured(self.collector.records([book.index]), steady)
        if measured < book.min_requests or now - steady < cfg.min_step_time:
            return None
        if cfg.step_ci <= 0:
            return "target"
        # Judged by the report's own estimator on the part of the window whose every request is recorded, not
        # extrapolated to the whole window and with a 10% margin: the report judges the whole window afresh.
        exact_until = min(now, self.collector.oldest_in_flight_start() or now)
        records = self.collector.records([book.index - 1, book.index])
        if window_precision(records, steady, exact_until) <= STOP_MARGIN * cfg.step_ci:
            return "ci"
        return None

    def _end_step(self, book: StepBook, now: float, ended_by: str) -> None:
        book.end_s = now
        book.ended_by = ended_by
        self.live.end_s = now
        self._broadcast()

    def _close_ready_books(self, force: bool) -> None:
        for book in self.books:
            if book.closed or book.end_s is None:
                continue
            if not force and not self.collector.none_in_flight_before(book.end_s):
                continue
            records = self.collector.records([book.index - 1, book.index])
            step = close_step(book, records)
            book.closed = True
            if step.get("steady_start_s") is not None and step["end_s"] > step["steady_start_s"]:
                half = window_precision(records, step["steady_start_s"], step["end_s"])
                book.halfwidth = half if math.isfinite(half) else None
            for callback in self.on_step_closed:
                callback(step)
            precision = f", tok/s 95% CI +-{book.halfwidth:.1%}" if book.halfwidth is not None else ""
            log.info(describe_close(step, len(self.settings.ladder)) + precision)
            self.collector.drop_steps_before(book.index)

    def _drain_tick(self, now: float) -> tuple[int, float] | None:
        """Users start nothing new while draining; once nothing is in flight, stop them and end the test."""
        timed_out = now - self._drain_started > self.settings.request_timeout + 10.0
        if not self.collector.in_flight or timed_out:
            self._close_ready_books(force=True)
            self._finished = True
            self.completed = not timed_out
            return None
        assert self._book is not None
        return self._book.target_c, float(self._book.target_c)

    def stop_now(self) -> None:
        """The run was stopped from outside (UI stop, Ctrl-C): close the open step with what is there."""
        if self._finished:
            return
        now = time.time()
        if self._book is not None and self._book.end_s is None:
            self._end_step(self._book, now, "stopped")
        self._close_ready_books(force=True)
        self._finished = True
