"""Multi-turn conversations (``--multi-turn N``): later turns resend the server's real answers.

Why: a chat product's later turns carry the whole history, so prefix caching and context length change both
the baseline's speed and what a speculative draft sees; a benchmark of single requests never shows that. Each
Locust user holds one conversation at a time. Turn 1 is the request's prompt from the shared order (request N
of a level starts conversation N, with its drawn lengths and shared prefix), held as chat messages; turn k+1 is
turn k's messages, the answer the server actually streamed (exactly, as an assistant message) and a follow-up
question drawn from ``FOLLOW_UPS`` by run seed, prompt position and turn, so compared runs ask the same
follow-ups. On the text routes the messages are a transcript (``Prompt.as_text``) in which turn k+1 starts
with turn k's text and its answer, as a server's prefix cache holds them.

A conversation ends after its last turn, on a failed turn (the next request starts a new one), and at a step
change or a new run: a level's records never continue a conversation of another level.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from specbench.locustfiles.prompts import Prompt

#: Follow-up questions a user asks after an answer; short and generic, so they fit any first prompt.
FOLLOW_UPS: tuple[str, ...] = (
    "Can you give a concrete example?",
    "Summarise that in three bullet points.",
    "What are the main limitations of that?",
    "Explain that again for a complete beginner.",
    "Which part of your answer are you least sure about, and why?",
    "Can you make that shorter?",
    "Give me an edge case where that would not hold.",
    "How would I check that this is right?",
    "Rewrite the key point as a single sentence.",
    "What should I read or try next to go deeper?",
    "Could you put that into a table?",
    "What is the most common mistake people make here?",
    "Now turn that into a short checklist I can follow.",
    "Why does that work? Walk me through the reasoning step by step.",
    "Is there a simpler alternative? Compare the two.",
    "Thanks. What would you do differently if this were for a production system?",
)


def follow_up(seed: int, seq: int, turn: int) -> str:
    """The user's question of ``turn`` (2 or more) in conversation ``seq``: a pure function of the three."""
    return random.Random(f"{seed}:follow-up:{seq}:{turn}").choice(FOLLOW_UPS)


def turn_prompt_id(base_id: str, turn: int) -> str:
    """Turn 1 keeps its prompt's id; later turns name prompt and turn (``chat-004/t2``)."""
    return base_id if turn == 1 else f"{base_id}/t{turn}"


@dataclass(frozen=True)
class Conversation:
    """One conversation in progress: what its last turn sent, and where it belongs."""

    run: object  # the run context it was started in (a new Start is a new run)
    step: int | None
    seq: int  # the prompt-order position of its first turn
    turn: int  # the turn ``prompt`` was sent as
    base_id: str
    prompt: Prompt  # the prompt of ``turn``, as chat messages

    @classmethod
    def start(cls, run: object, step: int | None, seq: int, prompt: Prompt) -> Conversation:
        """Turn 1: ``prompt`` (already met to its lengths and prefix) as chat messages."""
        as_chat = replace(prompt, text=None, messages=tuple(prompt.as_messages()))
        return cls(run, step, seq, 1, prompt.id, as_chat)

    @property
    def conversation_id(self) -> str:
        """Unique within a run: the step and the first turn's prompt-order position (``s2-17``)."""
        return f"s{self.step}-{self.seq}" if self.step is not None else str(self.seq)

    def belongs(self, run: object, step: int | None) -> bool:
        return self.run is run and self.step == step

    def next_turn(self, answer: str, seed: int) -> Conversation:
        """Turn k+1: this turn's messages, the server's answer as it streamed it, and a follow-up question."""
        turn = self.turn + 1
        recorded = self.prompt.recorded_turns  # a recorded conversation's own next user turn, while it has one
        question = recorded[turn - 2] if len(recorded) >= turn - 1 else follow_up(seed, self.seq, turn)
        messages = (*self.prompt.as_messages(), {"role": "assistant", "content": answer},
                    {"role": "user", "content": question})
        prompt = Prompt(id=turn_prompt_id(self.base_id, turn), category=self.prompt.category, messages=messages,
                        recorded_turns=recorded, tools=self.prompt.tools)
        return replace(self, turn=turn, prompt=prompt)
