"""Wire-format vintages: which server, and which release of it, the emulator imitates on the wire.

The cost model is the same for every vintage; what changes is what a client sees: field names, chunk shapes,
which chunks carry usage, how an abort and an error look inside a stream, which endpoints answer, and the
metric names and label sets of ``/metrics``. The facts behind each entry are in docs/protocols.md; the table
in config/emulator/README.md says which release each name stands for.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_VINTAGE", "VINTAGES", "Vintage"]


@dataclass(frozen=True)
class Vintage:
    """One server release's wire format. Flags not used by a server's wires are left at their defaults."""

    name: str
    server: str  # "sglang", "vllm" or "llamacpp"
    release: str  # the release it stands for, in words
    # SGLang
    spec_names: int = 3  # per-request spec keys: 1 verify count only, 2 accept_token_num, 3 num_correct_drafts
    spec_aliases: bool = False  # generation 3 also writes the generation-2 names
    draft_names: bool = False  # generation 2 names its drafts spec_accepted_drafts / spec_proposed_drafts (an
    #                            intermediate generation; release not confirmed)
    sglext: bool = True  # OpenAI routes answer return_spec_tokens_details (only when speculating)
    sglext_zero_fill: bool = False  # sglext built from the canonical (generation-3) keys, each ``or 0``, over a
    #                                 meta_info that names them otherwise: the counts it lacks read 0
    spec_gauges_always: bool = True  # speculation gauges exported (0) by a server that does not speculate
    draft_counters: bool = False  # sglang:spec_accepted_drafts_total / sglang:spec_proposed_drafts_total (an
    #                               intermediate generation; release not confirmed)
    accept_rate_bonus: bool = True  # sglang:spec_accept_rate = accepted tokens incl. the bonus / (passes x
    #                                 num_draft_tokens), as read in SGLang's scheduler_metrics_mixin.py; False: a
    #                                 draft acceptance rate (later source; release not confirmed)
    hybrid_pools: bool = False  # a hybrid (sliding-window) model: sglang:token_usage is the most used pool, and
    #                             sglang:full_token_usage / sglang:swa_token_usage are exported beside it
    max_running_metric: bool = False  # sglang:max_running_requests (an early metrics module; release not confirmed)
    cap_gauge: bool = False  # sglang:max_running_requests per DP rank, the cap in force, labelled cap_source (newest)
    priority_series: bool = False  # --enable-priority-scheduling: a total under priority="" and one per priority
    tp_ranks: int = 1  # --enable-metrics-for-all-schedulers: every TP rank reports the same batch
    parts: int = 1  # SGLang data-parallel ranks, or vLLM engines: each reports its share
    idle_ranks: int = 0  # SGLang: the last DP ranks get no requests (their live gauges read 0)
    # every server
    prompt_details: str = ""  # usage.prompt_tokens_details: "" as each server's wire always did (SGLang: with the
    #                           prefix cache on, also when 0; vLLM: never, the default server), "nonzero": only
    #                           when some prompt tokens were cached, "always": also when 0
    openai_error: str = "nested"  # in-stream error chunk: "nested" {"error": {...}}, "flat" {"object": "error"},
    #                               "event" (an SSE ``error:`` field)
    # vLLM
    request_spec_metrics: bool = False  # --per-request-spec-decode-metrics: metrics.speculative_decoding
    num_drafts_counter: bool = True  # vllm:spec_decode_num_drafts_total
    kv_metric: str | None = None  # the KV-use gauge's name (vLLM, llama.cpp); None: not exported
    prefix_counters: str = "prefix_cache"  # vLLM's prefix-cache counters: vllm:<this>_queries / _hits
    admission_counter: bool = False  # vllm:admission_rejections_total{reason}: requests refused at admission (a
    #                                  full --max-num-queued-reqs queue; seen on vLLM 0.32, the reason's values
    #                                  not confirmed)
    # llama.cpp
    spec_counters: bool = True  # llamacpp:spec_decode_* counters
    props_types_key: str = "speculative.types"  # or "speculative.type" (older builds)

    @property
    def routes(self) -> tuple[str, ...]:
        """The generation routes this server serves."""
        openai = ("/v1/chat/completions", "/v1/completions")
        return ("/generate", *openai) if self.server == "sglang" else openai

    @property
    def apis(self) -> tuple[str, ...]:
        """The suite's API names this server serves."""
        return ("generate", "chat", "completions") if self.server == "sglang" else ("chat", "completions")


VINTAGES: dict[str, Vintage] = {v.name: v for v in (
    Vintage("sglang-0.4", "sglang", "SGLang 0.4.x", spec_names=1, sglext=False, spec_gauges_always=False,
            max_running_metric=True),
    Vintage("sglang-0.5.9", "sglang", "SGLang 0.5.9, --enable-priority-scheduling", spec_names=2, sglext=False,
            priority_series=True),  # 0.5.9's SglExt has no spec_tokens_details (read in its wheel, #55)
    Vintage("sglang-drafts", "sglang", "SGLang between 0.5.9 and 0.5.23 with draft counters "
            "(sglang:spec_accepted_drafts / spec_proposed_drafts, per request too; release not confirmed)",
            spec_names=2, draft_names=True, draft_counters=True),
    Vintage("sglang-0.5.23", "sglang", "SGLang 0.5.23", spec_aliases=True),
    Vintage("sglang-hybrid-swa", "sglang", "SGLang with sglang:full_token_usage (release not confirmed), serving "
            "a hybrid sliding-window model", spec_aliases=True, hybrid_pools=True),
    Vintage("sglang-0.5.23-tp2dp2", "sglang", "SGLang 0.5.23, --dp-size 2 --tp-size 2 "
            "--enable-metrics-for-all-schedulers", spec_aliases=True, tp_ranks=2, parts=2),
    Vintage("sglang-0.5.23-dp2-idle", "sglang", "SGLang 0.5.23, --dp-size 2, one rank idle (the router sent it "
            "nothing)", spec_aliases=True, parts=2, idle_ranks=1),
    Vintage("sglang-newest", "sglang", "SGLang after 0.5.23: the cap in force as a per-DP-rank gauge "
            "(release not confirmed), --dp-size 2", spec_aliases=True, parts=2, cap_gauge=True),
    Vintage("sglang-sglext-zeros", "sglang", "SGLang whose OpenAI routes zero-fill sglext.spec_tokens_details "
            "from the canonical keys over a meta_info of generation-2 names (release not confirmed)", spec_names=2,
            sglext_zero_fill=True),
    Vintage("vllm-0.8", "vllm", "vLLM early V1 engine (0.8.x)", openai_error="flat", num_drafts_counter=False,
            kv_metric="vllm:gpu_cache_usage_perc", prefix_counters="gpu_prefix_cache"),
    Vintage("vllm-0.33", "vllm", "vLLM 0.33, two engines, --per-request-spec-decode-metrics summary", parts=2,
            request_spec_metrics=True, kv_metric="vllm:kv_cache_usage_perc", admission_counter=True),
    Vintage("vllm-0.33-nometrics", "vllm", "vLLM 0.33 without per-request spec metrics",
            kv_metric="vllm:kv_cache_usage_perc", admission_counter=True),
    Vintage("vllm-details-nonzero", "vllm", "vLLM with --enable-prompt-tokens-details whose serving code sends "
            "prompt_tokens_details only when some tokens were cached (release not confirmed)",
            kv_metric="vllm:kv_cache_usage_perc", prompt_details="nonzero"),
    Vintage("llamacpp-old", "llamacpp", "llama.cpp builds before the speculative counters (2025)",
            openai_error="event", spec_counters=False, kv_metric="llamacpp:kv_cache_usage_ratio",
            props_types_key="speculative.type"),
    Vintage("llamacpp-new", "llamacpp", "llama.cpp late-2026 builds (b9xxx)"),
)}
DEFAULT_VINTAGE = "sglang-0.5.23"
