"""Before any load: which prompts cannot fit the server's context with ``--max-tokens``? One line, or none.

A request whose prompt plus ``--max-tokens`` exceeds what the server holds per request is refused (vLLM answers
HTTP 400) or cut short (llama.cpp stops at the end of its slot's context), and the step's error rate or answer
lengths then measure the prompt set, not the server: 2% of a run against a vLLM server with a 2,048-token context
failed so, unannounced (#60). The limit comes from the server (``ServerIdentity.context_tokens``); the prompts
are counted by the server's own tokenizer where it has one (``POST /tokenize``: vLLM with the prompt or the chat
messages, llama.cpp with the text), else estimated at 4 characters a token, and the line says which.

Only the prompt set as given is checked: a run that reshapes prompts (``--input-len``, ``--shared-prefix``,
``--trace``) or grows a conversation over turns says "not checked" for what it adds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import requests
from urllib3.exceptions import ReadTimeoutError

from specbench.contract.servertext import plain
from specbench.contract.settings import SuiteSettings
from specbench.locustfiles.auth import auth_headers
from specbench.locustfiles.deadline import Deadline, DeadlineExceeded, fetch
from specbench.locustfiles.httpsession import new_session
from specbench.locustfiles.promptset import Prompt, PromptSet
from specbench.locustfiles.serverinfo import ServerIdentity

CHARS_PER_TOKEN = 4  # the suite's estimate where the server cannot count (as the long-context set's lengths)
TOKENIZE_TOTAL_S = 20.0  # every prompt's count within this, or the rest estimated
SHOWN_IDS = 5


@dataclass(frozen=True)
class ContextFit:
    """What the check found: the server's limit, each prompt that cannot fit, and how prompts were counted."""

    context_tokens: int
    max_tokens: int
    prompts: int
    too_long: tuple[tuple[str, int], ...]  # (prompt id, its prompt tokens), longest first
    counted_by: str  # "tokenizer" (the server's), "estimate", or "mixed" (the server stopped answering)

    def line(self, role: str, kind: str) -> str | None:
        """The one line before the load (None when every prompt fits)."""
        if not self.too_long:
            return None
        shown = ", ".join(f"{plain(pid)} ({tokens})" for pid, tokens in self.too_long[:SHOWN_IDS])
        more = f" and {len(self.too_long) - SHOWN_IDS} more" if len(self.too_long) > SHOWN_IDS else ""
        how = {"tokenizer": "counted by the server's tokenizer",
               "estimate": f"estimated at {CHARS_PER_TOKEN} characters a token",
               "mixed": "counted by the server's tokenizer, the rest estimated"}[self.counted_by]
        room = self.context_tokens - self.too_long[0][1]  # the largest --max-tokens that fits every prompt
        fix = (f"--max-tokens {room} or less fits every prompt, or give --prompts without them" if room >= 1 else
               "a prompt alone exceeds the context: give --prompts without them")
        return (f"{role}: {len(self.too_long)} of {self.prompts} prompts cannot fit its context of "
                f"{self.context_tokens} tokens with --max-tokens {self.max_tokens} (prompt tokens {how}): "
                f"{shown}{more}; {_outcome(kind)}; {fix}")


def _outcome(kind: str) -> str:
    """What the run does with such a prompt, by server (docs/reference/protocols.md)."""
    if kind == "vllm":
        return "they are sent as given and vLLM refuses each (HTTP 400), counted as failed requests (http_error)"
    if kind == "llamacpp":
        return ("they are sent as given; llama.cpp stops an answer at the end of its slot's context (fewer tokens "
                "than --max-tokens) and refuses a prompt longer than the context")
    return "they are sent as given: the server may refuse them or cut their answers short"


def check_context_fit(identity: ServerIdentity, prompt_set: PromptSet, api: str, max_tokens: int, *,
                      api_key: str | None = None, timeout: float = 5.0,
                      total: float = TOKENIZE_TOTAL_S) -> ContextFit | None:
    """The prompts that cannot fit, or None where the server states no context limit."""
    limit = identity.context_tokens
    if limit is None:
        return None
    counts: dict[str, int] = {}
    tokenizer_used = estimated = False
    deadline = Deadline(total)
    with new_session() as session:
        session.headers.update(auth_headers(api_key))
        counter = _Tokenizer(session, identity, api, timeout, deadline)
        for prompt in prompt_set.prompts:
            if prompt.id in counts:
                continue
            counted = counter.count(prompt)
            if counted is None:
                counted, estimated = _estimate(prompt, api), True
            else:
                tokenizer_used = True
            counts[prompt.id] = counted
    too_long = sorted(((pid, n) for pid, n in counts.items() if n + max_tokens > limit), key=lambda p: -p[1])
    counted_by = "mixed" if tokenizer_used and estimated else ("tokenizer" if tokenizer_used else "estimate")
    return ContextFit(limit, max_tokens, len(counts), tuple(too_long), counted_by)


def _estimate(prompt: Prompt, api: str) -> int:
    text = prompt.as_text() if api != "chat" else "".join(m.get("content", "") for m in prompt.as_messages())
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


class _Tokenizer:
    """The server's ``POST /tokenize``, given up at its first failure (404, an error, a shape not understood) or
    once the deadline has passed: the remaining prompts are then estimated."""

    def __init__(self, session: requests.Session, identity: ServerIdentity, api: str, timeout: float,
                 deadline: Deadline) -> None:
        self.session, self.identity, self.api = session, identity, api
        self.timeout, self.deadline = timeout, deadline
        self.working = identity.kind in ("vllm", "llamacpp")

    def count(self, prompt: Prompt) -> int | None:
        if not self.working:
            return None
        try:
            got = fetch(self.session, "POST", self.identity.url + "/tokenize", deadline=self.deadline,
                        per_read_s=self.timeout, max_bytes=16 << 20, json=self._body(prompt),
                        allow_redirects=False)
            tokens = json.loads(got.body)["tokens"] if got.status == 200 else None
        except (requests.RequestException, ReadTimeoutError, DeadlineExceeded, ValueError, KeyError, TypeError):
            tokens = None
        if not isinstance(tokens, list):
            self.working = False
            return None
        return len(tokens)

    def _body(self, prompt: Prompt) -> dict[str, object]:
        if self.identity.kind == "llamacpp":
            # llama.cpp tokenizes text only: a chat prompt's template tokens are not counted (a lower bound).
            # add_special: the BOS token a request's prompt gets (without it the count is one short)
            return {"content": prompt.as_text(), "add_special": True}
        body: dict[str, object] = {"model": self.identity.model or "default"}
        if self.api == "chat":
            body["messages"] = list(prompt.as_messages())
        else:
            body["prompt"] = prompt.as_text()
        return body


def fit_line(role: str, identity: ServerIdentity, api: str, settings: SuiteSettings,
             api_key: str | None = None) -> str | None:
    """The line a load command prints after the server's own line, or None (every prompt fits, no limit stated,
    or a run whose prompts are made at load time: what it adds is not checked)."""
    if settings.input_len or settings.shared_prefix or settings.trace:
        return None
    from specbench.locustfiles.prompts import PromptError, load_prompts

    try:
        prompt_set = load_prompts(settings.prompts)
    except PromptError:  # checked with its own message before preflight
        return None
    fit = check_context_fit(identity, prompt_set, api, settings.max_tokens, api_key=api_key)
    return fit.line(role, identity.kind) if fit is not None else None
