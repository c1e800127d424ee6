"""Request bodies of the three generation routes, checked like SGLang and reduced to one ``GenRequest``.

Unsupported but valid SGLang features (batches, ``n > 1``, stop strings, logprobs) are either refused
with a 400 naming them or ignored when they cannot change the emulated output (sampling knobs).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, generate_contract_error, generate_value_error
from .profile import Profile
from .textmodel import estimate_prompt_tokens, prompt_key, prompt_tokens
from .toolcalls import chosen_tool

__all__ = ["GenRequest", "parse_chat", "parse_completions", "parse_generate", "parse_json_body"]

GENERATE_DEFAULT_MAX_NEW_TOKENS = 128
COMPLETIONS_DEFAULT_MAX_TOKENS = 16


@dataclass
class GenRequest:
    """What the emulator needs from any generation request."""

    route: str
    rid: str
    text: str
    prompt_tokens: int
    max_new_tokens: int
    ignore_eos: bool
    stream: bool
    model: str
    include_usage: bool = False
    continuous_usage: bool = False
    spec_details: bool = False
    return_meta_info: bool = False
    token_ids: bool = False  # vLLM's return_token_ids: each choice carries its new tokens' ids
    priority: int | None = None  # SGLang's request priority (--enable-priority-scheduling); None: not given
    tool: str | None = None  # chat with ``tools``: the function the answer calls (emulator.toolcalls)


def parse_json_body(body: bytes) -> dict[str, Any]:
    """Invalid JSON or a non-object body is a 400 in the pydantic shape, as on SGLang."""
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        raise ApiError.bad_request("Invalid JSON body") from None
    if not isinstance(data, dict):
        raise ApiError.bad_request("Request body must be a JSON object")
    return data


def _field(data: Mapping[str, Any], key: str, kinds: type | tuple[type, ...], default: Any) -> Any:
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise ApiError.bad_request(f"Field '{key}' has the wrong type")
    if not isinstance(value, kinds):
        raise ApiError.bad_request(f"Field '{key}' has the wrong type")
    return value


def _rid(data: Mapping[str, Any]) -> str:
    rid = _field(data, "rid", str, None)
    return rid if rid else uuid.uuid4().hex


def _check_context(profile: Profile, prompt_tokens: int, max_tokens: int, *, generate: bool) -> None:
    total = prompt_tokens + max_tokens
    if prompt_tokens < profile.context_length and total <= profile.context_length:
        return
    if prompt_tokens >= profile.context_length:
        message = (f"The input ({prompt_tokens} tokens) is longer than the model's context length "
                   f"({profile.context_length} tokens).")
    else:
        message = (f"Requested token count exceeds the model's maximum context length of "
                   f"{profile.context_length} tokens. You requested a total of {total} tokens: {prompt_tokens} "
                   f"tokens from the input messages and {max_tokens} tokens for the completion. Please reduce "
                   f"the number of tokens in the input messages or the completion to fit within the limit.")
    if generate:
        raise ApiError(400, generate_value_error(message))
    raise ApiError.bad_request(message, "BadRequest")


def _positive(value: int, key: str) -> int:
    if value < 1:
        raise ApiError.bad_request(f"Field '{key}' must be at least 1 in the emulator")
    return value


def _ids_text(ids: list[Any]) -> str:
    if not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ApiError.bad_request("token id lists must be non-empty lists of integers")
    return " ".join(map(str, ids))


def parse_generate(data: dict[str, Any], profile: Profile) -> GenRequest:
    """Native ``/generate``: ``text`` or ``input_ids``, ``sampling_params.max_new_tokens`` default 128."""
    text, input_ids = data.get("text"), data.get("input_ids")
    if (text is None) == (input_ids is None):
        raise ApiError(400, generate_contract_error("Either text or input_ids should be provided."))
    if isinstance(text, list) or (isinstance(input_ids, list) and input_ids and isinstance(input_ids[0], list)):
        raise ApiError(400, generate_contract_error("Batch requests are not supported by the emulator."))
    if text is not None and not isinstance(text, str):
        raise ApiError(400, generate_contract_error("text must be a string."))
    if input_ids is not None and not isinstance(input_ids, list):
        raise ApiError(400, generate_contract_error("input_ids must be a list of integers."))
    params = _field(data, "sampling_params", dict, {})
    max_new = _positive(_field(params, "max_new_tokens", int, GENERATE_DEFAULT_MAX_NEW_TOKENS), "max_new_tokens")
    if _field(params, "n", int, 1) != 1:
        raise ApiError(400, generate_contract_error("n > 1 is not supported by the emulator."))
    if text is not None:
        prompt, prompt_tokens = text, estimate_prompt_tokens(text, profile.chars_per_token)
    else:
        assert input_ids is not None  # exactly one of text and input_ids, checked above
        prompt, prompt_tokens = _ids_text(input_ids), len(input_ids)
    _check_context(profile, prompt_tokens, max_new, generate=True)
    return GenRequest(
        route="/generate", rid=_rid(data), text=prompt, prompt_tokens=prompt_tokens, max_new_tokens=max_new,
        ignore_eos=bool(_field(params, "ignore_eos", bool, False)), stream=bool(_field(data, "stream", bool, False)),
        model=profile.served_model_name, priority=_field(data, "priority", int, None),
    )


def _openai_common(data: dict[str, Any], profile: Profile) -> dict[str, Any]:
    if _field(data, "n", int, 1) != 1:
        raise ApiError.bad_request("n > 1 is not supported by the emulator", "BadRequest")
    options = _field(data, "stream_options", dict, {})
    return {
        "rid": _rid(data),
        "ignore_eos": bool(_field(data, "ignore_eos", bool, False)),
        "stream": bool(_field(data, "stream", bool, False)),
        "model": _field(data, "model", str, profile.served_model_name),
        "include_usage": bool(_field(options, "include_usage", bool, False)),
        "continuous_usage": bool(_field(options, "continuous_usage_stats", bool, False)),
        "spec_details": bool(_field(data, "return_spec_tokens_details", bool, False)),
        "token_ids": bool(_field(data, "return_token_ids", bool, False)),
        "priority": _field(data, "priority", int, None),
    }


def parse_completions(data: dict[str, Any], profile: Profile) -> GenRequest:
    """``/v1/completions``: one prompt (string or token ids); ``max_tokens`` defaults to 16."""
    prompt = data.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        text, prompt_tokens = prompt, estimate_prompt_tokens(prompt, profile.chars_per_token)
    elif isinstance(prompt, list):
        text, prompt_tokens = _ids_text(prompt), len(prompt)
    elif prompt is None:
        raise ApiError.bad_request("Field 'prompt' is required")
    else:
        raise ApiError.bad_request("Field 'prompt' must be a string, a list of token ids or a one-item list")
    common = _openai_common(data, profile)
    max_tokens = _positive(_field(data, "max_tokens", int, COMPLETIONS_DEFAULT_MAX_TOKENS), "max_tokens")
    _check_context(profile, prompt_tokens, max_tokens, generate=False)
    return GenRequest(route="/v1/completions", text=text, prompt_tokens=prompt_tokens, max_new_tokens=max_tokens,
                      **common)


def parse_chat(data: dict[str, Any], profile: Profile) -> GenRequest:
    """``/v1/chat/completions``: messages rendered by the emulated template; no max_tokens = up to context."""
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError.bad_request("Field 'messages' must be a non-empty list")
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError.bad_request("Each message must be an object with a 'role'")
    text = prompt_key(messages)
    num_prompt_tokens = prompt_tokens(messages, profile.chars_per_token)
    common = _openai_common(data, profile)
    requested = _field(data, "max_completion_tokens", int, None)
    requested = _field(data, "max_tokens", int, requested)
    if requested is None:
        max_tokens = max(1, profile.context_length - num_prompt_tokens)
    else:
        max_tokens = _positive(requested, "max_tokens")
    _check_context(profile, num_prompt_tokens, max_tokens, generate=False)
    return GenRequest(
        route="/v1/chat/completions", text=text, prompt_tokens=num_prompt_tokens, max_new_tokens=max_tokens,
        return_meta_info=bool(_field(data, "return_meta_info", bool, False)), tool=chosen_tool(data), **common,
    )
