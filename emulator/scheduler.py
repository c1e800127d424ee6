"""Continuous batching in one greenlet: the part of the emulator that decides when tokens exist.

Each loop iteration is one model step. At its start, queued requests join (FIFO) while fewer than
``max_running_requests`` run; the step then lasts ``a + b*B + prefill`` ms (scaled by speed, and by the
speed drift of the moment it starts: ``emulator.drift``), measured against absolute deadlines so that timer
lateness never accumulates. At its end every running request receives its tokens and its waiter is woken; the
HTTP side writes them out while the next step runs.
If the loop falls more than ``max_catchup_ms`` behind (CPU starvation), it re-bases the timeline and
counts the lost time instead of bursting to catch up. When idle, it sleeps until a request arrives
and starts a step for that request at once.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event

from .divergence import change_answer
from .drift import Drift
from .power import PowerMeter
from .profile import Profile
from .textmodel import WordStream, text_unit

__all__ = ["Job", "QueueFull", "Scheduler", "StepStats", "WindowGauges"]

_MAX_TRACKED_PROMPTS = 100_000
_GAUGE_LOG_MAX = 100_000  # gauge refreshes kept for /_emulator/gauges (a few MB at most)


class QueueFull(Exception):
    """``max_queued_requests`` waiting requests already; SGLang answers 503."""


class Job:
    """One generation request inside the scheduler; the HTTP side waits on ``updated``."""

    __slots__ = (
        "aborted",
        "alpha",
        "change",
        "correct_drafts",
        "drafting_steps",
        "finished",
        "histogram",
        "key",
        "left_s",
        "prefill_tokens",
        "produced",
        "proposed",
        "rng",
        "scheduled_s",
        "step_tokens",
        "target_tokens",
        "updated",
        "verify_ct",
        "words",
    )

    def __init__(self, target_tokens: int, prefill_tokens: int, alpha: float | None, rng: random.Random,
                 num_steps: int) -> None:
        self.target_tokens = target_tokens
        self.prefill_tokens = prefill_tokens
        self.alpha = alpha
        self.rng = rng
        self.produced = 0
        self.step_tokens: list[int] = []
        self.verify_ct = 0  # target passes after the prompt pass (SGLang's spec_verify_ct)
        self.drafting_steps = 0  # the passes that verified a proposal (vLLM's num_spec_steps)
        self.proposed = 0  # draft tokens proposed over those passes (the depth of each step's schedule)
        self.correct_drafts = 0
        self.histogram = [0] * (num_steps + 1) if alpha is not None else []
        self.scheduled_s: float | None = None
        self.left_s: float | None = None  # when the scheduler took it out of the running batch
        self.finished = False
        self.aborted = False
        self.updated = gevent.event.Event()
        self.key = ""  # the prompt as the text model keys it
        self.words: WordStream | None = None  # the answer's tokens (a changed answer forks them)
        self.change: dict[str, Any] | None = None  # the ledger's output_change: its first changed token

    def abort(self) -> None:
        """Called by the HTTP side when the client is gone; the scheduler drops the job at its next step."""
        self.aborted = True


@dataclass
class StepStats:
    """Cumulative step bookkeeping; differences between two snapshots give window figures."""

    steps: int = 0
    modelled_s: float = 0.0
    achieved_s: float = 0.0
    late_s: float = 0.0
    late_max_s: float = 0.0
    lost_s: float = 0.0
    batch_sum: int = 0
    tokens: int = 0
    verify_passes: int = 0
    verify_tokens: int = 0
    running: int = 0
    waiting: int = 0

    def as_dict(self) -> dict[str, float | int]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class WindowGauges:
    """Gauges as of the last log window (SGLang refreshes them every few dozen decode steps)."""

    running: int = 0
    waiting: int = 0
    gen_throughput: float = 0.0
    spec_accept_length: float = 0.0
    spec_accept_rate: float = 0.0
    kv_used_tokens: int = 0  # prompt + generated tokens of the running requests (SGLang's num_used_tokens)


class Scheduler:
    """Owns the waiting queue and the running batch; ``submit`` is called from request greenlets."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        spec = profile.speculative
        self._a_ms = spec.step_a_ms if spec else profile.step_a_ms
        self._b_ms = spec.step_b_ms if spec else profile.step_b_ms
        self._num_steps = spec.num_steps if spec else 0
        self._ms_to_s = profile.scale / 1000.0
        self._catchup_s = profile.max_catchup_ms / 1000.0
        self._waiting: deque[Job] = deque()
        self._running: list[Job] = []
        self._wake = gevent.event.Event()
        self._greenlet: gevent.Greenlet | None = None
        self._stopping = False
        self._occurrences: dict[str, int] = {}
        self.stats = StepStats()
        self.window = WindowGauges()
        # Every gauge refresh as published: (wall time, running, waiting). Lets a test check a client's /metrics
        # reading against the exact value the server showed at that instant, not the batch it lags behind.
        self.gauge_log: deque[tuple[float, int, int]] = deque([(time.time(), 0, 0)], maxlen=_GAUGE_LOG_MAX)
        self._log_every = profile.metrics_interval_steps
        self._window_start = (time.monotonic(), 0, 0, 0)
        self.meter: PowerMeter | None = None  # --gpu-telemetry: told when each step starts and ends (emulator.power)
        self.drift = Drift(profile.drift_per_min)  # its clock restarts with the loop (``start``)

    # ------------------------------------------------------------ request side

    def new_job(self, text: str, target_tokens: int, prefill_tokens: int) -> Job:
        """A job whose randomness is fixed by (profile seed, prompt text, how often it was seen)."""
        seen = self._occurrences.get(text, 0)
        if len(self._occurrences) >= _MAX_TRACKED_PROMPTS:
            self._occurrences.clear()
        self._occurrences[text] = seen + 1
        spec = self.profile.speculative
        alpha = spec.alpha_for(text) if spec else None
        rng = random.Random(f"{self.profile.seed}:{text_unit(text, 'rng')}:{seen}")
        job = Job(target_tokens, prefill_tokens, alpha, rng, self._num_steps)
        job.key, job.words = text, WordStream(text)
        return job

    def submit(self, job: Job) -> None:
        limit = self.profile.max_queued_requests
        if limit is not None and len(self._waiting) >= limit:
            raise QueueFull
        self._waiting.append(job)
        self._wake.set()

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.drift = Drift(self.profile.drift_per_min)
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """Stop stepping and release every waiter (their jobs are marked aborted)."""
        self._stopping = True
        self._wake.set()
        for job in [*self._running, *self._waiting]:
            job.aborted = True
            job.updated.set()
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=2.0)

    # ------------------------------------------------------------ the loop

    def _run(self) -> None:
        clock, stats = time.monotonic, self.stats
        base = clock()
        prev_end = base
        woke = False
        while not self._stopping:
            prefill = self._admit(only_first=woke)
            woke = False
            if not self._running:
                self._idle()
                base = prev_end = clock()
                self._window_start = (base, stats.tokens, stats.verify_passes, stats.verify_tokens)
                woke = True
                continue
            batch = len(self._running)
            a_ms, b_ms = self._coefficients(batch)
            step_s = (a_ms + b_ms * batch + self.profile.prefill_ms_per_token * prefill) * self._ms_to_s
            step_s = self.drift.stretch(step_s, base)
            deadline = base + step_s
            delay = deadline - clock()
            if self.meter is not None:  # a pass's energy follows its per-request cost: its depth under a schedule
                self.meter.begin(batch, delay, pass_scale=b_ms / self._b_ms if self._b_ms > 0 else 1.0)
            gevent.sleep(delay if delay > 0 else 0)
            now = clock()
            if self.meter is not None:
                self.meter.end()
            late = now - deadline
            if late > self._catchup_s:
                stats.lost_s += late
                base = now
            else:
                base = deadline
            stats.steps += 1
            stats.modelled_s += step_s
            stats.achieved_s += now - prev_end
            stats.late_s += max(0.0, late)
            stats.late_max_s = max(stats.late_max_s, late)
            stats.batch_sum += batch
            prev_end = now
            self._advance()
            if stats.steps % self._log_every == 0:
                self._log_window(now, batch)

    def _coefficients(self, batch: int) -> tuple[float, float]:
        """(a, b) of a step of ``batch`` requests: the depth the profile's schedule gives that batch."""
        spec = self.profile.speculative
        if spec is None or (not spec.k_schedule and not spec.draft_a_ms and not spec.draft_b_ms):
            return self._a_ms, self._b_ms
        return spec.step_coefficients(spec.depth_for_batch(batch))

    def _idle(self) -> None:
        """Close the open log window (so short runs still report), then sleep until a request arrives."""
        if self.stats.tokens > self._window_start[1]:
            self._log_window(time.monotonic())
        self.stats.running = self.stats.waiting = 0
        self._publish(dataclasses.replace(self.window, running=0, waiting=0, kv_used_tokens=0))
        while not self._stopping and not self._waiting:
            self._wake.clear()
            self._wake.wait(timeout=1.0)

    def _admit(self, *, only_first: bool = False) -> int:
        """Move waiting jobs into the batch; returns the prompt tokens to prefill in this step.

        Waking from idle, only the request that woke the loop starts at once; others that arrived in
        the same instant join the next step. So clients never stay in lock-step, and a busy server
        always refills a finished request's slot one step later, as the cost model assumes.
        """
        prefill, wall = 0, time.time()
        limit = min(self.profile.max_running_requests, 1) if only_first else self.profile.max_running_requests
        while self._waiting and len(self._running) < limit:
            job = self._waiting.popleft()
            if job.aborted:
                continue
            job.scheduled_s = wall
            prefill += job.prefill_tokens
            self._running.append(job)
        self.stats.running, self.stats.waiting = len(self._running), len(self._waiting)
        return prefill

    def _advance(self) -> None:
        """Give every running job its tokens for the step that just ended, and wake its writer."""
        stats, still, wall = self.stats, [], time.time()
        batch = len(self._running)
        spec = self.profile.speculative
        num_steps = spec.depth_for_batch(batch) if spec is not None else 0
        # A chain proposes its depth; a tree (top-k > 1, no schedule) its num_draft_tokens - 1 nodes.
        proposed = num_steps if spec is None or spec.eagle_topk == 1 else spec.num_draft_tokens - 1
        decay = self._alpha_decay(batch)
        no_draft = self.profile.speculative.no_draft_share if self.profile.speculative is not None else 0.0
        for job in self._running:
            if job.aborted:
                job.left_s = wall
                job.updated.set()
                continue
            missing = job.target_tokens - job.produced
            if job.produced == 0 or job.alpha is None:
                tokens = 1
            elif num_steps == 0 or (no_draft and job.rng.random() < no_draft):  # nothing proposed: a plain pass
                tokens = 1
                job.verify_ct += 1
                stats.verify_passes += 1
                stats.verify_tokens += tokens
            else:
                accepted, rand, alpha = 0, job.rng.random, job.alpha * decay
                while accepted < num_steps and rand() < alpha:
                    accepted += 1
                tokens = min(1 + accepted, missing)
                job.verify_ct += 1
                job.drafting_steps += 1
                job.proposed += proposed
                job.correct_drafts += accepted
                job.histogram[accepted] += 1
                stats.verify_passes += 1
                stats.verify_tokens += tokens
            if self.profile.divergence.active and job.change is None:
                self._diverge(job, tokens, batch)
            job.produced += tokens
            job.step_tokens.append(tokens)
            stats.tokens += tokens
            if job.produced >= job.target_tokens:
                job.finished = True
                job.left_s = wall
            else:
                still.append(job)
            job.updated.set()
        self._running = still

    def _diverge(self, job: Job, tokens: int, batch: int) -> None:
        """The profile's lossy / batch-variance knobs on this step's new tokens (``emulator.divergence``)."""
        seed = self.profile.seed
        found = self.profile.divergence.first_change(seed, job.key, job.produced, tokens, batch)
        if found is not None and job.words is not None:
            job.change = change_answer(job.words, job.key, seed, found[0], found[1], batch)

    def _alpha_decay(self, batch: int) -> float:
        """Acceptance's share left in a step of ``batch`` requests (profile ``acceptance.halving_batch``)."""
        spec = self.profile.speculative
        if spec is None or spec.halving_batch is None:
            return 1.0
        return float(2.0 ** (-(batch - 1) / spec.halving_batch))

    def _publish(self, window: WindowGauges) -> None:
        """Show new gauges on /metrics and log them (no greenlet switch between the two: a render sees both)."""
        self.window = window
        self.gauge_log.append((time.time(), window.running, window.waiting))

    def _log_window(self, now: float, batch: int | None = None) -> None:
        """Refresh the gauges every ``metrics_interval_steps`` steps, as SGLang's decode log does.

        ``running`` is the batch of the step just run (requests that finished in it included), as SGLang logs
        the batch it decodes; ``None`` (closing the window on going idle) takes what is left running.
        """
        stats, last = self.stats, self._window_start
        elapsed = now - last[0]
        passes = stats.verify_passes - last[2]
        self._publish(WindowGauges(
            running=len(self._running) if batch is None else batch,
            kv_used_tokens=sum(job.prefill_tokens + job.produced for job in self._running),
            waiting=len(self._waiting),
            gen_throughput=(stats.tokens - last[1]) / elapsed if elapsed > 0 else 0.0,
            spec_accept_length=(stats.verify_tokens - last[3]) / passes if passes else 0.0,
            spec_accept_rate=(stats.verify_tokens - last[3] - passes) / (passes * self._num_steps) if passes else 0.0,
        ))
        self._window_start = (now, stats.tokens, stats.verify_passes, stats.verify_tokens)
