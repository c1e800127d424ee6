"""vLLM's OpenAI-compatible chunk sequences (docs/protocols.md, "vLLM").

Chat: a role chunk, then content deltas, the last of them carrying ``finish_reason`` (no separate finish chunk).
Completions: delta ``text``, the last chunk with ``finish_reason`` and ``stop_reason``. Usage per chunk only with
``include_usage`` *and* ``continuous_usage_stats``; the final usage chunk only with ``include_usage``, carrying
``metrics.speculative_decoding`` when the server runs with per-request spec metrics. An abort ends with a
``finish_reason: "abort"`` chunk; an error with an error chunk (nested, or flat in early releases).
"""

from __future__ import annotations

from typing import Any

from .errors import flat_error
from .output import DONE, Output, sse
from .toolcalls import call_delta, finish_name

__all__ = ["VllmChatWire", "VllmCompletionsWire", "error_event"]


def error_event(out: Output, message: str, status: int = 500) -> bytes:
    """The in-stream error in the emulated release's shape: nested, flat, or an SSE ``error:`` field."""
    shape = out.profile.wire.openai_error
    if shape == "flat":
        return sse(flat_error(status, message, "InternalServerError"))
    inner = {"message": message, "type": "server_error", "param": None, "code": status}
    if shape == "event":
        return sse(inner).replace(b"data: ", b"error: ", 1)
    return sse({"error": inner})


class _VllmWire:
    defer_headers = True
    abort_carries_tokens = False
    object_name = ""

    def __init__(self, out: Output) -> None:
        self.out = out

    def _chunk(self, choice: dict[str, Any] | None, tokens: int | None) -> bytes:
        out = self.out
        body: dict[str, Any] = {"id": out.req.rid, "object": self.object_name, "created": out.created,
                                "model": out.req.model, "choices": [choice] if choice else []}
        if tokens is not None and out.req.include_usage and out.req.continuous_usage:
            body["usage"] = self._usage(tokens)
        return sse(body)

    def _usage(self, tokens: int) -> dict[str, Any]:
        prompt = self.out.req.prompt_tokens
        return {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}

    def _final_usage(self, tokens: int) -> dict[str, Any]:
        """The last usage: with --enable-prompt-tokens-details, ``prompt_tokens_details`` (only when some tokens were
        cached in the releases that test the count for truth: ``Vintage.prompt_details``)."""
        usage, out = self._usage(tokens), self.out
        mode = out.profile.wire.prompt_details
        if mode == "always" or (mode == "nonzero" and out.cached_tokens > 0):
            usage["prompt_tokens_details"] = {"cached_tokens": out.cached_tokens}
        return usage

    def _choice(self, text: str, finish: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def opening(self) -> list[bytes]:
        return []

    def content(self, start: int, stop: int, final: bool) -> list[bytes]:
        out = self.out
        choice = self._choice(out.words.text(start, stop), out.finish if final else None)
        if out.req.token_ids:  # vLLM with return_token_ids: the chunk's new token ids
            choice["token_ids"] = out.words.ids[start:stop]
        return [self._chunk(choice, stop)]

    def closing(self) -> list[bytes]:
        out = self.out
        if not out.req.include_usage:
            return [DONE]
        body: dict[str, Any] = {"id": out.req.rid, "object": self.object_name, "created": out.created,
                                "model": out.req.model, "choices": [], "usage": self._final_usage(out.produced)}
        spec = out.spec_figures()
        if out.profile.wire.request_spec_metrics and spec is not None:
            steps = out.job.drafting_steps  # vLLM counts only the steps that proposed drafts
            body["metrics"] = {"speculative_decoding": {
                "mean_acceptance_length": 1 + spec["spec_num_correct_drafts"] / steps if steps else 1.0,
                "draft_acceptance_rate": spec["spec_accept_rate"],
                "acceptance_histogram": spec["spec_correct_drafts_histogram"],
                "num_spec_steps": steps, "num_accepted_draft_tokens": spec["spec_num_correct_drafts"],
                "num_draft_tokens": spec["spec_num_proposed_drafts"],
                "num_spec_tokens": out.profile.speculative.num_steps if out.profile.speculative else 0}}
        return [sse(body), DONE]

    def aborted(self, start: int, stop: int) -> list[bytes]:
        self.out.finish = "abort"
        return [error_event(self.out, "Request aborted (emulated fault)."), DONE]

    def graceful_abort(self, start: int, stop: int) -> list[bytes]:
        self.out.finish = "abort"
        return [self._chunk(self._choice("", "abort"), None), *self.closing()]

    def body(self) -> dict[str, Any]:
        out = self.out
        choice = self._choice(out.words.text(0, out.produced), out.finish)
        return {"id": out.req.rid, "object": self.object_name.removesuffix(".chunk"), "created": out.created,
                "model": out.req.model, "choices": [choice], "usage": self._final_usage(out.produced)}


class VllmCompletionsWire(_VllmWire):
    object_name = "text_completion"

    def _choice(self, text: str, finish: str | None) -> dict[str, Any]:
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}


class VllmChatWire(_VllmWire):
    object_name = "chat.completion.chunk"

    def opening(self) -> list[bytes]:
        return [self._chunk({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                             "finish_reason": None}, 0)]

    def _choice(self, text: str, finish: str | None) -> dict[str, Any]:
        return {"index": 0, "delta": {"content": text} if text else {}, "logprobs": None,
                "finish_reason": finish_name(finish, self.out.req.tool)}

    def content(self, start: int, stop: int, final: bool) -> list[bytes]:
        """With ``tools``: a tool-call fragment, no content (emulator.toolcalls)."""
        out = self.out
        if out.req.tool is None:
            return super().content(start, stop, final)
        choice = self._choice("", out.finish if final else None)
        choice["delta"] = {"tool_calls": call_delta(out.req.tool, out.req.rid, out.words.text(start, stop),
                                                    first=start == 0, final=final)}
        return [self._chunk(choice, stop)]
