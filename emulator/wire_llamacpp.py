"""llama.cpp ``llama-server``'s OpenAI-compatible chunk sequences (docs/protocols.md, "llama.cpp").

One chunk per token, speculation or not. Chat: a role chunk (``content: null``), content deltas, a finish chunk
with an empty delta, a usage chunk when ``include_usage`` was asked; ``timings`` (``draft_n``,
``draft_n_accepted`` when it drafted) ride on the last chunk. Completions: the final chunk carries
``finish_reason``, ``usage`` (always) and ``timings``. Errors inside a stream: an SSE ``error:`` field in older
builds, ``data: {"error": ...}`` in newer ones; llama.cpp has no abort finish reason, so an abort is an error.
"""

from __future__ import annotations

from typing import Any

from .output import DONE, Output, sse
from .toolcalls import call_delta, finish_name
from .wire_vllm import error_event

__all__ = ["LlamaChatWire", "LlamaCompletionsWire"]


class _LlamaWire:
    defer_headers = False
    abort_carries_tokens = False
    object_name = ""

    def __init__(self, out: Output) -> None:
        self.out = out

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        out = self.out
        return sse({"choices": choices, "created": out.created, "model": out.req.model,
                    "system_fingerprint": "b0000-emulated", "object": self.object_name, "id": out.req.rid, **extra})

    def usage(self) -> dict[str, Any]:
        out = self.out
        prompt, produced = out.req.prompt_tokens, out.produced
        usage: dict[str, Any] = {"completion_tokens": produced, "prompt_tokens": prompt,
                                 "total_tokens": prompt + produced}
        if out.profile.wire.spec_counters:  # newer builds report the cache hit
            usage["prompt_tokens_details"] = {"cached_tokens": out.cached_tokens}
        return usage

    def timings(self) -> dict[str, Any]:
        out = self.out
        timings: dict[str, Any] = {"cache_n": out.cached_tokens, "prompt_n": out.req.prompt_tokens - out.cached_tokens,
                                   "prompt_ms": 1.0, "predicted_n": out.produced, "predicted_ms": 1.0}
        if out.proposed_drafts > 0:
            timings |= {"draft_n": out.proposed_drafts, "draft_n_accepted": out.job.correct_drafts}
        return timings

    def _piece(self, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def opening(self) -> list[bytes]:
        return []

    def content(self, start: int, stop: int, final: bool) -> list[bytes]:
        words = self.out.words
        events = [self._chunk([self._piece(words.text(i, i + 1))]) for i in range(start, stop)]
        return events + (self.final() if final else [])

    def final(self) -> list[bytes]:
        raise NotImplementedError

    def closing(self) -> list[bytes]:
        return [DONE]

    def aborted(self, start: int, stop: int) -> list[bytes]:
        self.out.finish = "abort"
        return [error_event(self.out, "slot was cancelled (emulated fault)"), DONE]

    def graceful_abort(self, start: int, stop: int) -> list[bytes]:
        return self.aborted(start, stop)

    def body(self) -> dict[str, Any]:
        out = self.out
        return {"choices": [{"index": 0, "finish_reason": out.finish, "text": out.words.text(0, out.produced)}],
                "model": out.req.model, "object": self.object_name.removesuffix(".chunk"), "id": out.req.rid,
                "usage": self.usage(), "timings": self.timings()}


class LlamaCompletionsWire(_LlamaWire):
    object_name = "text_completion"

    def _piece(self, text: str) -> dict[str, Any]:
        return {"text": text, "index": 0, "logprobs": None, "finish_reason": None}

    def final(self) -> list[bytes]:
        choice = {"text": "", "index": 0, "logprobs": None, "finish_reason": self.out.finish}
        return [self._chunk([choice], usage=self.usage(), timings=self.timings())]


class LlamaChatWire(_LlamaWire):
    object_name = "chat.completion.chunk"

    def opening(self) -> list[bytes]:
        return [self._chunk([{"index": 0, "finish_reason": None, "delta": {"role": "assistant", "content": None}}])]

    def _piece(self, text: str) -> dict[str, Any]:
        return {"index": 0, "finish_reason": None, "delta": {"content": text}}

    def content(self, start: int, stop: int, final: bool) -> list[bytes]:
        """With ``tools``: one tool-call fragment per token, no content (emulator.toolcalls)."""
        out = self.out
        if out.req.tool is None:
            return super().content(start, stop, final)
        events = [self._chunk([{"index": 0, "finish_reason": None, "delta": {"tool_calls": call_delta(
            out.req.tool, out.req.rid, out.words.text(i, i + 1), first=i == 0, final=final and i == stop - 1)}}])
            for i in range(start, stop)]
        return events + (self.final() if final else [])

    def final(self) -> list[bytes]:
        finish: dict[str, Any] = {"index": 0, "finish_reason": finish_name(self.out.finish, self.out.req.tool),
                                  "delta": {}}
        if not self.out.req.include_usage:
            return [self._chunk([finish], timings=self.timings())]
        return [self._chunk([finish]), self._chunk([], usage=self.usage(), timings=self.timings())]
