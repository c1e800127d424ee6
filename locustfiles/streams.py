"""What one streamed response said: tokens per chunk, finish, usage, speculation and errors.

One ``StreamState`` per request is fed decoded SSE payloads with their arrival times. It understands the
three wire dialects the suite meets (see ``shared/reference/protocols.md``): SGLang's native ``/generate``
(cumulative ``meta_info.completion_tokens``), and the OpenAI routes as SGLang, vLLM and llama.cpp stream them
(delta text, optional continuous or final ``usage``, ``sglext``, vLLM ``metrics``, llama.cpp ``timings``).
Output tokens always come from what the server reports; chunk counting is the marked last resort.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from analysis.schema import SpecFields
from locustfiles.sse import DONE


@dataclass
class TokenCounts:
    """Per-chunk cumulative output tokens as finally resolved, with where they came from."""

    chunk_tokens: list[int]
    chunk_tokens_source: str
    output_tokens: int
    output_tokens_source: str


@dataclass
class StreamState:
    """Everything learnt from one response stream; ``api`` is "generate", "chat" or "completions"."""

    api: str
    chunk_times: list[float] = field(default_factory=list)  # arrival times of chunks carrying output
    chunk_cum: list[int | None] = field(default_factory=list)  # server's cumulative count, if it said
    done: bool = False  # saw [DONE] (or llama.cpp native "stop": true)
    finish_reason: str | None = None
    error: str | None = None  # an error payload inside the stream
    error_code: int | None = None
    malformed: str | None = None  # a payload that was not JSON
    final_tokens: int | None = None
    final_tokens_source: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    spec: SpecFields | None = None
    server_request_id: str | None = None
    _last_cum: int = 0

    # -- feeding -------------------------------------------------------------------------------------------

    def feed(self, t: float, payload: bytes) -> None:
        """Take one SSE data payload that arrived at time ``t``."""
        if payload == DONE:
            self.done = True
            return
        try:
            obj = json.loads(payload)
        except ValueError:
            if self.malformed is None:
                self.malformed = payload[:120].decode("utf-8", "replace")
            return
        if not isinstance(obj, dict):
            if self.malformed is None:
                self.malformed = payload[:120].decode("utf-8", "replace")
            return
        err = obj.get("error")
        if err is not None:
            self._take_error(err)
            return
        if self.server_request_id is None and isinstance(obj.get("id"), str):
            self.server_request_id = obj["id"]
        if self.api == "generate":
            self._feed_generate(t, obj)
        else:
            self._feed_openai(t, obj)

    def _take_error(self, err: Any) -> None:
        if isinstance(err, dict):
            message = str(err.get("message") or err)
            code = err.get("code")
            self.error_code = code if isinstance(code, int) else None
        else:
            message = str(err)
        if self.error is None:
            self.error = message[:200]

    def _add_chunk(self, t: float, cum: int | None) -> None:
        self.chunk_times.append(t)
        self.chunk_cum.append(cum)

    def _feed_generate(self, t: float, obj: dict[str, Any]) -> None:
        meta = obj.get("meta_info") or {}
        if isinstance(meta.get("id"), str):
            self.server_request_id = meta["id"]
        cum = meta.get("completion_tokens")
        source = "meta_info"
        if not isinstance(cum, int):
            ids = obj.get("output_ids")
            cum = len(ids) if isinstance(ids, list) else None
        if cum is None and isinstance(obj.get("tokens_predicted"), int):  # llama.cpp native /completion
            cum, source = obj["tokens_predicted"], "tokens_predicted"
        if cum is not None:
            if cum > self._last_cum:
                self._add_chunk(t, cum)
                self._last_cum = cum
            self.final_tokens, self.final_tokens_source = cum, source
        elif obj.get("text") or obj.get("content"):
            self._add_chunk(t, None)
        if isinstance(obj.get("timings"), dict):
            self._take_llamacpp_timings(obj["timings"])
        if isinstance(meta.get("prompt_tokens"), int):
            self.prompt_tokens = meta["prompt_tokens"]
        if isinstance(meta.get("cached_tokens"), int):
            self.cached_tokens = meta["cached_tokens"]
        finish = meta.get("finish_reason")
        if finish is not None:
            self._take_generate_finish(finish)
            if "spec_verify_ct" in meta or "spec_accept_length" in meta:
                self.spec = _spec_from_sglang(meta, "meta_info")
        if obj.get("stop") is True:  # llama.cpp native /completion ends here, with no [DONE]
            self.done = True

    def _take_generate_finish(self, finish: Any) -> None:
        if isinstance(finish, dict):
            kind = str(finish.get("type") or "unknown")
            self.finish_reason = kind
            if kind == "abort":
                code = finish.get("status_code")
                self.error_code = code if isinstance(code, int) else None
                self.error = f"server aborted the request: {finish.get('message') or 'no message'}"[:200]
        else:
            self.finish_reason = str(finish)

    def _feed_openai(self, t: float, obj: dict[str, Any]) -> None:
        usage = obj.get("usage")
        cum: int | None = None
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            cum = usage["completion_tokens"]
            self.final_tokens, self.final_tokens_source = cum, "usage"
            if isinstance(usage.get("prompt_tokens"), int):
                self.prompt_tokens = usage["prompt_tokens"]
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                self.cached_tokens = details["cached_tokens"]
        for choice in obj.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            new_text = _choice_text(choice)
            ids = choice.get("token_ids")
            if new_text or ids:
                chunk_cum = cum
                if chunk_cum is None and isinstance(ids, list):
                    chunk_cum = self._last_cum + len(ids)
                self._add_chunk(t, chunk_cum)
                if chunk_cum is not None:
                    self._last_cum = chunk_cum
            if choice.get("finish_reason") is not None:
                self.finish_reason = str(choice["finish_reason"])
        sglext = obj.get("sglext")
        if isinstance(sglext, dict) and isinstance(sglext.get("spec_tokens_details"), dict | list):
            details = sglext["spec_tokens_details"]
            if isinstance(details, list):
                details = details[0] if details else {}
            # A server that does not speculate still answers, with zeros: that is "no speculation".
            if details.get("spec_verify_ct") or details.get("spec_num_proposed_drafts"):
                self.spec = _spec_from_sglang(details, "sglext")
        metrics = obj.get("metrics")
        if isinstance(metrics, dict) and isinstance(metrics.get("speculative_decoding"), dict):
            self.spec = _spec_from_vllm(metrics["speculative_decoding"])
        timings = obj.get("timings")
        if isinstance(timings, dict):
            self._take_llamacpp_timings(timings)

    def _take_llamacpp_timings(self, timings: dict[str, Any]) -> None:
        predicted = timings.get("predicted_n")
        if isinstance(predicted, int) and self.final_tokens_source not in ("usage", "tokens_predicted"):
            self.final_tokens, self.final_tokens_source = predicted, "timings"
        if self.prompt_tokens is None and isinstance(timings.get("prompt_n"), int):
            cache_n = timings.get("cache_n") if isinstance(timings.get("cache_n"), int) else 0
            self.prompt_tokens = timings["prompt_n"] + cache_n
            self.cached_tokens = cache_n
        draft_n = timings.get("draft_n")
        if isinstance(draft_n, int) and draft_n > 0:
            accepted = timings.get("draft_n_accepted")
            accepted = accepted if isinstance(accepted, int) else 0
            self.spec = SpecFields(
                verify_ct=None, accepted_drafts=accepted, proposed_drafts=draft_n, accept_length=None,
                accept_rate=accepted / draft_n, source="timings",
            )

    # -- results ---------------------------------------------------------------------------------------------

    @property
    def has_output(self) -> bool:
        return bool(self.chunk_times)

    def resolve_tokens(self) -> TokenCounts:
        """Per-chunk cumulative counts and the output total, preferring what the server reported.

        Order: the server's per-chunk counts; a server total matched one-to-one with chunks; a server total
        spread over the chunks ("interpolated"); counted chunks (last resort, marked "chunks").
        """
        n = len(self.chunk_times)
        total = self.final_tokens
        if n and all(c is not None for c in self.chunk_cum):
            cum = [int(c) for c in self.chunk_cum]  # type: ignore[arg-type]
            if total is None or total < cum[-1]:
                return TokenCounts(cum, "server", cum[-1], self.final_tokens_source or "usage")
            if total > cum[-1]:  # a final count above the last per-chunk figure: trust the final count
                cum[-1] = total
            return TokenCounts(cum, "server", total, self.final_tokens_source or "usage")
        if total is not None:
            if n == 0:
                return TokenCounts([], "server", total, self.final_tokens_source or "usage")
            if total == n:
                return TokenCounts(list(range(1, n + 1)), "one_per_chunk", total, self.final_tokens_source or "")
            spread = [round(total * (i + 1) / n) for i in range(n)]
            return TokenCounts(spread, "interpolated", total, self.final_tokens_source or "")
        return TokenCounts(list(range(1, n + 1)), "chunks", n, "chunks")


def _choice_text(choice: dict[str, Any]) -> str:
    """New output text in a choice: completions ``text`` or chat ``delta`` content and reasoning."""
    text = choice.get("text")
    if isinstance(text, str) and text:
        return text
    delta = choice.get("delta")
    if isinstance(delta, dict):
        parts = [delta.get("content"), delta.get("reasoning_content"), delta.get("reasoning")]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) else None


# Normalised speculative field -> the server's key, per source.
_SPEC_KEYS: dict[str, dict[str, str]] = {
    "sglang": {"verify_ct": "spec_verify_ct", "accepted_drafts": "spec_num_correct_drafts",
               "proposed_drafts": "spec_num_proposed_drafts", "accept_length": "spec_accept_length",
               "accept_rate": "spec_accept_rate"},
    "vllm": {"verify_ct": "num_spec_steps", "accepted_drafts": "num_accepted_draft_tokens",
             "proposed_drafts": "num_draft_tokens", "accept_length": "mean_acceptance_length",
             "accept_rate": "draft_acceptance_rate"},
}
_SPEC_COUNTS = ("verify_ct", "accepted_drafts", "proposed_drafts")


def _spec_fields(src: dict[str, Any], dialect: str, source: str) -> SpecFields:
    fields: dict[str, Any] = {name: (_int if name in _SPEC_COUNTS else _num)(src.get(key))
                              for name, key in _SPEC_KEYS[dialect].items()}
    return SpecFields(**fields, source=source)


def _spec_from_sglang(src: dict[str, Any], source: str) -> SpecFields:
    return _spec_fields(src, "sglang", source)


def _spec_from_vllm(src: dict[str, Any]) -> SpecFields:
    return _spec_fields(src, "vllm", "vllm_metrics")
