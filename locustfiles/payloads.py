"""Request bodies for each API, asking every server for the counts the suite needs.

Each body asks for streaming with server-side token counts: SGLang's native ``meta_info`` comes for free;
on the OpenAI routes ``stream_options`` asks for final and per-chunk usage (SGLang honours
``continuous_usage_stats`` alone, vLLM only with ``include_usage``; we send both), and SGLang is asked for
its per-request speculative figures (``return_spec_tokens_details``), which other servers would ignore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from locustfiles.prompts import Prompt

API_PATHS: dict[str, str] = {
    "generate": "/generate",
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
}


@dataclass(frozen=True)
class Sampling:
    """What every request of a run asks for; identical across compared runs."""

    max_tokens: int
    temperature: float
    ignore_eos: bool


def build_body(
    api: str, prompt: Prompt, sampling: Sampling, *, model: str, server_kind: str, rid: str
) -> dict[str, Any]:
    """The JSON body for one streamed request of ``api`` ("generate", "chat" or "completions")."""
    if api == "generate":
        return {
            "text": prompt.as_text(),
            "sampling_params": {
                "max_new_tokens": sampling.max_tokens,
                "temperature": sampling.temperature,
                "ignore_eos": sampling.ignore_eos,
            },
            "stream": True,
            "rid": rid,
        }
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "ignore_eos": sampling.ignore_eos,
    }
    if api == "chat":
        body["messages"] = prompt.as_messages()
    elif api == "completions":
        body["prompt"] = prompt.as_text()
    else:
        raise ValueError(f"unknown api {api!r}; expected one of {', '.join(API_PATHS)}")
    if server_kind == "sglang":
        body["return_spec_tokens_details"] = True
        body["rid"] = rid
    return body
