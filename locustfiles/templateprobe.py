"""The chat template's share of a chat request's prompt tokens, measured once at the start of a run.

On ``/v1/chat/completions`` the server wraps each message in its chat template before counting prompt tokens, so
a set's input lengths (SPEED-Bench's throughput-8k, ...) arrive longer than the text: the template's tokens are
part of every request. They are measured, not guessed: the same short text is sent once as a chat message and
once as a plain completion, one output token each, and the difference of the two ``usage.prompt_tokens`` the
server reports is the template's tokens per (single-message) request. Only for the sets named by a target input
length (SPEED-Bench's throughput splits), where the difference matters; other runs send nothing but the ladder.
Recorded in meta.json as the server's ``chat_template_tokens``; None where either answer lacks a usable count (a
server's figures are evidence: a count that is not a whole number, or a negative difference, is not taken).
"""

from __future__ import annotations

import json
from typing import Any

import requests
from urllib3.exceptions import ReadTimeoutError

from specbench.locustfiles.auth import auth_headers
from specbench.locustfiles.deadline import Deadline, DeadlineExceeded, fetch
from specbench.locustfiles.httpsession import new_session

PROBE_TEXT = "Reply with one word: ready."
LENGTH_SPLITS = ("speed-bench:throughput-",)  # the sets named by their target input length: probed in chat runs
MAX_TEMPLATE_TOKENS = 10_000  # more than any chat template; a larger difference is not a template's


def chat_template_tokens(base_url: str, model: str, *, api_key: str | None = None,
                         timeout: float = 10.0) -> int | None:
    """chat prompt tokens - completion prompt tokens for the same text; None when not measurable."""
    base = base_url.rstrip("/")
    common = {"model": model, "max_tokens": 1, "temperature": 0.0, "stream": False}
    bodies = (("/v1/chat/completions", {**common, "messages": [{"role": "user", "content": PROBE_TEXT}]}),
              ("/v1/completions", {**common, "prompt": PROBE_TEXT}))
    counts = []
    with new_session() as session:
        deadline = Deadline(3 * timeout)
        for path, body in bodies:
            counts.append(_prompt_tokens(session, f"{base}{path}", body, api_key, timeout, deadline))
    chat, plain = counts
    if chat is None or plain is None or not 0 <= chat - plain <= MAX_TEMPLATE_TOKENS:
        return None
    return chat - plain


def _prompt_tokens(session: requests.Session, url: str, body: dict[str, Any], api_key: str | None,
                   timeout: float, deadline: Deadline) -> int | None:
    try:
        got = fetch(session, "POST", url, deadline=deadline, per_read_s=timeout,
                    headers={**auth_headers(api_key), "content-type": "application/json"}, data=json.dumps(body))
    except (requests.RequestException, ReadTimeoutError, DeadlineExceeded):
        return None
    if got.status != 200:
        return None
    try:
        usage = json.loads(got.text).get("usage")
    except (ValueError, AttributeError):
        return None
    count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None
