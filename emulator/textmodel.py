"""Deterministic stand-ins for tokenizer, chat template, answer length, draft acceptance and output text.

Everything here is a pure function of the prompt text, so a prompt behaves the same on every run and
in the analytic cost model:

* prompt tokens = ceil(len(text) / chars_per_token) (4 chars per token by default), at least 1;
  chat messages are first rendered with a ChatML-like template (``render_chat``);
* the natural answer length (used without ``ignore_eos``) and the per-draft acceptance probability
  come from independent 64-bit BLAKE2b digests of the prompt's *key*, mapped uniformly onto their
  ranges (acceptance: in the range of the first ``by_text`` rule whose string the key contains, if any).
  The key is the prompt text, or for chat the message contents joined by newlines, so one
  question behaves the same through ``/generate``, ``/v1/completions`` and ``/v1/chat/completions``;
* the output is a word stream: one word = one token, each with a stable token id.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "WordStream",
    "acceptance_alpha",
    "estimate_prompt_tokens",
    "natural_answer_tokens",
    "prompt_key",
    "prompt_tokens",
    "render_chat",
    "text_unit",
]

_VOCAB_TEXT = (
    "the of and to in is that for it as with was on be by this are from at or an which but not have "
    "model token batch draft verify accept step decode prefill cache latency throughput request "
    "server queue stream chunk kernel memory tensor layer expert router weight gradient value energy "
    "field light time space mass orbit planet theory system result data signal noise error rate "
    "curve point graph table number sample method answer reason example detail first second next "
    "then also because however therefore while when where more less each every many most some other "
    "such only very well"
)
_VOCAB = tuple(_VOCAB_TEXT.split())
_TOKEN_ID_BASE = 1000
_LCG_MUL = 6364136223846793005
_LCG_ADD = 1442695040888963407
_MASK64 = (1 << 64) - 1


def text_unit(text: str, salt: str) -> float:
    """A number in [0, 1) that is a stable function of ``text`` and ``salt``."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8, person=salt.encode()[:16])
    return int.from_bytes(digest.digest(), "big") / 2.0**64


def estimate_prompt_tokens(text: str, chars_per_token: float = 4.0) -> int:
    """Emulated tokenizer: ceil(characters / chars_per_token), never below 1."""
    return max(1, math.ceil(len(text) / chars_per_token))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def render_chat(messages: Iterable[Mapping[str, Any]]) -> str:
    """ChatML-like rendering; the assistant header is appended as a real chat template does."""
    parts = [f"<|im_start|>{m.get('role', 'user')}\n{_content_text(m.get('content'))}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n"


def prompt_key(prompt: str | Sequence[Mapping[str, Any]]) -> str:
    """Identity of a prompt for acceptance, answer length and output words (see module docstring)."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(_content_text(m.get("content")) for m in prompt)


def prompt_tokens(prompt: str | Sequence[Mapping[str, Any]], chars_per_token: float = 4.0) -> int:
    """Emulated prompt tokens of a raw prompt, or of a message list after the chat template."""
    text = prompt if isinstance(prompt, str) else render_chat(prompt)
    return estimate_prompt_tokens(text, chars_per_token)


def natural_answer_tokens(text: str, lo: int, hi: int) -> int:
    """Length at which the emulated model emits EOS for this prompt (uniform in [lo, hi])."""
    return lo + int(text_unit(text, "answer-len") * (hi - lo + 1))


def acceptance_alpha(text: str, alpha_min: float, alpha_max: float,
                     pinned: Sequence[tuple[str, float]] = (),
                     rules: Sequence[tuple[str, float, float]] = ()) -> float:
    """Per-draft acceptance probability of this prompt key: pinned if listed, else uniform in the range of the
    first rule ``(contains, lo, hi)`` whose string occurs in the key (the kind of text), else in [min, max]."""
    for key, alpha in pinned:
        if key == text:
            return alpha
    for contains, lo, hi in rules:
        if contains in text:
            alpha_min, alpha_max = lo, hi
            break
    return alpha_min + (alpha_max - alpha_min) * text_unit(text, "accept")


class WordStream:
    """The deterministic answer to one prompt, grown on demand: words (with a leading space) and ids."""

    __slots__ = ("_state", "ids", "words")

    def __init__(self, text: str) -> None:
        self._state = int(text_unit(text, "words") * 2.0**64) | 1
        self.words: list[str] = []
        self.ids: list[int] = []

    def extend_to(self, count: int) -> None:
        """Make sure at least ``count`` words exist."""
        state, words, ids = self._state, self.words, self.ids
        for _ in range(count - len(words)):
            state = (state * _LCG_MUL + _LCG_ADD) & _MASK64
            index = (state >> 33) % len(_VOCAB)
            words.append(" " + _VOCAB[index])
            ids.append(_TOKEN_ID_BASE + (state >> 40) % 60000)
        self._state = state

    def text(self, start: int, stop: int) -> str:
        self.extend_to(stop)
        return "".join(self.words[start:stop])

    def fork(self, position: int, salt: str) -> tuple[int, int]:
        """Change the token at ``position`` and continue from there on another stream (the rest of an answer
        follows its changed token); returns the token id before and after. Tokens before stay as they were."""
        self.extend_to(position + 1)
        before = self.ids[position]
        del self.words[position:], self.ids[position:]
        self._state = int(text_unit(salt, "fork") * 2.0**64) | 1
        self.extend_to(position + 1)
        if self.ids[position] == before:
            self.ids[position] = before + 1
        return before, self.ids[position]
