"""ConcurrencyLadder: a closed-loop LoadTestShape that walks C = 1, 2, 5, ... with honest windows.

With ``--load-mode users`` the same shape holds Locust's own user count (``-u``, the web UI's Users field, started
at its spawn rate) as one step instead, for ``--run-time`` if given, else until Stop: an ad-hoc run that the
analysis summarises like any ladder step.

Each step starts all C users at once (users wait 0 between requests, so users = concurrency), warms up
until every user has finished one request (or for a set time), then measures until both a minimum number of
requests and a minimum time are reached, capped by a maximum time; optionally it ends early once the
throughput's confidence interval is tight. Requests in flight at a step's end are not killed: they finish
as the next step warms up, and the step's books close only when the last of them is recorded, so its
window figures are exact. After the last step the shape drains, then ends the test.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from locust import LoadTestShape
from locust.runners import MasterRunner

from specbench.analysis.records.summary import closed_step_row
from specbench.analysis.reporting.stepline import step_line
from specbench.analysis.stats.batch_means import window_precision
from specbench.contract.messages import STEP_MESSAGE
from specbench.contract.policy import STALL_MS, arrival_dispersion
from specbench.contract.receiveclock import receive_clock, step_clock
from specbench.contract.schema import RequestRecord, StepRecord
from specbench.contract.settings import SuiteSettings, parse_budget, settings_of
from specbench.shapes.books import (
    StepBook,
    close_step,
    count_measured,
    lost_text,
    own_stable_s,
    refused_throughout,
    step_min_requests,
    warmup_end,
    warmup_stable_s,
)
from specbench.shapes.budget import budget_grace_s, describe_forecast, describe_plan, level_needs, step_share
from specbench.shapes.collector import RequestCollector
from specbench.shapes.live import LOG_ONLY, LiveStep
from specbench.shapes.loadcpu import LoadCpu
from specbench.shapes.pauses import PauseWatch, steady_clock
from specbench.shapes.satstop import HOLD_MAX_S, SaturationStop

log = logging.getLogger("specbench.ladder")
STOP_MARGIN = 0.9  # a step stops once its recorded part is within 90% of --step-ci

#: The ladder ends once nothing has been in flight for this long: a request a worker started just before it
#: heard "draining" announces itself within a message's latency, and its record then arrives before the end.
DRAIN_QUIET_S = 1.0


class ConcurrencyLadder(LoadTestShape):
    """Runs the whole ladder once per Start; Locust calls ``reset_time`` before each run's first tick."""

    use_common_options = True  # Users, spawn rate and run time: read in users mode, shown in the web UI's form
    _draining: bool  # set by _reset_ladder (declared here: tick, above it, reads them first)
    _finished: bool

    def __init__(self) -> None:
        super().__init__()
        self.collector = RequestCollector()
        self.on_step_closed: list[Callable[[StepRecord], None]] = []
        self.settings = SuiteSettings.from_options(None)  # the defaults, until a Start brings options
        self._cpu: LoadCpu | None = None
        self.pause_watch = PauseWatch()  # the load process's own pauses (shapes.pauses)
        #: set by the hooks on a master: each worker's latest (CPU seconds, its monotonic time), by name
        self.worker_cpu: Callable[[], dict[str, tuple[float, float]]] | None = None
        #: set by the hooks on a master: each worker's latest event-loop lateness histogram, by name
        self.worker_lag: Callable[[], dict[str, list[int]]] | None = None
        #: set by the hooks where this process runs users: its own event-loop lateness histogram
        self.own_lag: Callable[[], list[int]] | None = None
        self.levels: list[int] = list(self.settings.ladder)
        self.users_mode = False
        self.run_time: float = 0.0  # users mode: seconds from the start; 0 = until Stop
        self.spawn_rate: float | None = None  # users mode: Locust's spawn rate; None = all users at once
        self._sat_stop: SaturationStop | None = None  # --stop-after-saturation (#27)
        self._reset_ladder()

    # -- Locust's contract ----------------------------------------------------------------------------------

    def reset_time(self) -> None:
        super().reset_time()
        if self._just_started():  # MasterRunner.start() calls this again right after the first tick
            return
        options = self.runner.environment.parsed_options if self.runner is not None else None
        if options is not None:
            self.settings = settings_of(options)
        self._read_mode(options)
        self._reset_ladder()
        self._sat_stop = SaturationStop.from_settings(self.settings)
        if self.runner is not None:  # a web-UI restart: the previous run's stats are still there
            self.runner.stats.clear_all()

    def tick(self) -> tuple[int, float] | None:
        now = time.time()
        missed = self.pause_watch.observe(now, steady_clock())
        if missed:
            log.warning("the load process stood still for %.1f s (paused, suspended or frozen): this step's figures "
                        "are the client's, not the server's; it is flagged client_paused", missed)
        self._sample_cpu()
        self._close_ready_books(force=False)
        if self._finished:
            return None
        if self._draining:
            return self._drain_tick(now)
        if self._book is None:
            self._begin_step(0, now)
        book = self._book
        assert book is not None
        if book.steady_start_s is None and book.end_s is None:
            self._check_warmup(book, now)
        ended_by = self._end_reason(book, now) if book.end_s is None else None
        if ended_by is not None:
            self._end_step(book, now, ended_by)
        if book.end_s is not None:
            if self._hold_for_saturation(book, now):
                return self._users(book)
            if book.index + 1 < self._n_steps() and not self._skip_after_saturation(book):
                self._begin_step(book.index + 1, now)
            else:
                self._draining = True
                self._drain_started = now
                self.live.draining = True
                self._broadcast()
                return self._drain_tick(now)
        assert self._book is not None
        return self._users(self._book)

    def _hold_for_saturation(self, book: StepBook, now: float) -> bool:
        """With --stop-after-saturation: keep the ended step's load until its books close (bounded), so the
        skip rule judges its exact figures (#27)."""
        return (self._sat_stop is not None and not self.users_mode and book.target_rate is None
                and not book.closed and book.end_s is not None and now - book.end_s < HOLD_MAX_S
                and book.index + 1 < self._n_steps())

    def _skip_after_saturation(self, book: StepBook) -> bool:
        if self._sat_stop is None or self.users_mode or book.target_rate is not None:
            return False
        skipped = self._sat_stop.levels_to_skip(self.levels, book.index)
        if skipped and self._sat_stop.saturation is not None:
            log.info("skipping %s: more than %d level(s) beyond the saturation (%s) (--stop-after-saturation)",
                     ", ".join(f"C={c}" for c in skipped), self._sat_stop.after, self._sat_stop.saturation.text)
        return bool(skipped)

    def _users(self, book: StepBook) -> tuple[int, float]:
        """(users, spawn rate) for a step. The rate paces ramp-down too: at a rate of target_c, a step down from
        4 to 1 stops one user a second and the C=1 step starts with extra users. The highest level starts or
        stops any step at once."""
        return book.target_c, float(max(self.levels))

    def _n_steps(self) -> int:
        return len(self.levels)

    def _read_mode(self, options: object) -> None:
        """The levels of this run: the ladder, or (users mode) Locust's user count as the one level."""
        self.users_mode = self.settings.load_mode == "users"
        if not self.users_mode:
            self.levels, self.run_time, self.spawn_rate = list(self.settings.ladder), 0.0, None
            return
        users = int(getattr(options, "num_users", None) or 1)
        rate = getattr(options, "spawn_rate", None)
        self.levels = [max(users, 1)]
        self.run_time = float(getattr(options, "run_time", None) or 0.0)
        self.spawn_rate = float(rate) if rate else None

    def _users_tick(self, target: int) -> tuple[int, float]:
        return target, float(self.spawn_rate or max(self.levels))

    def _just_started(self) -> bool:
        return (len(self.books) == 1 and self.books[0].end_s is None and not self.collector.in_flight
                and self.collector.finished == 0)

    # -- steps -----------------------------------------------------------------------------------------------

    def _reset_ladder(self) -> None:
        self.collector.clear()
        self.live = LiveStep()
        self.books: list[StepBook] = []
        self._closed_steps: list[StepRecord] = []  # the steps.jsonl lines so far: what the budget's needs read
        self._book: StepBook | None = None
        self._draining = False
        self._drain_started = 0.0
        self._quiet_since: float | None = None
        self._finished = False
        self.completed = False  # the whole ladder ran and drained on its own
        self.pause_watch = PauseWatch()
        self._budget_s = 0.0  # --time-budget in seconds, from the first step's start (0: none)
        self._budget_end: float | None = None  # wall clock when the budget is spent

    def _broadcast(self) -> None:
        if self.runner is not None:
            self.runner.send_message(STEP_MESSAGE, self.live.to_message())

    def _new_book(self, index: int, now: float) -> StepBook:
        target = self.levels[index]
        min_requests = self.settings.min_requests or step_min_requests(target, self.settings.step_ci)
        return StepBook(index=index, target_c=target, min_requests=min_requests, start_s=now)

    def _level_text(self, book: StepBook) -> str:
        return f"C={book.target_c}"

    def _users_needed(self, book: StepBook) -> int:
        """Users that must each finish a request before the window opens (closed loop: all C)."""
        return book.target_c

    def _measured_so_far(self, book: StepBook, steady: float) -> int:
        """Requests that count towards the step's minimum: closed loop, those finished inside the window."""
        return count_measured(self.collector.records([book.index]), steady)

    def _begin_step(self, index: int, now: float) -> None:
        book = self._new_book(index, now)
        target = book.target_c
        previous = self.collector.records([index - 1]) if index > 0 else []
        book.stable_s = warmup_stable_s([ttft for r in previous
                                         if r["status"] == "ok" and (ttft := r.get("ttft_s")) is not None])
        self._plan_budget(book, now)
        self.books.append(book)
        self._book = book
        self.cpu.begin()
        self.live = LiveStep(index=index, target_c=target, target_rate=book.target_rate)
        if self.settings.warmup_time > 0:  # a set warm-up time is known now
            book.steady_start_s = now + self.settings.warmup_time
            self.live.steady_start_s = book.steady_start_s
        self._broadcast()
        if self.users_mode:
            until = f"for {self.run_time:g} s" if self.run_time else "until Stop"
            log.info("users C=%d: started (measures from when every user has finished a request, %s)", target,
                     until)
            return
        cfg = self.settings
        log.info("step %d/%d %s: started (%s; at most %.0f s)", index + 1, self._n_steps(), self._level_text(book),
                 self._measures_text(book), book.max_s if book.max_s is not None else cfg.max_step_time,
                 extra=LOG_ONLY)

    def _measures_text(self, book: StepBook) -> str:
        """What the step's window must reach, for its start line."""
        cfg = self.settings
        ci = f", until tok/s is within +-{cfg.step_ci:.0%}" if cfg.step_ci > 0 else ""
        return f"measures >= {book.min_requests} requests and >= {cfg.min_step_time:.0f} s{ci}"

    def _plan_budget(self, book: StepBook, now: float) -> None:
        """With --time-budget: this step's share of what is left, the plan (first step), the forecast."""
        cfg = self.settings
        budget_s = parse_budget(cfg.time_budget)
        if not budget_s or self.users_mode:
            return
        if book.index == 0:
            self._budget_s, self._budget_end = budget_s, now + budget_s
        if book.index == 0:
            log.info(describe_plan(list(self.levels), budget_s, cfg.max_step_time, cfg.step_ci))
        elapsed = now - self.books[0].start_s if self.books else 0.0
        book.max_s = step_share(budget_s, elapsed, self._n_steps() - book.index, cfg.max_step_time,
                                self._needs(book.index))
        self._forecast(book)

    def _needs(self, index: int) -> list[float]:
        """The levels from ``index`` on: each one's expected step time from the closed steps (budget.level_needs)."""
        cfg = self.settings
        return level_needs(self.levels[index:], self._closed_steps,
                           lambda c: cfg.min_requests or step_min_requests(c, cfg.step_ci), cfg.min_step_time)

    def _forecast(self, book: StepBook) -> None:
        """What this step's share of the budget buys, from the last closed step with an interval (the pilot)."""
        pilot = next((b for b in reversed(self.books) if b.closed and b.halfwidth is not None), None)
        if (pilot is None or pilot.halfwidth is None or book.max_s is None or pilot.steady_start_s is None
                or pilot.end_s is None):
            return
        line = describe_forecast(book.target_c, book.max_s, pilot.target_c, pilot.end_s - pilot.steady_start_s,
                                 pilot.halfwidth, self.settings.step_ci)
        if line:
            log.info(line, extra=LOG_ONLY)

    def _check_warmup(self, book: StepBook, now: float) -> None:
        # The window opens at this tick, not back-dated to when the last user finished its first request:
        # every process then tags requests with the same phase the step's books use. It opens when every
        # user has finished a request of this step, or when the requests in flight have stayed at C for
        # book.stable_s (the users kept from the previous step need not start over); a first step takes its
        # stable time from its own first requests once half its users have one (books.own_stable_s).
        if book.target_c > 0 and len(self.collector.in_flight) >= book.target_c:  # closed loop only
            book.at_target_since = book.at_target_since or now
        else:
            book.at_target_since = None
        records = self.collector.records([book.index])
        stable_s = book.stable_s
        if stable_s is None:  # no previous step (or none with a TTFT): the step's own first requests
            stable_s = own_stable_s(records, book.start_s, self._users_needed(book))
        stable = (stable_s is not None and book.at_target_since is not None
                  and now - book.at_target_since >= stable_s)
        first_done = warmup_end(records, book.start_s, self._users_needed(book))
        if stable or first_done is not None:
            book.steady_start_s = now
            self.live.steady_start_s = now
            self._broadcast()

    def _end_reason(self, book: StepBook, now: float) -> str | None:
        cfg = self.settings
        if self.users_mode:  # the user's run time, else only Stop ends it
            return "run_time" if self.run_time and now - book.start_s >= self.run_time else None
        if now - book.start_s >= (book.max_s if book.max_s is not None else cfg.max_step_time):
            return "max_time"
        steady = book.steady_start_s
        if steady is None or now < steady:
            return None
        if (now - steady >= cfg.min_step_time and not self.collector.in_flight
                and refused_throughout(self.collector.records([book.index]))):
            return "refused"  # the server took on nothing: the step's line names its refusals
        measured = self._measured_so_far(book, steady)
        if measured < book.min_requests or now - steady < cfg.min_step_time:
            return None
        if cfg.step_ci <= 0:
            return "target"
        # Judged by the report's own estimator on the part of the window whose every request is recorded, not
        # extrapolated to the whole window and with a 10% margin: the report judges the whole window afresh.
        exact_until = min(now, self.collector.oldest_in_flight_start() or now)
        records = self.collector.overlapping(steady, exact_until)
        if window_precision(records, steady, exact_until) <= STOP_MARGIN * cfg.step_ci:
            return "ci"
        return None

    def _end_step(self, book: StepBook, now: float, ended_by: str) -> None:
        book.end_s = now
        book.load_cpu = self.cpu.finish()
        book.read_lag_ms = self.cpu.read_lag_p90_ms()
        stalls = self.cpu.stalled_s(STALL_MS)  # any process, workers included: a paused worker is one long stall
        for name, stalled in stalls.items():
            log.warning("load process %s stood still for %.1f s or more in this step (paused, suspended or frozen): "
                        "it is flagged client_paused", name, stalled)
        book.paused_s = max(self.pause_watch.paused_s(book.start_s, now), *stalls.values(), 0.0)
        book.ended_by = ended_by
        self.live.end_s = now
        self._broadcast()

    @property
    def receive_clock(self) -> str:
        """The clock asked for the users' chunk times (``contract.receiveclock``); each step's line says the one
        that dated them (``step_clock``)."""
        host = self.runner.environment.host if self.runner is not None else None
        return receive_clock(self.settings.receive_clock, host or "")

    def _arrival_dispersion(self) -> float:
        """How a step's send count is judged when it closes (``contract.policy.rate_held``)."""
        return arrival_dispersion(self.settings.arrivals, self.settings.burstiness)

    def _close_ready_books(self, force: bool) -> None:
        for book in self.books:
            if book.closed or book.end_s is None:
                continue
            if not force and not self.collector.none_in_flight_before(book.end_s):
                continue
            records = self._window_records(book)
            book.dropped = self.collector.dropped.get(book.index, 0)
            step = close_step(book, records, dispersion=self._arrival_dispersion(),
                              receive_clock=step_clock(self.receive_clock, records))
            book.closed = True
            self._closed_steps.append(step)
            # One computation (#61): the line printed here is the report's row for this step, from the same records.
            row, _ = closed_step_row(self.settings.label or "run", step, records)
            book.halfwidth = row.throughput_ci_rel
            if self._sat_stop is not None:
                self._sat_stop.note(step, records, book.halfwidth)
            for callback in self.on_step_closed:
                callback(step)
            log.info(step_line(row, self._n_steps(), step["ended_by"], lost=lost_text(step)))
            self.collector.drop_ended_before(min([book.steady_start_s or book.start_s, *(
                b.steady_start_s or b.start_s for b in self.books if not b.closed)]))

    def _window_records(self, book: StepBook) -> list[RequestRecord]:
        """Every record in flight during the step's life, whichever step sent it (a window figure depends on no
        other), and this step's own (its request counts)."""
        end = book.end_s if book.end_s is not None else book.start_s
        near = self.collector.overlapping(book.start_s, end)
        seen = {id(r) for r in near}
        return [*near, *(r for r in self.collector.records([book.index]) if id(r) not in seen)]

    def _drain_tick(self, now: float) -> tuple[int, float] | None:
        """Users start nothing new while draining; once nothing is in flight, stop them and end the test.

        With a --time-budget the drain ends at the budget's end plus ``budget_grace_s`` whatever is in flight: a
        server that went silent would otherwise hold a 10 s budget until --read-timeout or --request-timeout
        (minutes). Requests still in flight then are recorded as cancelled, and the log says how many."""
        timed_out = now - self._drain_started > self.settings.request_timeout + 10.0
        if self.collector.in_flight:
            self._quiet_since = None
        elif self._quiet_since is None:
            self._quiet_since = now
        quiet = self._quiet_since is not None and now - self._quiet_since >= DRAIN_QUIET_S
        spent = self._budget_end is not None and now >= self._budget_end + budget_grace_s(self._budget_s)
        if spent and not quiet and self.collector.in_flight:
            log.warning("time budget spent: %d request(s) still in flight are cancelled (the server answers too "
                        "slowly or not at all)", len(self.collector.in_flight))
            self._end_where_exact()
        if quiet or timed_out or spent:
            self._close_ready_books(force=True)
            self._finished = True
            self.completed = not timed_out
            return None
        assert self._book is not None
        return self._users(self._book)

    def _end_where_exact(self) -> None:
        """Requests about to be cancelled count no tokens but would count as in flight: a window they overlap ends
        where the oldest of them started, as a stopped step's does (``stop_now``), so every request overlapping
        it has finished whole and the step line, summarize and the report read the same records (#61)."""
        oldest = self.collector.oldest_in_flight_start()
        for book in self.books:
            if oldest is not None and not book.closed and book.end_s is not None and book.end_s > oldest:
                log.warning("step %d %s: its window ends at the oldest cancelled request's start, %.1f s early",
                            book.index + 1, self._level_text(book), book.end_s - max(book.start_s, oldest))
                book.end_s = max(book.start_s, oldest)

    def open_step(self) -> StepBook | None:
        """The step whose window is still open (for live figures); None between steps, runs and while draining."""
        book = self._book
        return book if book is not None and book.end_s is None and not self._finished else None

    @property
    def cpu(self) -> LoadCpu:
        cpu: LoadCpu | None = getattr(self, "_cpu", None)
        if cpu is None:
            master = isinstance(self.runner, MasterRunner)
            cpu = self._cpu = LoadCpu("master" if master else "local", None if master else self.own_lag)
        return cpu

    def _sample_cpu(self) -> None:
        self.cpu.sample(self.worker_cpu() if self.worker_cpu is not None else {},
                        self.worker_lag() if self.worker_lag is not None else None)

    def note_worker_lost(self, users: int, lost_steps: list[int | None]) -> None:
        """A worker died: the current step lost its users; each step lost the requests it had in flight."""
        if self._book is not None:
            self._book.users_lost += users
        by_index = {b.index: b for b in self.books}
        for step in lost_steps:
            book = by_index.get(step) if step is not None else self._book
            if book is not None:
                book.lost_requests += 1

    def stop_now(self) -> None:
        """The run is being stopped from outside (UI Stop, Ctrl-C, SIGTERM): close the open step's books now.

        Called before Locust kills the users. The users' requests in flight will be cut short, and a cut request
        counts no tokens, so the open window ends where the oldest of them started: every request overlapping
        it has finished whole, and its figures are exact. In users mode a Stop is how a run ends: completed.
        """
        if self._finished:
            return
        now = time.time()
        book = self._book
        if book is not None and book.end_s is None:
            oldest = self.collector.oldest_in_flight_start()
            end = now if oldest is None else max(book.start_s, min(now, oldest))
            self._end_step(book, end, "stopped")
        self._close_ready_books(force=True)
        self._finished = True
        self.completed = self.users_mode
