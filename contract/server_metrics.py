"""server_metrics.jsonl: the server's own Prometheus series, sampled during a run, in one vocabulary.

SGLang (``sglang:*``, with ``--enable-metrics``), vLLM (``vllm:*``) and llama.cpp (``llamacpp:*``, with
``--metrics``) name the same facts differently. ``parse_metrics`` reads the Prometheus text format with
``prometheus_client``'s parser and maps each server's names onto the terms of ``VOCABULARY``; every series it
does not map is kept raw (name and labels), except histogram buckets and ``_created`` timestamps, which would
make every line hundreds of series long and which no figure uses.

A line of the file (``ServerMetricsSample``) is written by the load side once per sampling interval; the
analysis reads it back with ``read_server_metrics``. Same versioning rule as the records: bump
``SERVER_METRICS_SCHEMA`` on an incompatible change and keep reading the older versions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from prometheus_client.parser import text_string_to_metric_families

from specbench.contract.runformat import RunFormatError, read_versioned_lines

SERVER_METRICS_SCHEMA = 1


@dataclass(frozen=True)
class Term:
    """One fact of the vocabulary: its meaning and how several labelled series of it combine."""

    name: str
    meaning: str
    combine: str  # "sum" (counts, rates, counters across ranks) or "mean" (fractions, lengths)


VOCABULARY: tuple[Term, ...] = (
    Term("running", "requests in the running batch", "sum"),
    Term("queued", "requests waiting for a batch slot", "sum"),
    Term("max_running", "the server's cap on running requests", "sum"),
    Term("kv_cache_usage", "share of the KV cache in use, 0..1", "mean"),
    Term("gen_throughput", "server-reported generation tok/s over its last log window", "sum"),
    Term("accept_length", "tokens per verify pass, bonus included, over the server's last log window", "mean"),
    Term("accept_rate", "accepted draft tokens / proposed draft tokens, last log window (no server maps onto it now; "
         "runs before issue #39 stored SGLang's gauge here, which is server_accept_rate)", "mean"),
    Term("server_accept_rate", "the server's own acceptance-rate gauge as it defines it, last log window (SGLang: "
         "tokens accepted per verify pass, bonus included, over the draft length incl. the bonus in the releases "
         "read; not a draft acceptance rate)", "mean"),
    Term("prompt_tokens_total", "counter: prompt tokens of finished requests, cached tokens included", "sum"),
    Term("prefill_tokens_total", "counter: prompt tokens computed, cached tokens excluded (llama.cpp)", "sum"),
    Term("generation_tokens_total", "counter: output tokens generated", "sum"),
    Term("requests_total", "counter: requests finished", "sum"),
    Term("spec_verify_total", "counter: speculative verify passes (one per request per pass)", "sum"),
    Term("spec_draft_tokens_total", "counter: draft tokens proposed", "sum"),
    Term("spec_accepted_tokens_total", "counter: draft tokens accepted (bonus excluded)", "sum"),
    Term("prefix_cache_queries_total", "counter: prompt tokens looked up in the prefix cache (vLLM, per scheduling)",
         "sum"),
    Term("prefix_cache_hits_total", "counter: of those, tokens found in the prefix cache (vLLM)", "sum"),
    Term("cached_tokens_total", "counter: cached prompt tokens of finished requests (SGLang; summed over its "
         "cache_source label where a release has one)", "sum"),
    Term("cache_hit_rate", "the server's prefix-cache hit-rate gauge, 0..1, over its last prefill batches (SGLang)",
         "mean"),
    Term("spec_accepted_pos_<i>", "counter, one term per draft position i = 0..k-1: verify passes whose draft "
         "token at position i was accepted", "sum"),
)
TERMS: dict[str, Term] = {t.name: t for t in VOCABULARY}

# The per-position acceptance counter carries a ``position`` label ("0".."k-1"); each position becomes a term of
# its own, ``spec_accepted_pos_<i>``, so a sample's ``values`` stays a flat term -> number map (older readers skip
# terms they do not know). Absent from servers that do not export it (SGLang, early vLLM, older llama.cpp).
ACCEPTED_POS_PREFIX = "spec_accepted_pos_"
PER_POSITION_NAMES = frozenset({"vllm:spec_decode_num_accepted_tokens_per_pos_total",
                                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"})
POSITION_LABEL = "position"


def term_rule(term: str) -> Term:
    """The vocabulary entry of a term; every ``spec_accepted_pos_<i>`` shares one."""
    if term.startswith(ACCEPTED_POS_PREFIX) and term[len(ACCEPTED_POS_PREFIX):].isdigit():
        return TERMS[f"{ACCEPTED_POS_PREFIX}<i>"]
    return TERMS[term]


def accepted_by_position(values: dict[str, float]) -> list[float] | None:
    """A sample's per-position accepted counts, position 0 first; None when the server does not export them."""
    found = {int(k[len(ACCEPTED_POS_PREFIX):]): float(v) for k, v in values.items()
             if k.startswith(ACCEPTED_POS_PREFIX) and k[len(ACCEPTED_POS_PREFIX):].isdigit()}
    if not found:
        return None
    return [found.get(i, 0.0) for i in range(max(found) + 1)]

# Sample name as the server exposes it -> vocabulary term. Counters keep their ``_total`` suffix here.
SERVER_NAMES: dict[str, str] = {
    # SGLang (docs/reference/protocols.md). max_running_requests: an early metrics module's gauge and, per DP rank,
    # the newest builds' (releases not confirmed); without it the cap is read from /server_info where that has one.
    "sglang:num_running_reqs": "running",
    "sglang:num_queue_reqs": "queued",
    "sglang:max_running_requests": "max_running",
    "sglang:token_usage": "kv_cache_usage",  # the most used of the memory pools on hybrid models
    "sglang:full_token_usage": "kv_cache_usage",  # the full-attention pool: preferred where exported (PREFERRED_NAMES)
    "sglang:gen_throughput": "gen_throughput",
    "sglang:spec_accept_length": "accept_length",
    # Not a draft acceptance rate: accepted tokens (bonus included) / (verify passes x draft tokens incl. the bonus)
    # where SGLang's source was read (docs/guides/server-metrics.md).
    "sglang:spec_accept_rate": "server_accept_rate",
    "sglang:prompt_tokens_total": "prompt_tokens_total",
    "sglang:generation_tokens_total": "generation_tokens_total",
    "sglang:num_requests_total": "requests_total",
    "sglang:spec_verify_calls_total": "spec_verify_total",
    "sglang:cached_tokens_total": "cached_tokens_total",
    "sglang:cache_hit_rate": "cache_hit_rate",
    # An intermediate SGLang generation's draft counters (the per-request keys of the same names are in SGLang's
    # source; the release that exported the counters is not confirmed). Bare names too, should they be gauges.
    "sglang:spec_accepted_drafts_total": "spec_accepted_tokens_total",
    "sglang:spec_accepted_drafts": "spec_accepted_tokens_total",
    "sglang:spec_proposed_drafts_total": "spec_draft_tokens_total",
    "sglang:spec_proposed_drafts": "spec_draft_tokens_total",
    # vLLM (docs/protocols.md); the accept length comes from its counters (see ``accept_length_from_counters``).
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "queued",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",  # early V1 releases
    "vllm:prompt_tokens_total": "prompt_tokens_total",
    "vllm:generation_tokens_total": "generation_tokens_total",
    "vllm:request_success_total": "requests_total",
    # Prefix-cache lookups and hits in tokens: vllm:prefix_cache_* from 0.9.2, vllm:gpu_prefix_cache_* before (kept
    # hidden in 0.10-0.11, removed after; docs/reference/protocols.md).
    "vllm:prefix_cache_queries_total": "prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_queries_total": "prefix_cache_queries_total",
    "vllm:gpu_prefix_cache_hits_total": "prefix_cache_hits_total",
    "vllm:spec_decode_num_drafts_total": "spec_verify_total",
    "vllm:spec_decode_num_draft_tokens_total": "spec_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total": "spec_accepted_tokens_total",
    # llama.cpp llama-server --metrics. Its predicted_tokens_seconds is a per-slot decode speed, not the
    # server's throughput, so it stays raw.
    "llamacpp:requests_processing": "running",
    "llamacpp:requests_deferred": "queued",
    "llamacpp:kv_cache_usage_ratio": "kv_cache_usage",  # older builds; newer ones export no KV-use gauge
    # llama.cpp counts only the prompt tokens it computed (a cache hit is not counted): another fact.
    "llamacpp:prompt_tokens_total": "prefill_tokens_total",
    "llamacpp:tokens_predicted_total": "generation_tokens_total",
    "llamacpp:spec_decode_num_drafts_total": "spec_verify_total",
    "llamacpp:spec_decode_num_draft_tokens_total": "spec_draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total": "spec_accepted_tokens_total",
}

# Names that, where a server exports them, replace every other name mapped onto the same term. SGLang's
# ``token_usage`` is the maximum over its memory pools (full attention, sliding window, Mamba state) on hybrid
# models; ``full_token_usage`` is the full-attention KV pool alone, the figure ``kv_cache_usage`` stands for.
# vLLM 0.10-0.11 export the old prefix-cache names beside the new ones with --show-hidden-metrics-for-version: the
# new ones count once.
PREFERRED_NAMES = frozenset({"sglang:full_token_usage", "vllm:prefix_cache_queries_total",
                             "vllm:prefix_cache_hits_total"})

_COMBINE: dict[str, Callable[[list[float]], float]] = {"sum": sum, "mean": lambda v: sum(v) / len(v)}

# How labelled series of one term combine, decided per label (see docs/guides/server-metrics.md):
# * ``priority`` (SGLang --enable-priority-scheduling): on the running and queue gauges (``PRIORITY_TOTAL_TERMS``)
#   the series with an empty priority is the total over priorities, the others split it; the total is taken alone
#   (the per-priority series are summed only when no total is written). Everywhere else, the tokenizer's counters
#   above all, each series counts the requests of one priority and ``priority=""`` those that gave none: disjoint
#   parts, combined by the term's rule like any other part.
# * ``tp_rank``, ``pp_rank``, ``moe_ep_rank`` (SGLang --enable-metrics-for-all-schedulers): every rank of one
#   data-parallel group reports the same batch; series that differ only in these labels count once.
# * anything else (SGLang ``dp_rank``, vLLM ``engine``, ``is_streaming``, ``model_name``): separate parts of the
#   server, combined by the term's rule (summed, or averaged for fractions).
PRIORITY_LABEL = "priority"
PRIORITY_TOTAL_TERMS = frozenset({"running", "queued"})
DUPLICATE_RANK_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank"})


def combine_series(term: str, series: list[tuple[dict[str, str], float]]) -> float:
    """One value of ``term`` from its labelled series, by the per-label rule above."""
    if term in PRIORITY_TOTAL_TERMS and any(PRIORITY_LABEL in labels for labels, _ in series):
        totals = [(labels, v) for labels, v in series if not labels.get(PRIORITY_LABEL)]
        series = totals or series
    once: dict[tuple[tuple[str, str], ...], float] = {}
    for labels, value in series:
        key = tuple(sorted((k, v) for k, v in labels.items() if k not in DUPLICATE_RANK_LABELS))
        once.setdefault(key, value)
    return _COMBINE[term_rule(term).combine](list(once.values()))
_DROPPED_SUFFIXES = ("_bucket", "_created")


class ServerMetricsSample(TypedDict):
    """One line of server_metrics.jsonl: one read of ``/metrics``."""

    schema: int
    t_s: float  # wall clock (epoch seconds), midway between sending the GET and reading the whole answer
    read_s: NotRequired[float]  # sending the GET to reading the whole answer: the server's values are of some
    #                             instant in [t_s - read_s/2, t_s + read_s/2] (absent in runs before it was kept)
    server: str  # "sglang", "vllm", "llamacpp" or "unknown": whose names the series carried
    values: dict[str, float]  # vocabulary term -> value (only the terms the server exposes)
    raw: dict[str, float]  # every other series: 'name{label="v",...}' -> value


class MetricsParseError(ValueError):
    """The text is not the Prometheus exposition format."""


def series_key(name: str, labels: dict[str, str]) -> str:
    """'name{a="1",b="2"}' with labels sorted; just the name when there are none."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _server_of(names: Iterable[str]) -> str:
    for name in names:
        prefix = name.split(":", 1)[0] if ":" in name else ""
        if prefix in ("sglang", "vllm", "llamacpp"):
            return prefix
    return "unknown"


def parse_metrics(text: str, t_s: float) -> ServerMetricsSample:
    """One sample from a ``/metrics`` answer: mapped terms combined across label sets (``combine_series``), the
    rest raw."""
    grouped: dict[str, list[tuple[dict[str, str], float]]] = {}
    preferred: dict[str, list[tuple[dict[str, str], float]]] = {}
    raw: dict[str, float] = {}
    names: list[str] = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                names.append(sample.name)
                value = float(sample.value)
                labels = dict(sample.labels)
                term = SERVER_NAMES.get(sample.name)
                if sample.name in PER_POSITION_NAMES and labels.get(POSITION_LABEL, "").isdigit():
                    term = f"{ACCEPTED_POS_PREFIX}{int(labels.pop(POSITION_LABEL))}"
                if term is not None:
                    into = preferred if sample.name in PREFERRED_NAMES else grouped
                    into.setdefault(term, []).append((labels, value))
                elif not sample.name.endswith(_DROPPED_SUFFIXES) and value == value:  # NaN is not JSON
                    raw[series_key(sample.name, sample.labels)] = value
    except (ValueError, TypeError) as exc:
        raise MetricsParseError(f"not Prometheus text format ({exc})") from None
    grouped.update(preferred)
    values = {term: combine_series(term, series) for term, series in grouped.items() if series}
    return ServerMetricsSample(schema=SERVER_METRICS_SCHEMA, t_s=t_s, server=_server_of(names), values=values,
                               raw=raw)


def accept_length_from_counters(accepted: float, verify: float) -> float | None:
    """Tokens per verify pass from counter differences: 1 (the bonus token) + accepted drafts per pass.

    vLLM documents this as its mean acceptance length; llama.cpp logs the same figure as "mean len".
    """
    return 1.0 + accepted / verify if verify > 0 else None


def read_server_metrics(path: Path) -> tuple[list[ServerMetricsSample], int]:
    """Samples in time order and the count of torn lines (a killed run); a newer schema is an error."""
    samples: list[ServerMetricsSample] = []
    lines, torn = read_versioned_lines(path, SERVER_METRICS_SCHEMA, "server metrics")
    for where, obj in lines:
        if not isinstance(obj.get("t_s"), int | float) or not isinstance(obj.get("values"), dict):
            raise RunFormatError(f"{where}: sample lacks a numeric 't_s' and a 'values' object")
        obj.setdefault("raw", {})
        obj.setdefault("server", "unknown")
        samples.append(cast(ServerMetricsSample, obj))  # checked above
    samples.sort(key=lambda s: s["t_s"])
    return samples, torn
