"""Trace replay (``--trace FILE``): each window of the trace is one open-loop step that sends the trace's rows.

Why: a team decides on speculation for its own traffic, with its bursts and lengths; a Poisson rate is not it.
Row k of a window is due at ``anchor + time_k / --trace-speed``, the anchor being the step's window start as
the master announced it (``LiveStep.steady_start_s``, in the master's clock), so every load process agrees on
the due times. Rows are handed out with the prompt sequence numbers (``locustfiles.sequencer``): the master owns
one counter per step, so every row is sent once whatever the number of processes. Free users queue on one lock
per process as in the rate mode (``locustfiles.pacer``, whose loop serves both: here the schedule is
``TraceSchedule``): the holder takes the next row, sleeps until it is due and sends; a row that fell due while
every user of the process was busy is dropped and counted, never sent late.

Each request is built to the row's lengths: the input from the prompt set's real text, exactly ``input_tokens``
x ``CHARS_PER_TOKEN`` characters (what a 4-characters-per-token tokenizer counts as that many tokens; a real
tokenizer gives about that many, and each record's ``prompt_tokens`` says what the server counted), the output
as the request's max tokens (exact with ``--ignore-eos``). A Mooncake row's ``hash_ids`` become its prompt's
blocks: block id B is always the same ~512 tokens of text, so two rows sharing leading ids share that prompt
prefix and a prefix cache sees the trace's reuse. Rows without ids get text of their own, never shared.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from specbench.contract.settings import SuiteSettings
from specbench.contract.traces import BLOCK_TOKENS, ReplayStep, TraceRow
from specbench.locustfiles.prompts import Prompt, PromptSet
from specbench.locustfiles.workload import CHARS_PER_TOKEN
from specbench.shapes.arrivals import Claim
from specbench.shapes.live import LiveStep


@dataclass
class Replay:
    """One process's view of the replay: the steps (windows) and the text the prompts are cut from."""

    steps: list[ReplayStep]
    texts: tuple[str, ...]  # the prompt set's texts, in a seeded order
    seed: int

    @classmethod
    def from_settings(cls, settings: SuiteSettings, prompt_set: PromptSet) -> Replay:
        texts = [p.as_text() for p in prompt_set.prompts]
        random.Random(f"{settings.seed}:trace-text").shuffle(texts)
        return cls(settings.trace_steps, tuple(texts), settings.seed)

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


@dataclass(eq=False)  # one per process, hashed by identity (the pacer's lock is kept beside it)
class TraceSchedule:
    """The trace's rows as this process's open-loop schedule (``locustfiles.pacer.Schedule``).

    Row k of a step's window is due at the window's start as the master announced it, in this process's clock,
    plus ``due_s[k]``; the rows are taken in the master's order with the prompt sequence numbers, so each is
    sent by one process only.
    """

    replay: Replay
    next_seq: Callable[[int], int]  # the run's prompt numbers (locustfiles.sequencer): the row to take next
    offset_s: Callable[[], float]  # this process's clock offset against the master's, as now measured
    exhausted: set[int] = field(default_factory=set)  # steps whose rows this process has all taken

    def claim(self, live: LiveStep, now_s: float, free_since_s: float) -> Claim:
        """The next row of the live step; a row already due before ``free_since_s`` (it fell due while every
        user here was busy) is dropped, never sent late: one at a time, so the pacer re-reads the step between."""
        step, anchor = live.index, live.steady_start_s
        if step is None or anchor is None or step in self.exhausted:
            return Claim(None, 0)
        seq = self.next_seq(step)
        plan = self.replay.steps[step]
        if seq >= len(plan.rows):
            self.exhausted.add(step)
            return Claim(None, 0)
        due = anchor - self.offset_s() + plan.due_s[seq]
        if due < free_since_s:
            return Claim(None, 1)
        return Claim(due, 0, seq)
