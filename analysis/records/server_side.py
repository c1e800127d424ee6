"""The server's side of each step: its own gauges and counters over the step's measured window.

Reads the samples of server_metrics.jsonl (``contract.server_metrics``) that fall inside a window and puts
the server's view next to the client's: requests running and queued, KV-cache use, acceptance length, the
acceptance rate per draft position (where the server exports its per-position counter), and the server's
generation-token counter as a rate.

The token cross-check is made over the span between two samples inside the window (the first and last that
no request finished close to; a window without two such samples is not judged), so both sides count over
exactly the same seconds. Servers count generated
tokens either as they are made (vLLM) or when a request finishes (SGLang, llama.cpp); the client's tokens are
attributed both ways over that span (chunk arrivals, and whole requests by the time they finished) and the
gap is to the closer of the two. A gap above ``MAX_TOKEN_GAP`` means one of the two counts is wrong.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.contract.schema import RequestRecord
from specbench.contract.server_metrics import (
    ACCEPTED_POS_PREFIX,
    ServerMetricsSample,
    accept_length_from_counters,
    accepted_by_position,
)
from specbench.contract.window import window_tokens

MAX_TOKEN_GAP = 0.02  # server token counter vs client tokens over the same span
QUIET_S = 0.01  # a span edge this far from every request's end cannot split a request between the two sides


@dataclass(frozen=True)
class ServerStep:
    """The server's figures over one window; None where the server does not expose the series."""

    samples: int  # samples inside the window
    running: float | None  # mean of the samples
    running_max: float | None
    queued: float | None
    kv_cache_usage: float | None  # 0..1
    accept_length: float | None  # from the spec counters when the server has them (SGLang: tokens / verify passes),
    #                              else its gauge
    accept_by_position: tuple[float, ...] | None  # share of verify passes that accepted draft position i
    gen_tok_s: float | None  # generation-token counter's rate between the first and last sample inside
    client_tok_s: float | None  # the client's tok/s over that same span (the attribution closer to the server)
    token_gap: float | None  # gen_tok_s / client_tok_s - 1


def in_window(samples: Sequence[ServerMetricsSample], t0: float, t1: float) -> list[ServerMetricsSample]:
    return [s for s in samples if t0 <= s["t_s"] <= t1]


def _values(samples: Sequence[ServerMetricsSample], term: str) -> list[float]:
    return [float(s["values"][term]) for s in samples if term in s["values"]]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _delta(first: ServerMetricsSample, last: ServerMetricsSample, term: str) -> float | None:
    a, b = first["values"].get(term), last["values"].get(term)
    return float(b) - float(a) if a is not None and b is not None else None


def server_accept_length(inside: Sequence[ServerMetricsSample]) -> float | None:
    """1 + accepted drafts per verify pass from the counters (vLLM, llama.cpp), else SGLang's gauge."""
    found = server_accept_source(inside)
    return found[0] if found is not None else None


def server_accept_source(inside: Sequence[ServerMetricsSample]) -> tuple[float, str] | None:
    """The server's acceptance length over the samples and what it came from ("counters",
    "token_counters" or "gauge").

    From the counters where the server has them: vLLM and llama.cpp count accepted drafts (1 + accepted per
    pass); SGLang counts output tokens and verify passes, both as a request finishes, and its own definition of
    the length is tokens per verify pass, so the window's figure is the one ratio of the two changes, summed over
    data-parallel ranks (every request weighs by its passes). Only without either falls it back to SGLang's
    gauge, which covers the server's last log window and reads 0 while idle, so only nonzero readings count; it
    is an unweighted mean over log windows and ranks, and an idle rank's 0 pulls it down.
    """
    if len(inside) >= 2:
        first, last = inside[0], inside[-1]
        verify = _delta(first, last, "spec_verify_total")
        accepted = _delta(first, last, "spec_accepted_tokens_total")
        if accepted is not None and verify:
            value = accept_length_from_counters(accepted, verify)
            if value is not None:
                return value, "counters"
        generated = _delta(first, last, "generation_tokens_total")
        if last.get("server") == "sglang" and generated is not None and verify is not None and verify > 0:
            return generated / verify, "token_counters"
    gauge = _mean([v for v in _values(inside, "accept_length") if v > 0])
    return (gauge, "gauge") if gauge is not None else None


def server_accept_by_position(inside: Sequence[ServerMetricsSample]) -> tuple[float, ...] | None:
    """Acceptance rate at each draft position over the samples: Δaccepted at position i / Δverify passes.

    Taken between the first and last sample inside the window (both counters are read in one answer, so they
    count the same passes). Position i is accepted only after 0..i-1 were, so the rates never rise with i.
    llama.cpp lists a position only once a draft reached it (a fresh server shows none), so a position missing
    from the first sample counts from 0. None when the last sample has no per-position counter (the server does
    not export it) or no pass happened in between.
    """
    if len(inside) < 2:
        return None
    first, last = accepted_by_position(inside[0]["values"]) or [], accepted_by_position(inside[-1]["values"])
    verify = _delta(inside[0], inside[-1], "spec_verify_total")
    if last is None or not verify or verify <= 0:
        return None
    width = max(len(first), len(last))
    first, last = first + [0.0] * (width - len(first)), last + [0.0] * (width - len(last))
    return tuple((b - a) / verify for a, b in zip(first, last, strict=True))


def finished_tokens(records: Sequence[RequestRecord], t0: float, t1: float) -> float:
    """Output tokens of ok requests that finished in [t0, t1): the tokens a finish-time counter adds."""
    return float(sum(r["output_tokens"] for r in records
                     if r["status"] == "ok" and t0 <= r["start_s"] + r["e2e_s"] < t1))


def quiet_span(inside: Sequence[ServerMetricsSample], records: Sequence[RequestRecord]
               ) -> tuple[ServerMetricsSample, ServerMetricsSample] | None:
    """The first and last samples inside the window that no request finished close to (``QUIET_S``); None when
    fewer than two are.

    A request that ends within milliseconds of a sample may be counted by the server before the sample and
    seen finished by the client after it (or the other way round), moving a whole request's tokens across
    the edge: over a 1 s span at C=3 one 64-token request is 15% of the count. So the cross-check is made only
    between samples away from every finish; a short window without two of them is not judged.
    """
    finishes = sorted(r["start_s"] + r["e2e_s"] for r in records if r["status"] == "ok")

    def quiet(sample: ServerMetricsSample) -> bool:
        i = bisect.bisect_left(finishes, sample["t_s"] - QUIET_S)
        return i == len(finishes) or finishes[i] > sample["t_s"] + QUIET_S

    calm = [s for s in inside if quiet(s)]
    return (calm[0], calm[-1]) if len(calm) >= 2 else None


def _counter_rate(first: ServerMetricsSample, last: ServerMetricsSample) -> float | None:
    """The server's generated-tokens counter as a rate between two samples."""
    counted = _delta(first, last, "generation_tokens_total")
    span_s = last["t_s"] - first["t_s"]
    return counted / span_s if counted is not None and span_s > 0 else None


def token_rates(inside: Sequence[ServerMetricsSample], records: Sequence[RequestRecord]
                ) -> tuple[float | None, float | None, float | None]:
    """(server tok/s, client tok/s, gap). The server's rate is over the quiet span (``quiet_span``) where there
    is one, else between the window's first and last samples; the client's tokens are set beside it, and the
    gap judged, only over a quiet span."""
    if len(inside) < 2:
        return None, None, None
    span = quiet_span(inside, records)
    server = _counter_rate(*(span or (inside[0], inside[-1])))
    if server is None or span is None:
        return server, None, None
    a, b = span[0]["t_s"], span[1]["t_s"]
    candidates = [window_tokens(records, a, b) / (b - a), finished_tokens(records, a, b) / (b - a)]
    candidates = [c for c in candidates if c > 0]
    if not candidates:
        return server, None, None
    client = min(candidates, key=lambda c: abs(server / c - 1))
    return server, client, server / client - 1


def server_step(samples: Sequence[ServerMetricsSample], records: Sequence[RequestRecord], t0: float,
                t1: float) -> ServerStep | None:
    """The server's view of the window [t0, t1]; None when no sample fell inside it."""
    inside = in_window(samples, t0, t1)
    if not inside:
        return None
    running = _values(inside, "running")
    server, client, gap = token_rates(inside, records)
    return ServerStep(
        samples=len(inside), running=_mean(running), running_max=max(running) if running else None,
        queued=_mean(_values(inside, "queued")), kv_cache_usage=_mean(_values(inside, "kv_cache_usage")),
        accept_length=server_accept_length(inside), accept_by_position=server_accept_by_position(inside),
        gen_tok_s=server, client_tok_s=client, token_gap=gap,
    )


NOT_REPORTED = "not reported by this server"
ACCEPT_BY_POSITION = "acceptance by draft position"
_SHOWN_TERMS = ("running", "queued", "kv_cache_usage", "generation_tokens_total")


def unreported_figures(samples: Sequence[ServerMetricsSample], server: dict[str, object],
                       accept_lengths: Sequence[float | None]) -> list[str]:
    """The figures this server version does not give, so a report can say so instead of showing a number.

    ``server`` is the run's server identity (meta.json); ``accept_lengths`` the per-step acceptance lengths
    from the records (all None: the server reports no acceptance per request).
    """
    missing: list[str] = []
    if samples:
        seen: set[str] = set().union(*(s["values"] for s in samples))
        missing += [t for t in _SHOWN_TERMS if t not in seen]
        counters = {"spec_accepted_tokens_total", "spec_verify_total"} <= seen
        if server.get("speculative") and "accept_length" not in seen and not counters:
            missing.append("accept_length (server side)")
        if server.get("speculative") and not any(t.startswith(ACCEPTED_POS_PREFIX) for t in seen):
            missing.append(ACCEPT_BY_POSITION)
    if server.get("max_running_requests") is None:
        missing.append("max_running (batch cap)")
    if server.get("speculative") and accept_lengths and all(v is None for v in accept_lengths):
        missing.append("acceptance per request")
    return missing
