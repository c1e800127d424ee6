"""``POST /tokenize`` as vLLM and llama.cpp answer it: the suite counts a prompt set's tokens with the server's own
tokenizer before any load (does every prompt fit the context with ``--max-tokens``?).

vLLM (``vllm/entrypoints/openai`` tokenization route; its ``TokenizeResponse``): a body with ``prompt`` (a string)
or ``messages`` (rendered by the chat template, ``add_generation_prompt`` true by default) answers
``{"count", "max_model_len", "tokens"}``. llama.cpp's server: a body with ``content`` answers ``{"tokens"}``. The
emulated tokenizer is the one generation uses (ceil(characters / chars_per_token)), so a count here is exactly the
``prompt_tokens`` a request with that prompt reports.
"""

from __future__ import annotations

from typing import Any

from .errors import ApiError
from .httpserver import HttpRequest, Responder
from .parsing import parse_json_body
from .profile import Profile
from .session import send_json
from .textmodel import prompt_tokens

_FIRST_ID = 1000


def _count(data: dict[str, Any], profile: Profile) -> int:
    if profile.wire.server == "llamacpp":
        content = data.get("content")
        if not isinstance(content, str):
            raise ApiError.bad_request("\"content\" must be provided")
        return prompt_tokens(content, profile.chars_per_token) if content else 0
    messages, prompt = data.get("messages"), data.get("prompt")
    if isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages):
        return prompt_tokens(messages, profile.chars_per_token)
    if isinstance(prompt, str):
        return prompt_tokens(prompt, profile.chars_per_token) if prompt else 0
    raise ApiError.bad_request("Either 'prompt' (a string) or 'messages' (a list of messages) must be given")


def tokenize(emu: Any, req: HttpRequest, resp: Responder) -> None:
    profile: Profile = emu.profile
    try:
        count = _count(parse_json_body(req.body), profile)
    except ApiError as exc:
        send_json(resp, exc.status, exc.body)
        return
    tokens = list(range(_FIRST_ID, _FIRST_ID + count))
    if profile.wire.server == "llamacpp":
        send_json(resp, 200, {"tokens": tokens})
    else:
        send_json(resp, 200, {"count": count, "max_model_len": profile.context_length, "tokens": tokens})
