"""Request lengths: each request's prompt met to a drawn input length with real text, and its max tokens.

Input: the request's prompt (from the shared order) is padded with the text of the prompts that follow it in
the order, placed before it as context, or cut at a word boundary, to about the drawn number of tokens
(``CHARS_PER_TOKEN`` characters each: an estimate; the server's own ``prompt_tokens`` in each record says what
was reached). Never random token ids: a speculative draft's acceptance depends on the text, and random ids are
text no production draft sees. Output: the drawn number is the request's max tokens (exact with ignore_eos).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from contract.lengths import LengthDist, parse_length
from contract.settings import SuiteSettings
from locustfiles.prompts import Prompt, PromptOrder

#: Characters per token for English text (the usual rule of thumb; also the emulator's tokenizer).
CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True)
class Workload:
    seed: int
    input_len: LengthDist | None
    output_len: LengthDist | None
    default_max_tokens: int

    @classmethod
    def from_settings(cls, settings: SuiteSettings) -> Workload:
        return cls(settings.seed, parse_length(settings.input_len, "--input-len"),
                   parse_length(settings.output_len, "--output-len", allow_dataset=False), settings.max_tokens)

    def max_tokens(self, seq: int) -> int:
        drawn = self.output_len.draw(self.seed, seq, "output") if self.output_len is not None else None
        return drawn if drawn is not None else self.default_max_tokens

    def prompt(self, seq: int, prompt: Prompt, order: PromptOrder) -> Prompt:
        target = self.input_len.draw(self.seed, seq, "input") if self.input_len is not None else None
        if target is None:
            return prompt
        return fit_prompt(prompt, round(target * CHARS_PER_TOKEN), lambda k: order.at(seq + 1 + k).as_text())


def _cut(text: str, chars: int) -> str:
    """The first ``chars`` characters, ending at a word boundary where there is one."""
    if len(text) <= chars:
        return text
    head = text[:chars]
    space = head.rfind(" ")
    return head[:space] if space > chars // 2 else head


def fit_prompt(prompt: Prompt, chars: int, filler: Callable[[int], str]) -> Prompt:
    """``prompt`` brought to about ``chars`` characters of content: cut, or preceded by filler text.

    ``filler(k)`` gives the k-th filler text (the next prompts of the order).
    """
    own = prompt.approx_chars
    if own >= chars:
        if prompt.text is not None:
            return replace(prompt, text=_cut(prompt.text, chars))
        return prompt  # a conversation is never cut mid-turn: sent as it is
    need = chars - own - 2
    parts: list[str] = []
    k = 0
    while need > 0 and k < 1000:
        piece = filler(k)
        parts.append(_cut(piece, need))
        need -= len(parts[-1]) + 1
        k += 1
    context = "\n".join(parts)
    if prompt.text is not None:
        return replace(prompt, text=f"{context}\n\n{prompt.text}")
    assert prompt.messages is not None
    messages = [dict(m) for m in prompt.messages]
    messages[-1]["content"] = f"{context}\n\n{messages[-1]['content']}"
    return replace(prompt, messages=tuple(messages))
