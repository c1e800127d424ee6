"""Request lengths: each request's prompt met to a drawn input length with real text, and its max tokens.

Input: the request's prompt (from the shared order) is padded with the text of the prompts that follow it in
the order, placed before it as context, or cut at a word boundary, to about the drawn number of tokens
(``CHARS_PER_TOKEN`` characters each: an estimate; the server's own ``prompt_tokens`` in each record says what
was reached). Never random token ids: a speculative draft's acceptance depends on the text, and random ids are
text no production draft sees. Output: the drawn number is the request's max tokens (exact with ignore_eos).
Shared prefixes (``--shared-prefix N:LEN``): N system prompts of about LEN tokens, each a header and real text
from the prompt set; every request is drawn to one and sent with it in front (a system message on the chat
route), so a server with a prefix cache serves that part from cache.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from specbench.contract.lengths import LengthDist, parse_length, parse_shared_prefix
from specbench.contract.settings import SuiteSettings
from specbench.locustfiles.prompts import Prompt, PromptOrder, PromptSet

#: Characters per token for English text (the usual rule of thumb; also the emulator's tokenizer).
CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True)
class Workload:
    seed: int
    input_len: LengthDist | None
    output_len: LengthDist | None
    default_max_tokens: int
    prefixes: tuple[str, ...] = ()  # --shared-prefix: the shared system prompts

    @classmethod
    def from_settings(cls, settings: SuiteSettings, prompt_set: PromptSet) -> Workload:
        shared = parse_shared_prefix(settings.shared_prefix)
        prefixes = shared_prefixes(*shared, prompt_set, settings.seed) if shared else ()
        return cls(settings.seed, parse_length(settings.input_len, "--input-len"),
                   parse_length(settings.output_len, "--output-len", allow_dataset=False), settings.max_tokens,
                   prefixes)

    def max_tokens(self, seq: int, turn: int = 1) -> int:
        """Output tokens of the request at ``seq`` (turn k > 1 of a conversation draws its own)."""
        stream = "output" if turn == 1 else f"output:turn{turn}"
        drawn = self.output_len.draw(self.seed, seq, stream) if self.output_len is not None else None
        return drawn if drawn is not None else self.default_max_tokens

    def prompt(self, seq: int, prompt: Prompt, order: PromptOrder) -> Prompt:
        """The request's prompt: met to its drawn input length, then given its shared prefix."""
        target = self.input_len.draw(self.seed, seq, "input") if self.input_len is not None else None
        if target is not None:
            prompt = fit_prompt(prompt, round(target * CHARS_PER_TOKEN),
                                lambda k: order.at(seq + 1 + k).as_text())
        if self.prefixes:
            which = random.Random(f"{self.seed}:prefix:{seq}").randrange(len(self.prefixes))
            prompt = with_prefix(prompt, self.prefixes[which])
        return prompt


def shared_prefixes(n: int, tokens: int, prompt_set: PromptSet, seed: int) -> tuple[str, ...]:
    """N system prompts of about ``tokens`` tokens: a header, then prompt-set text in a seeded order."""
    texts = [p.as_text() for p in prompt_set.prompts]
    random.Random(f"{seed}:prefixes").shuffle(texts)
    out = []
    for i in range(n):
        header = (f"You are assistant {i + 1} of {n}. Answer the user's request; the reference material below "
                  "may help.\n\n")
        body = fit_prompt(Prompt(id="", category="", text=" "), round(tokens * CHARS_PER_TOKEN) - len(header),
                          _filler(texts, i))
        out.append(header + (body.text or "").strip())
    return tuple(out)


def _filler(texts: list[str], i: int) -> Callable[[int], str]:
    """Prefix i's k-th filler text: the shuffled prompt texts from position 7 i on, round the end."""
    return lambda k: texts[(i * 7 + k) % len(texts)]


def with_prefix(prompt: Prompt, prefix: str) -> Prompt:
    """``prompt`` with ``prefix`` in front: before a text prompt, as (the start of) a chat's system message."""
    if prompt.text is not None:
        return replace(prompt, text=f"{prefix}\n\n{prompt.text}")
    assert prompt.messages is not None
    messages = [dict(m) for m in prompt.messages]
    if messages[0]["role"] == "system":
        messages[0]["content"] = f"{prefix}\n\n{messages[0]['content']}"
    else:
        messages.insert(0, {"role": "system", "content": prefix})
    return replace(prompt, messages=tuple(messages))


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
