"""What one streamed response has said so far: its chunks and their token counts, its text or ids, how it
finished, its usage and speculation, and the output count resolved from them.

The dialects (``locustfiles.dialects``) write here what each chunk of their API means; the read loop's state
(``locustfiles.streams.StreamState``, this class plus the feeding of raw payloads) hands each chunk to its
API's dialect. Its own module, under both, so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specbench.contract.evidence import token_count_problem
from specbench.contract.redact import clip
from specbench.contract.schema import ChunkTokenSource, SpecFields, TokenSource
from specbench.locustfiles import specfields

ERROR_TEXT_LIMIT = 200  # of a server's error message kept for the record (redacted before the cut)


@dataclass
class TokenCounts:
    """Per-chunk cumulative output tokens as finally resolved, with where they came from."""

    chunk_tokens: list[int]
    chunk_tokens_source: ChunkTokenSource
    output_tokens: int
    output_tokens_source: TokenSource


@dataclass
class StreamFacts:
    """Everything learnt from one response stream; ``api`` is "generate", "chat" or "completions"."""

    api: str
    chunk_times: list[float] = field(default_factory=list)  # arrival times of chunks carrying output
    chunk_cum: list[int | None] = field(default_factory=list)  # server's cumulative count, if it said
    done: bool = False  # saw [DONE] (or llama.cpp native "stop": true)
    finish_reason: str | None = None
    error: str | None = None  # an error payload inside the stream (or an abort's message)
    error_code: int | None = None
    malformed: str | None = None  # a payload that was not JSON
    final_tokens: int | None = None
    final_tokens_source: TokenSource | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    spec: SpecFields | None = None
    server_request_id: str | None = None
    last_cum: int = 0  # the last cumulative output count the server reported
    keep_text: bool = False  # keep the answer's text: a multi-turn conversation resends it, --check-output
    text_parts: list[str] = field(default_factory=list)  # the answer's text as it arrived (with keep_text)
    keep_ids: bool = False  # --check-output: keep the answer's identity, its token ids, else its text
    ids: list[int] = field(default_factory=list)  # the answer's token ids as they arrived (with keep_ids)
    after_done: int = 0  # payloads that came after [DONE]: never read as output

    def add_chunk(self, t: float, cum: int | None) -> None:
        """A chunk that carried output, with the server's cumulative count after it when it said one."""
        self.chunk_times.append(t)
        self.chunk_cum.append(cum)
        if cum is not None:
            self.last_cum = cum

    def add_text(self, delta: str) -> None:
        """New answer text (a delta: OpenAI routes, llama.cpp ``content``, SGLang incremental streaming)."""
        if delta and (self.keep_text or self.keep_ids):
            self.text_parts.append(delta)

    def set_text(self, whole: str) -> None:
        """The whole answer so far (SGLang ``/generate`` by default repeats it cumulatively in every chunk)."""
        if self.keep_text or self.keep_ids:
            self.text_parts = [whole]

    def set_ids(self, whole: list[int]) -> None:
        """Every output id so far (SGLang ``/generate`` ``output_ids``): kept by reference, no copy."""
        self.ids = whole

    def add_ids(self, delta: list[int]) -> None:
        """New output ids (vLLM ``token_ids``, SGLang incremental streaming, llama.cpp ``tokens``)."""
        self.ids.extend(delta)

    @property
    def answer_text(self) -> str:
        """The answer's text exactly as the server streamed it."""
        return "".join(self.text_parts)

    def take_cumulative(self, t: float, cum: int, source: TokenSource) -> None:
        """A cumulative output count (native routes): a new chunk only when the count grew."""
        if cum > self.last_cum:
            self.add_chunk(t, cum)
        self.final_tokens, self.final_tokens_source = cum, source

    def take_generate_finish(self, finish: Any) -> None:
        if isinstance(finish, dict):
            kind = str(finish.get("type") or "unknown")
            self.finish_reason = kind
            if kind == "abort":
                code = finish.get("status_code")
                self.error_code = code if isinstance(code, int) else None
                self.error = clip(str(finish.get("message") or "no message"), ERROR_TEXT_LIMIT)
        else:
            self.finish_reason = str(finish)

    def take_llamacpp_timings(self, timings: dict[str, Any]) -> None:
        predicted = timings.get("predicted_n")
        if isinstance(predicted, int) and self.final_tokens_source not in ("usage", "tokens_predicted"):
            self.final_tokens, self.final_tokens_source = predicted, "timings"
        cache_n = timings.get("cache_n") if isinstance(timings.get("cache_n"), int) else None
        if self.prompt_tokens is None and isinstance(timings.get("prompt_n"), int):
            self.prompt_tokens = timings["prompt_n"] + (cache_n or 0)
            self.cached_tokens = cache_n or 0
        elif self.cached_tokens is None and cache_n is not None:
            # Older builds: usage (prompt_n + cache_n) without prompt_tokens_details, timings in the same chunk.
            self.cached_tokens = cache_n
        spec = specfields.from_llamacpp(timings)
        if spec is not None:
            self.spec = spec

    # -- results ---------------------------------------------------------------------------------------------

    def count_problem(self, max_tokens: int | None) -> str | None:
        """Why the server's output counts cannot be true, or None: a negative count, a cumulative count that
        falls, or more tokens than the request allowed (``max_tokens``; with or without ``ignore_eos`` a server
        makes no more). A figure the suite would average in must be possible first."""
        return token_count_problem([c for c in self.chunk_cum if c is not None], self.final_tokens, max_tokens)

    def resolve_tokens(self) -> TokenCounts:
        """Per-chunk cumulative counts and the output total, preferring what the server reported.

        Order: the server's per-chunk counts; a server total matched one-to-one with chunks; a server total
        spread over the chunks ("interpolated"); counted chunks (last resort, marked "chunks").
        """
        n = len(self.chunk_times)
        total = self.final_tokens
        if n and all(c is not None for c in self.chunk_cum):
            cum = [int(c) for c in self.chunk_cum if c is not None]  # all of them (checked above)
            if total is None or total < cum[-1]:
                return TokenCounts(cum, "server", cum[-1], self.final_tokens_source or "usage")
            if total > cum[-1]:  # a final count above the last per-chunk figure: trust the final count
                cum[-1] = total
            return TokenCounts(cum, "server", total, self.final_tokens_source or "usage")
        if total is not None:
            if n == 0:
                return TokenCounts([], "server", total, self.final_tokens_source or "usage")
            if total == n:
                return TokenCounts(list(range(1, n + 1)), "one_per_chunk", total, self.final_tokens_source or "usage")
            spread = [round(total * (i + 1) / n) for i in range(n)]
            return TokenCounts(spread, "interpolated", total, self.final_tokens_source or "usage")
        return TokenCounts(list(range(1, n + 1)), "chunks", n, "chunks")
