"""SGLang's OpenAI-compatible chunk sequences for ``/v1/completions`` and ``/v1/chat/completions``.

Completions: delta ``text``, the last content chunk carries ``finish_reason``; chunks keep null keys.
Chat: a role-only chunk first, content deltas, then a separate empty-delta chunk with ``finish_reason``;
``usage`` is omitted when null. Both then send the ``sglext.spec_tokens_details`` chunk (if asked),
the usage chunk (if ``include_usage``) and ``[DONE]``. ``continuous_usage_stats`` puts cumulative usage
on every content chunk, with or without ``include_usage``. Headers go out with the first chunk, since
SGLang pulls the first result before answering.
"""

from __future__ import annotations

from typing import Any

from .errors import openai_stream_error
from .output import DONE, Output, sse
from .toolcalls import call_delta, finish_name

__all__ = ["ChatWire", "CompletionsWire"]


def _full_usage(out: Output, completion_tokens: int) -> dict[str, Any]:
    prompt = out.req.prompt_tokens
    # SGLang fills prompt_tokens_details only with --enable-cache-report, and only when some tokens were cached
    # (usage_processor.py; Vintage.prompt_details "nonzero"); the emulator's older vintages do whenever its prefix
    # cache is on, so cache hits are visible on the OpenAI routes too.
    details = {"cached_tokens": out.cached_tokens} if out.profile.prefix_cache else None
    if out.profile.wire.prompt_details == "nonzero":
        details = {"cached_tokens": out.cached_tokens} if out.cached_tokens > 0 else None
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion_tokens,
            "completion_tokens": completion_tokens, "prompt_tokens_details": details, "reasoning_tokens": 0,
            "completion_tokens_details": None}


class _OpenAIWire:
    defer_headers = True
    abort_carries_tokens = False
    object_name = ""

    def __init__(self, out: Output) -> None:
        self.out = out

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        out = self.out
        return {"id": out.req.rid, "object": self.object_name, "created": out.created, "model": out.req.model,
                "choices": choices}

    def _final_usage(self) -> dict[str, Any]:
        return _full_usage(self.out, self.out.produced)

    def closing(self) -> list[bytes]:
        out, events = self.out, []
        if self._spec_details():
            events.append(sse({**self._envelope([]), "usage": None,
                               "sglext": {"spec_tokens_details": out.spec_tokens_details()}}))
        if out.req.include_usage:
            events.append(sse({**self._envelope([]), "usage": self._final_usage()}))
        events.append(DONE)
        return events

    def _spec_details(self) -> bool:
        """``sglext`` is sent when asked for, by a release that knows it, and only while speculating."""
        out = self.out
        return out.req.spec_details and out.profile.wire.sglext and out.profile.speculative is not None

    def aborted(self, start: int, stop: int) -> list[bytes]:
        """An error after the stream started: the nested error object, then [DONE]."""
        self.out.finish = "abort"
        return [sse(openai_stream_error("Request aborted (emulated fault).")), DONE]

    def graceful_abort(self, start: int, stop: int) -> list[bytes]:
        """SGLang's graceful abort: a finish_reason "abort" chunk and no error, then usage and [DONE]."""
        self.out.finish = "abort"
        return [*self.finish_chunk("abort"), *self.closing()]

    def finish_chunk(self, finish: str) -> list[bytes]:
        raise NotImplementedError

    def _body(self, choice: dict[str, Any]) -> dict[str, Any]:
        out = self.out
        body = {**self._envelope([choice]), "usage": _full_usage(out, out.produced)}
        if self._spec_details():
            body["sglext"] = {"spec_tokens_details": out.spec_tokens_details()}
        return body


class CompletionsWire(_OpenAIWire):
    object_name = "text_completion"

    def opening(self) -> list[bytes]:
        return []

    def content(self, start: int, stop: int, final: bool) -> list[bytes]:
        out = self.out
        choice = {"index": 0, "text": out.words.text(start, stop), "logprobs": None,
                  "finish_reason": out.finish if final else None, "matched_stop": out.matched_stop if final else None}
        usage = _full_usage(out, stop) if out.req.continuous_usage else None
        return [sse({**self._envelope([choice]), "usage": usage})]

    def finish_chunk(self, finish: str) -> list[bytes]:
        choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish, "matched_stop": None}
        return [sse({**self._envelope([choice]), "usage": None})]

    def _final_usage(self) -> dict[str, Any]:
        prompt, produced = self.out.req.prompt_tokens, self.out.produced
        return {"prompt_tokens": prompt, "total_tokens": prompt + produced, "completion_tokens": produced,
                "reasoning_tokens": 0}

    def body(self) -> dict[str, Any]:
        out = self.out
        return self._body({"index": 0, "text": out.words.text(0, out.produced), "logprobs": None,
                           "finish_reason": out.finish, "matched_stop": out.matched_stop})


class ChatWire(_OpenAIWire):
    object_name = "chat.completion.chunk"

    def opening(self) -> list[bytes]:
        delta = {"reasoning_content": None, "role": "assistant", "content": ""}
        return [sse(self._envelope([self._choice(delta, None)]))]

    def _choice(self, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        matched = self.out.matched_stop if finish else None
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_name(finish, self.out.req.tool),
                "matched_stop": matched}

    def _delta(self, start: int, stop: int, final: bool) -> dict[str, Any]:
        """Content, or with ``tools`` a tool-call fragment and no content (emulator.toolcalls)."""
        out = self.out
        text = out.words.text(start, stop)
        if out.req.tool is None:
            return {"reasoning_content": None, "content": text}
        return {"reasoning_content": None, "content": None,
                "tool_calls": call_delta(out.req.tool, out.req.rid, text, first=start == 0, final=final)}

    def content(self, start: int, stop: int, final: bool) -> list[bytes]:
        out = self.out
        chunk = self._envelope([self._choice(self._delta(start, stop, final), None)])
        if out.req.continuous_usage:
            chunk["usage"] = _full_usage(out, stop)
        events = [sse(chunk)]
        if final:
            events.append(sse(self._envelope([self._choice({"reasoning_content": None}, out.finish)])))
        return events

    def finish_chunk(self, finish: str) -> list[bytes]:
        return [sse(self._envelope([self._choice({"reasoning_content": None}, finish)]))]

    def body(self) -> dict[str, Any]:
        out = self.out
        message = {"role": "assistant", "content": out.words.text(0, out.produced), "reasoning_content": None,
                   "tool_calls": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": out.finish,
                  "matched_stop": out.matched_stop}
        if out.req.return_meta_info:
            choice["meta_info"] = out.meta_info(out.produced, final=True, first=False)
        body = self._body(choice)
        body["object"] = "chat.completion"
        return body
