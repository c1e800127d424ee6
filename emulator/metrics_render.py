"""The text of ``/metrics`` per server: SGLang's, vLLM's and llama.cpp's names and label sets.

SGLang's scheduler series carry ``tp_rank``/``pp_rank``/``moe_ep_rank`` (plus ``dp_rank`` with several
data-parallel ranks and ``priority`` with priority scheduling); its tokenizer series only ``model_name`` and
``engine_type``. vLLM labels every series ``model_name`` and ``engine``; llama.cpp uses no labels. Both label their
per-position acceptance counter ``position`` as well.
"""

from __future__ import annotations

from collections.abc import Callable

from .metrics import Histogram, Metrics

__all__ = ["CONTENT_TYPE", "RENDERERS", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Samples = list[tuple[dict[str, str], float]]


class _Text:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def emit(self, name: str, kind: str, helptext: str, samples: Samples) -> None:
        self.lines += [f"# HELP {name} {helptext}", f"# TYPE {name} {kind}"]
        self.lines += [f"{name}{_labels(labels)} {float(value)}" for labels, value in samples]

    def histogram(self, name: str, helptext: str, hist: Histogram, labels: dict[str, str]) -> None:
        self.lines += [f"# HELP {name} {helptext}", f"# TYPE {name} histogram"]
        running = 0
        for bound, count in zip((*hist.buckets, float("inf")), hist.counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            self.lines.append(f"{name}_bucket{_labels({**labels, 'le': le})} {float(running)}")
        self.lines += [f"{name}_sum{_labels(labels)} {hist.total}",
                       f"{name}_count{_labels(labels)} {float(hist.count)}"]

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _labels(pairs: dict[str, str]) -> str:
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items())) + "}"


def split(value: float, parts: int) -> list[float]:
    """``value`` dealt to ``parts``: whole numbers stay whole (the first parts take the remainder)."""
    if float(value).is_integer():
        whole, rest = divmod(int(value), parts)
        return [float(whole + (1 if i < rest else 0)) for i in range(parts)]
    return [value / parts] * parts


# ---------------------------------------------------------------- SGLang


def _sglang_sched(m: Metrics) -> Callable[..., Samples]:
    wire = m.profile.wire
    base = {"model_name": m.profile.served_model_name, "engine_type": "unified", "pp_rank": "0", "moe_ep_rank": "0"}
    active = wire.parts - wire.idle_ranks

    def series(value: float, additive: bool, live: bool = True, prioritized: bool = False) -> Samples:
        """One value per rank: ``additive`` values dealt to the ranks, others repeated; a ``live`` value (of the
        last log window) is the busy ranks' only, an idle rank reads 0. With priority series, a ``prioritized``
        gauge (running, queue) is written as a total under ``priority=""`` and once per priority."""
        out: Samples = []
        ranks = active if live else wire.parts
        shares = split(value, ranks) if additive else [value] * ranks
        shares += [0.0] * (wire.parts - ranks)
        for dp, share in enumerate(shares):
            for tp in range(wire.tp_ranks):
                labels = {**base, "tp_rank": str(tp)} | ({"dp_rank": str(dp)} if wire.parts > 1 else {})
                if not (wire.priority_series and prioritized):
                    out.append((labels, share))
                    continue
                high, low = split(share, 2) if additive else (share, share)
                out += [({**labels, "priority": ""}, share), ({**labels, "priority": "0"}, high),
                        ({**labels, "priority": "1"}, low)]
        return out
    return series


def _cap_source(m: Metrics) -> str:
    """Why the cap is what it is: the launch flag, the server's own choice (no flag), or memory (lowered below the
    flag). The label's name is from the issue; these values are the emulator's (not confirmed)."""
    flag = m.profile.max_running_requests_flag
    if flag is None:
        return "auto"
    return "server_args" if flag == m.profile.max_running_requests else "memory"


def render_sglang(m: Metrics) -> str:
    p, wire, window = m.profile, m.profile.wire, m.scheduler.window
    spec, t, sched = p.speculative, _Text(), _sglang_sched(m)
    t.emit("sglang:num_running_reqs", "gauge", "The number of running requests.",
           sched(window.running, True, prioritized=True))
    t.emit("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.",
           sched(window.waiting, True, prioritized=True))
    t.emit("sglang:gen_throughput", "gauge", "The generation throughput (token/s).",
           sched(window.gen_throughput, True))
    if wire.max_running_metric:
        t.emit("sglang:max_running_requests", "gauge", "The max running requests.",
               sched(p.max_running_requests, True, False))
    if wire.cap_gauge:
        t.emit("sglang:max_running_requests", "gauge", "The max running requests in force on this rank.",
               [({**labels, "cap_source": _cap_source(m)}, v)
                for labels, v in sched(p.max_running_requests, True, False)])
    capacity = p.max_total_num_tokens
    t.emit("sglang:num_used_tokens", "gauge", "The number of used tokens.", sched(window.kv_used_tokens, True))
    t.emit("sglang:max_total_num_tokens", "gauge", "Maximum total number of tokens in the KV cache.",
           sched(capacity, True, False))
    full = min(1.0, window.kv_used_tokens / capacity)
    if wire.hybrid_pools:
        # The emulator's stand-in for a sliding-window pool: an eighth of the KV capacity holding a quarter of the
        # tokens, so it fills twice as fast as the full-attention pool; token_usage is the fuller of the two.
        swa = min(1.0, 2 * full)
        t.emit("sglang:token_usage", "gauge", "The token usage.", sched(max(full, swa), False))
        t.emit("sglang:full_token_usage", "gauge", "The token usage for full attention layers.", sched(full, False))
        t.emit("sglang:swa_token_usage", "gauge", "The token usage for SWA layers.", sched(swa, False))
    else:
        t.emit("sglang:token_usage", "gauge", "The token usage (0..1).", sched(full, False))
    if spec is not None or wire.spec_gauges_always:
        t.emit("sglang:spec_accept_length", "gauge", "The average acceptance length of speculative decoding.",
               sched(window.spec_accept_length if spec else 0.0, False))
        # SGLang's definition (scheduler_metrics_mixin.py): accepted tokens, bonus included, over verify passes x
        # num_draft_tokens (the draft length incl. the bonus), i.e. the acceptance length / num_draft_tokens.
        rate = (window.spec_accept_length / spec.num_draft_tokens if wire.accept_rate_bonus
                else window.spec_accept_rate) if spec else 0.0
        t.emit("sglang:spec_accept_rate", "gauge", "The average acceptance rate of speculative decoding.",
               sched(rate, False))
        t.emit("sglang:spec_num_steps", "gauge", "Speculative num steps in force.",
               sched(spec.num_steps if spec else 0, False, False))
        t.emit("sglang:spec_num_draft_tokens", "gauge", "Speculative draft tokens in force.",
               sched(spec.num_draft_tokens if spec else 0, False, False))
    tok = {"model_name": p.served_model_name, "engine_type": "unified"}
    # Tokenizer counters, raised as a request finishes with that request's labels: with priority series, one per
    # priority the traffic used ("" holds the requests that gave none; no series is a total).
    groups = ([({**tok, "priority": key}, [counts]) for key, counts in sorted(m.by_priority.items())]
              if wire.priority_series else [(tok, m.parts)])

    def counter(attr: str) -> Samples:
        return [(labels, float(sum(getattr(part, attr) for part in parts))) for labels, parts in groups]

    if spec is not None or wire.spec_gauges_always:  # counted by the tokenizer as a request finishes, like the tokens
        t.emit("sglang:spec_verify_calls_total", "counter", "Verify passes.", counter("verify"))
        if wire.draft_counters:
            t.emit("sglang:spec_accepted_drafts_total", "counter", "Draft tokens accepted (bonus excluded).",
                   counter("drafts_accepted"))
            t.emit("sglang:spec_proposed_drafts_total", "counter", "Draft tokens proposed.",
                   counter("drafts_proposed"))
    for name, attr, helptext in (
        ("sglang:prompt_tokens_total", "prompt_tokens", "Number of prefill tokens processed."),
        ("sglang:generation_tokens_total", "generation_tokens", "Number of generation tokens processed."),
        ("sglang:cached_tokens_total", "cached_tokens", "Number of cached prompt tokens."),
    ):
        t.emit(name, "counter", helptext, [({**labels, "is_streaming": k}, float(sum(getattr(part, attr)[k]
                                                                                   for part in parts)))
                                           for labels, parts in groups for k in ("true", "false")])
    t.emit("sglang:num_requests_total", "counter", "Number of requests processed.", counter("requests"))
    t.emit("sglang:num_aborted_requests_total", "counter", "Number of requests aborted.", counter("aborted"))
    t.histogram("sglang:time_to_first_token_seconds", "Time to first token in seconds.", m.ttft, tok)
    t.histogram("sglang:e2e_request_latency_seconds", "End-to-end request latency.", m.e2e, tok)
    return t.text()


# ---------------------------------------------------------------- vLLM


def render_vllm(m: Metrics) -> str:
    p, wire, window, t = m.profile, m.profile.wire, m.scheduler.window, _Text()
    labels = [{"model_name": p.served_model_name, "engine": str(i)} for i in range(wire.parts)]

    def per_engine(values: list[float]) -> Samples:
        return list(zip(labels, values, strict=True))

    t.emit("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
           per_engine(split(window.running, wire.parts)))
    t.emit("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           per_engine(split(window.waiting, wire.parts)))
    if wire.kv_metric:
        usage = min(1.0, window.kv_used_tokens / p.max_total_num_tokens)
        t.emit(wire.kv_metric, "gauge", "KV-cache usage. 1 means 100 percent usage.", per_engine([usage] * wire.parts))
    counters = [("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "prompt_tokens"),
                ("vllm:generation_tokens_total", "Number of generation tokens processed.", "generation_tokens"),
                ("vllm:request_success_total", "Count of successfully processed requests.", "succeeded")]
    if p.speculative is not None:
        if wire.num_drafts_counter:
            counters.append(("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", "drafting"))
        counters += [("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", "drafts_proposed"),
                     ("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", "drafts_accepted")]
    for name, helptext, attr in counters:
        values = [getattr(part, attr) for part in m.parts]
        t.emit(name, "counter", helptext, per_engine([sum(v.values()) if isinstance(v, dict) else v for v in values]))
    if p.speculative is not None and wire.num_drafts_counter:
        t.emit("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.",
               [({**label, "position": str(i)}, float(n)) for label, part in zip(labels, m.parts, strict=True)
                for i, n in enumerate(part.accepted_per_pos)])
    if wire.admission_counter:  # counted in the API server, across engines: one series per reason
        t.emit("vllm:admission_rejections_total", "counter", "Requests rejected at admission.",
               [({"model_name": p.served_model_name, "reason": reason}, float(n))
                for reason, n in sorted((m.refused or {"queue_full": 0}).items())])
    t.histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency.", m.e2e, labels[0])
    return t.text()


# ---------------------------------------------------------------- llama.cpp


def render_llamacpp(m: Metrics) -> str:
    p, wire, window, t = m.profile, m.profile.wire, m.scheduler.window, _Text()
    computed = m.total("prompt_tokens") - m.total("cached_tokens")  # llama.cpp leaves out cache hits
    t.emit("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.", [({}, computed)])
    t.emit("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.",
           [({}, m.total("generation_tokens"))])
    t.emit("llamacpp:requests_processing", "gauge", "Number of requests processing.", [({}, window.running)])
    t.emit("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", [({}, window.waiting)])
    if wire.kv_metric:
        t.emit(wire.kv_metric, "gauge", "KV-cache usage. 1 means 100 percent usage.",
               [({}, min(1.0, window.kv_used_tokens / p.max_total_num_tokens))])
    if wire.spec_counters:  # 0 when the server does not speculate
        for name, attr in (("llamacpp:spec_decode_num_drafts_total", "drafting"),
                           ("llamacpp:spec_decode_num_draft_tokens_total", "drafts_proposed"),
                           ("llamacpp:spec_decode_num_accepted_tokens_total", "drafts_accepted")):
            t.emit(name, "counter", "Speculative decoding.", [({}, m.total(attr))])
    if wire.spec_counters and p.speculative is not None and m.total("drafting"):  # listed once a draft was verified
        positions = zip(*(part.accepted_per_pos for part in m.parts), strict=True)
        t.emit("llamacpp:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Speculative decoding.",
               [({"position": str(i)}, float(sum(counts))) for i, counts in enumerate(positions)])
    return t.text()


RENDERERS: dict[str, Callable[[Metrics], str]] = {"sglang": render_sglang, "vllm": render_vllm,
                                                  "llamacpp": render_llamacpp}


def render(metrics: Metrics) -> str:
    """The ``/metrics`` text of the emulated release, from its counters and the scheduler's gauges."""
    return RENDERERS[metrics.profile.wire.server](metrics)
