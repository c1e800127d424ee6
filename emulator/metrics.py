"""``GET /metrics`` in Prometheus text format, with SGLang's metric names and label sets.

Gauges come from the scheduler's last log window (refreshed every ``metrics_interval_steps`` steps, like
SGLang's decode log, and zeroed when the server goes idle); counters and histograms are updated when a
request finishes, from its ledger record.
"""

from __future__ import annotations

import bisect
from typing import Any

from .profile import Profile
from .scheduler import Scheduler

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets, self.counts = buckets, [0] * (len(buckets) + 1)
        self.total, self.count = 0.0, 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1


def _labels(pairs: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items()))
    return "{" + inner + "}"


class Metrics:
    """Counters fed by ledger records plus the scheduler's gauges, rendered on demand."""

    def __init__(self, profile: Profile, scheduler: Scheduler) -> None:
        self.profile, self.scheduler = profile, scheduler
        self._tokenizer = {"model_name": profile.served_model_name, "engine_type": "unified"}
        self._sched = {**self._tokenizer, "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
        self.prompt_tokens = {"true": 0, "false": 0}
        self.generation_tokens = {"true": 0, "false": 0}
        self.cached_tokens = {"true": 0, "false": 0}
        self.requests = 0
        self.aborted = 0
        self.ttft = _Histogram(_LATENCY_BUCKETS)
        self.e2e = _Histogram(_LATENCY_BUCKETS)

    def observe(self, record: dict[str, Any]) -> None:
        """Count one finished request (called with its ledger record)."""
        self.requests += 1
        if record["status"] != 200 or record["finish_reason"] in (None, "abort"):
            self.aborted += 1
        if record["status"] != 200:
            return
        streaming = "true" if record["stream"] else "false"
        self.prompt_tokens[streaming] += record["prompt_tokens"]
        self.generation_tokens[streaming] += record["completion_tokens"]
        self.cached_tokens[streaming] += record["cached_tokens"]
        if record["first_token_s"] is not None:
            self.ttft.observe(record["first_token_s"] - record["arrival_s"])
        self.e2e.observe(record["finished_s"] - record["arrival_s"])

    def render(self) -> str:
        window, stats, spec = self.scheduler.window, self.scheduler.stats, self.profile.speculative
        lines: list[str] = []

        def emit(name: str, kind: str, helptext: str, samples: list[tuple[dict[str, str], float]]) -> None:
            lines.append(f"# HELP {name} {helptext}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(f"{name}{_labels(labels)} {float(value)}" for labels, value in samples)

        sched = self._sched
        emit("sglang:num_running_reqs", "gauge", "The number of running requests.", [(sched, window.running)])
        emit("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.",
             [(sched, window.waiting)])
        emit("sglang:gen_throughput", "gauge", "The generation throughput (token/s).",
             [(sched, window.gen_throughput)])
        emit("sglang:max_running_requests", "gauge", "The max running requests.",
             [(sched, self.profile.max_running_requests)])
        capacity = self.profile.max_total_num_tokens
        emit("sglang:num_used_tokens", "gauge", "The number of used tokens.", [(sched, window.kv_used_tokens)])
        emit("sglang:max_total_num_tokens", "gauge", "Maximum total number of tokens in the KV cache.",
             [(sched, capacity)])
        emit("sglang:token_usage", "gauge", "The token usage (0..1).",
             [(sched, min(1.0, window.kv_used_tokens / capacity))])
        if spec is not None:
            emit("sglang:spec_accept_length", "gauge", "The average acceptance length of speculative decoding.",
                 [(sched, window.spec_accept_length)])
            emit("sglang:spec_accept_rate", "gauge", "The average acceptance rate of speculative decoding.",
                 [(sched, window.spec_accept_rate)])
            emit("sglang:spec_num_steps", "gauge", "Speculative num steps in force.", [(sched, spec.num_steps)])
            emit("sglang:spec_num_draft_tokens", "gauge", "Speculative draft tokens in force.",
                 [(sched, spec.num_draft_tokens)])
            emit("sglang:spec_verify_calls_total", "counter", "Verify passes.", [(sched, stats.verify_passes)])
        tok = self._tokenizer
        for name, counts, helptext in (
            ("sglang:prompt_tokens_total", self.prompt_tokens, "Number of prefill tokens processed."),
            ("sglang:generation_tokens_total", self.generation_tokens, "Number of generation tokens processed."),
            ("sglang:cached_tokens_total", self.cached_tokens, "Number of cached prompt tokens."),
        ):
            emit(name, "counter", helptext, [({**tok, "is_streaming": k}, v) for k, v in counts.items()])
        emit("sglang:num_requests_total", "counter", "Number of requests processed.", [(tok, self.requests)])
        emit("sglang:num_aborted_requests_total", "counter", "Number of requests aborted.", [(tok, self.aborted)])
        self._histogram(lines, "sglang:time_to_first_token_seconds", "Time to first token in seconds.", self.ttft)
        self._histogram(lines, "sglang:e2e_request_latency_seconds", "End-to-end request latency.", self.e2e)
        return "\n".join(lines) + "\n"

    def _histogram(self, lines: list[str], name: str, helptext: str, hist: _Histogram) -> None:
        lines.append(f"# HELP {name} {helptext}")
        lines.append(f"# TYPE {name} histogram")
        running = 0
        for bound, count in zip((*hist.buckets, float("inf")), hist.counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f"{name}_bucket{_labels({**self._tokenizer, 'le': le})} {float(running)}")
        lines.append(f"{name}_sum{_labels(self._tokenizer)} {hist.total}")
        lines.append(f"{name}_count{_labels(self._tokenizer)} {float(hist.count)}")
