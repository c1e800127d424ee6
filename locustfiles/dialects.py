"""One object per API the suite speaks: its path, its request body, and how to read its stream's chunks.

Three dialects (see ``docs/protocols.md``): SGLang's native ``/generate`` (cumulative
``meta_info.completion_tokens``), and the OpenAI routes ``/v1/chat/completions`` and ``/v1/completions`` as
SGLang, vLLM and llama.cpp stream them (delta text, optional continuous or final ``usage``, ``sglext``, vLLM
``metrics``, llama.cpp ``timings``). Every body asks for server-side token counts: ``meta_info`` comes for
free; on the OpenAI routes ``stream_options`` asks for final and per-chunk usage (SGLang honours
``continuous_usage_stats`` alone, vLLM only with ``include_usage``; we send both), and SGLang is asked for its
per-request speculative figures (``return_spec_tokens_details``), which other servers ignore.

Adding an API is adding a subclass here and registering it in ``DIALECTS``; nothing else branches on the name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specbench.contract.schema import APIS, TokenSource
from specbench.locustfiles import specfields
from specbench.locustfiles.prompts import Prompt
from specbench.locustfiles.streamfacts import StreamFacts

#: What preflight sends to check that a route streams.
PROBE_PROMPT = Prompt(id="preflight", category="preflight", text="Say hi.")


@dataclass(frozen=True)
class Sampling:
    """What every request of a run asks for; identical across compared runs."""

    max_tokens: int
    temperature: float
    ignore_eos: bool
    token_ids: bool = False  # --check-output: ask for the output token ids where a server needs asking (vLLM)


class Dialect:
    """An API route: ``body`` builds a streamed request, ``take`` reads one decoded JSON chunk of its answer."""

    name: str = ""
    path: str = ""

    def body(self, prompt: Prompt, sampling: Sampling, *, model: str, server_kind: str, rid: str | None
             ) -> dict[str, Any]:
        raise NotImplementedError

    def probe_body(self, model: str) -> dict[str, Any]:
        """A tiny streamed request (2 tokens) for preflight, built like every real one."""
        return self.body(PROBE_PROMPT, Sampling(2, 0.0, False), model=model, server_kind="", rid=None)

    def take(self, state: StreamFacts, t: float, obj: dict[str, Any]) -> None:
        raise NotImplementedError


class GenerateDialect(Dialect):
    """SGLang's native ``/generate`` (llama.cpp's native ``/completion`` chunks are read the same way)."""

    name = "generate"
    path = "/generate"

    def body(self, prompt: Prompt, sampling: Sampling, *, model: str, server_kind: str, rid: str | None
             ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "text": prompt.as_text(),
            "sampling_params": {"max_new_tokens": sampling.max_tokens, "temperature": sampling.temperature,
                                "ignore_eos": sampling.ignore_eos},
            "stream": True,
        }
        if rid is not None:
            body["rid"] = rid
        return body

    def take(self, state: StreamFacts, t: float, obj: dict[str, Any]) -> None:
        meta = obj.get("meta_info") or {}
        if isinstance(meta.get("id"), str):
            state.server_request_id = meta["id"]
        cum, source = _generate_count(obj, meta)
        _take_generate_text(state, obj, meta)
        if cum is not None:
            state.take_cumulative(t, cum, source)
        elif obj.get("text") or obj.get("content"):
            state.add_chunk(t, None)
        if isinstance(obj.get("timings"), dict):
            state.take_llamacpp_timings(obj["timings"])
        if isinstance(meta.get("prompt_tokens"), int):
            state.prompt_tokens = meta["prompt_tokens"]
        if isinstance(meta.get("cached_tokens"), int):
            state.cached_tokens = meta["cached_tokens"]
        finish = meta.get("finish_reason")
        if finish is not None:
            state.take_generate_finish(finish)
            if specfields.sglang_speculated(meta) or "spec_accept_length" in meta:
                state.spec = specfields.from_sglang(meta, "meta_info", cum)
        if obj.get("stop") is True:  # llama.cpp native /completion ends here, with no [DONE]
            state.done = True


def _take_generate_text(state: StreamFacts, obj: dict[str, Any], meta: dict[str, Any]) -> None:
    """SGLang's ``text`` is cumulative unless the server runs ``--incremental-streaming-output`` (then a delta,
    and ``output_ids`` a delta shorter than the cumulative count); llama.cpp's ``content`` is a delta.
    Skipped unless the text is kept: the read loop of an ordinary run does no text work, and one that checks
    answers none where the chunk carries ids (they are the answer's identity)."""
    if state.keep_ids and _take_generate_ids(state, obj, meta) and not state.keep_text:
        return
    if not (state.keep_text or state.keep_ids):
        return
    text = obj.get("text")
    if isinstance(text, str):
        ids, cum = obj.get("output_ids"), meta.get("completion_tokens")
        if isinstance(ids, list) and isinstance(cum, int):
            cumulative = len(ids) == cum
        else:
            cumulative = text.startswith(state.answer_text)
        if cumulative:
            state.set_text(text)
        else:
            state.add_text(text)
    elif isinstance(obj.get("content"), str):
        state.add_text(obj["content"])


def _take_generate_ids(state: StreamFacts, obj: dict[str, Any], meta: dict[str, Any]) -> bool:
    """``output_ids``: cumulative when as long as the cumulative count (kept by reference), else a delta;
    llama.cpp's native ``tokens`` (with ``return_tokens``) is a delta. True when the chunk carried ids."""
    ids = obj.get("output_ids")
    if isinstance(ids, list):
        cum = meta.get("completion_tokens")
        if not isinstance(cum, int) or len(ids) == cum:
            state.set_ids(ids)
        else:
            state.add_ids(ids)
        return True
    if isinstance(obj.get("tokens"), list):
        state.add_ids(obj["tokens"])
        return True
    return False


def _generate_count(obj: dict[str, Any], meta: dict[str, Any]) -> tuple[int | None, TokenSource]:
    """The cumulative output count a native chunk reports, and where it came from."""
    cum = meta.get("completion_tokens")
    if isinstance(cum, int):
        return cum, "meta_info"
    ids = obj.get("output_ids")
    if isinstance(ids, list):
        return len(ids), "meta_info"
    if isinstance(obj.get("tokens_predicted"), int):  # llama.cpp native /completion
        return obj["tokens_predicted"], "tokens_predicted"
    return None, "meta_info"


class OpenAIDialect(Dialect):
    """The OpenAI-compatible routes; chat and completions differ only in how the prompt is sent."""

    def prompt_fields(self, prompt: Prompt) -> dict[str, Any]:
        raise NotImplementedError

    def body(self, prompt: Prompt, sampling: Sampling, *, model: str, server_kind: str, rid: str | None
             ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            **self.prompt_fields(prompt),
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "ignore_eos": sampling.ignore_eos,
        }
        if sampling.token_ids and server_kind == "vllm":
            body["return_token_ids"] = True  # choices[].token_ids in every chunk where the release knows it
        if server_kind == "sglang":
            body["return_spec_tokens_details"] = True
            if rid is not None:
                body["rid"] = rid
        return body

    def take(self, state: StreamFacts, t: float, obj: dict[str, Any]) -> None:
        cum = _take_usage(state, obj.get("usage"))
        for choice in obj.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                _take_choice(state, t, choice, cum)
        _take_extensions(state, obj)


def _take_usage(state: StreamFacts, usage: Any) -> int | None:
    """A chunk's ``usage`` (final, or per chunk with continuous usage): the cumulative output count, if any."""
    if not isinstance(usage, dict) or not isinstance(usage.get("completion_tokens"), int):
        return None
    cum = int(usage["completion_tokens"])
    state.final_tokens, state.final_tokens_source = cum, "usage"
    if isinstance(usage.get("prompt_tokens"), int):
        state.prompt_tokens = usage["prompt_tokens"]
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        state.cached_tokens = details["cached_tokens"]
    return cum


def _take_choice(state: StreamFacts, t: float, choice: dict[str, Any], cum: int | None) -> None:
    ids = choice.get("token_ids")
    text = _choice_text(choice)
    state.add_text(_answer_delta(choice))
    if state.keep_ids and isinstance(ids, list):
        state.add_ids(ids)
    if text or ids or _tool_calls(choice):
        if cum is None and isinstance(ids, list):
            cum = state.last_cum + len(ids)
        state.add_chunk(t, cum)
    if choice.get("finish_reason") is not None:
        state.finish_reason = str(choice["finish_reason"])
        if state.finish_reason == "abort" and state.error is None:  # SGLang's graceful abort, vLLM's abort
            state.error = "finish_reason abort"


def _take_extensions(state: StreamFacts, obj: dict[str, Any]) -> None:
    """Speculation and counts the servers add beside the OpenAI fields: sglext, vLLM metrics, llama.cpp timings."""
    sglext = obj.get("sglext")
    if isinstance(sglext, dict) and isinstance(sglext.get("spec_tokens_details"), dict | list):
        details = sglext["spec_tokens_details"]
        if isinstance(details, list):
            details = details[0] if details else {}
        # A server that does not speculate may still answer, with zeros: that is "no speculation". One that does
        # zero-fills what it did not populate: those figures are not reported (specfields.sglext_reported).
        if isinstance(details, dict) and specfields.sglang_speculated(details):
            state.spec = specfields.from_sglang(specfields.sglext_reported(details), "sglext", state.final_tokens)
    metrics = obj.get("metrics")
    if isinstance(metrics, dict) and isinstance(metrics.get("speculative_decoding"), dict):
        state.spec = specfields.from_vllm(metrics["speculative_decoding"], state.final_tokens)
    if isinstance(obj.get("timings"), dict):
        state.take_llamacpp_timings(obj["timings"])


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


def _tool_calls(choice: dict[str, Any]) -> bool:
    """A chat delta that carries tool-call fragments (``delta.tool_calls``): output tokens, though no text."""
    delta = choice.get("delta")
    return isinstance(delta, dict) and bool(delta.get("tool_calls"))


def _answer_delta(choice: dict[str, Any]) -> str:
    """The answer text a choice adds (completions ``text``, chat ``delta.content``; reasoning is not answer)."""
    text = choice.get("text")
    if isinstance(text, str):
        return text
    delta = choice.get("delta")
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else ""


class ChatDialect(OpenAIDialect):
    name = "chat"
    path = "/v1/chat/completions"

    def prompt_fields(self, prompt: Prompt) -> dict[str, Any]:
        if prompt.tools:  # the prompt file's tools: the answer may stream as delta.tool_calls
            return {"messages": prompt.as_messages(), "tools": list(prompt.tools)}
        return {"messages": prompt.as_messages()}


class CompletionsDialect(OpenAIDialect):
    name = "completions"
    path = "/v1/completions"

    def prompt_fields(self, prompt: Prompt) -> dict[str, Any]:
        return {"prompt": prompt.as_text()}


DIALECTS: dict[str, Dialect] = {d.name: d for d in (GenerateDialect(), ChatDialect(), CompletionsDialect())}
assert tuple(DIALECTS) == APIS, "every API of the record contract needs a dialect"


def dialect(api: str) -> Dialect:
    """The dialect of ``api`` ("generate", "chat" or "completions")."""
    try:
        return DIALECTS[api]
    except KeyError:
        raise ValueError(f"unknown api {api!r}; expected one of {', '.join(DIALECTS)}") from None
