"""Trace replay (``--trace FILE``): each window of the trace is one open-loop step that sends the trace's rows.

Why: a team decides on speculation for its own traffic, with its bursts and lengths; a Poisson rate is not it.
Row k of a window is due at ``anchor + time_k / --trace-speed``, the anchor being the step's window start as
the master announced it (``LiveStep.steady_start_s``, in the master's clock), so every load process agrees on
the due times. Rows are handed out with the prompt sequence numbers (``locustfiles.sequencer``): the master owns
one counter per step, so every row is sent once whatever the number of processes. Free users queue on one lock
per process as in the rate mode (``locustfiles.pacer``): the holder takes the next row, sleeps until it is due
and sends; a row that fell due while every user of the process was busy is dropped and counted, never sent late.

Each request is built to the row's lengths: the input from the prompt set's real text, exactly ``input_tokens``
x ``CHARS_PER_TOKEN`` characters (what a 4-characters-per-token tokenizer counts as that many tokens; a real
tokenizer gives about that many, and each record's ``prompt_tokens`` says what the server counted), the output
as the request's max tokens (exact with ``--ignore-eos``). A Mooncake row's ``hash_ids`` become its prompt's
blocks: block id B is always the same ~512 tokens of text, so two rows sharing leading ids share that prompt
prefix and a prefix cache sees the trace's reuse. Rows without ids get text of their own, never shared.
"""

from __future__ import annotations

import random
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent.lock import Semaphore

from contract.settings import SuiteSettings
from contract.traces import BLOCK_TOKENS, ReplayStep, TraceRow, load_trace, parse_windows, replay_steps
from locustfiles.messages import DROP_MESSAGE
from locustfiles.prompts import Prompt, PromptSet
from locustfiles.workload import CHARS_PER_TOKEN


@dataclass(eq=False)  # one per process, hashed by identity (its lock is kept beside it)
class Replay:
    """One process's view of the replay: the steps (windows) and the text the prompts are cut from."""

    steps: list[ReplayStep]
    texts: tuple[str, ...]  # the prompt set's texts, in a seeded order
    seed: int
    exhausted: set[int] = field(default_factory=set)  # steps whose rows this process has all taken

    @classmethod
    def from_settings(cls, settings: SuiteSettings, prompt_set: PromptSet) -> Replay:
        trace = load_trace(settings.trace, settings.trace_format)
        texts = [p.as_text() for p in prompt_set.prompts]
        random.Random(f"{settings.seed}:trace-text").shuffle(texts)
        return cls(replay_steps(trace, parse_windows(settings.trace_window), settings.trace_speed), tuple(texts),
                   settings.seed)

    def row(self, step: int, seq: int) -> TraceRow:
        return self.steps[step].rows[seq]

    def prompt(self, step: int, seq: int) -> Prompt:
        """Row ``seq`` of window ``step`` as a text prompt of exactly its input length (see the docstring)."""
        row = self.row(step, seq)
        chars = round(row.input_tokens * CHARS_PER_TOKEN)
        if row.hash_ids:
            block = round(BLOCK_TOKENS * CHARS_PER_TOKEN)
            text = "".join(self._text(f"[block {b}] ", block, f"block:{b}") for b in row.hash_ids)
        else:
            text = self._text(f"[request {step}.{seq}] ", chars, f"row:{step}:{seq}")
        return Prompt(id=f"trace-{row.line}", category="trace", text=text[:chars])

    def _text(self, head: str, chars: int, key: str) -> str:
        """``chars`` characters: ``head`` then the prompt set's texts from a seeded place, one per line."""
        start = random.Random(f"{self.seed}:{key}").randrange(len(self.texts))
        parts, size, k = [head], len(head), 0
        while size < chars:
            piece = self.texts[(start + k) % len(self.texts)]
            parts.append(piece + "\n")
            size += len(piece) + 1
            k += 1
        return "".join(parts)[:chars]


_LOCKS: weakref.WeakKeyDictionary[Replay, Semaphore] = weakref.WeakKeyDictionary()


def wait_for_row(ctx: Any, runner: Any) -> tuple[float, int] | None:
    """Sleep until this user's row of the trace is due; (due time in this process's clock, row) or None when
    there is nothing to send (between steps, the window's rows all taken, or the replay over)."""
    replay: Replay = ctx.replay
    free_since = time.time()
    lock = _LOCKS.setdefault(replay, Semaphore())
    with lock:
        while True:
            live = ctx.live
            step = live.index
            if live.draining or step is None or live.steady_start_s is None or step in replay.exhausted:
                gevent.sleep(0.05)
                return None
            seq = ctx.next_seq(step)
            plan = replay.steps[step]
            if seq >= len(plan.rows):
                replay.exhausted.add(step)
                continue
            due = live.steady_start_s - ctx.clock.offset_s + plan.due_s[seq]
            if due < free_since:  # it fell due while every user here was busy: dropped, never sent late
                if runner is not None:
                    runner.send_message(DROP_MESSAGE, {"step": step, "count": 1})
                continue
            delay = due - time.time()
            if delay > 0:
                gevent.sleep(delay)
            if ctx.live.index == step and not ctx.live.draining:
                return due, seq
            free_since = time.time()
