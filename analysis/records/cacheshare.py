"""The share of prompt tokens a server served from its prefix cache: from the requests, else from its counters.

Two witnesses (docs/reference/protocols.md, "Cached prompt tokens"):

* **the requests** (``cached_tokens`` of each record): SGLang's ``/generate`` and llama.cpp always say it; the
  OpenAI routes of vLLM (``--enable-prompt-tokens-details``) and SGLang (``--enable-cache-report``) send
  ``usage.prompt_tokens_details`` only with the flag, and only when some tokens were cached (some vLLM releases
  send 0 as well). So an absent count means 0 on a vLLM or SGLang run whose requests showed the flag is on (some
  record carries a count), and "not reported" where nothing shows it: never a share of the subset that reported.
* **the server's counters** (server_metrics.jsonl): vLLM's prefix-cache hits over queries (in tokens, counted as
  the scheduler looks a prompt up), SGLang's cached over prompt tokens (counted as a request finishes), between the
  run's first and last samples; SGLang's ``cache_hit_rate`` gauge (its last prefill batches) where the counters lack.

The share shown and judged (``prompt_cache_mismatch``) is the requests' where they give one (they are the measured
requests exactly), else the counters'; both are kept, so a reader can set one beside the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.contract.schema import RequestRecord
from specbench.contract.server_metrics import ServerMetricsSample

# Points by which the requests' share and the server's may differ before a run is flagged: the counters also count
# what the records leave out (requests between the first sample and the first record, other clients, and on vLLM a
# preempted request looked up again).
WITNESS_GAP = 0.1

# Servers whose OpenAI routes leave prompt_tokens_details out when nothing was cached (and without the flag).
OMIT_ZERO_DETAILS = frozenset({"vllm", "sglang"})

# The counter pairs, (cached, looked up), a server's share is read from, in order of preference.
_COUNTER_PAIRS = (("prefix_cache_hits_total", "prefix_cache_queries_total"), ("cached_tokens_total",
                                                                              "prompt_tokens_total"))


@dataclass(frozen=True)
class CacheShare:
    """A run's cached-prompt share: the one shown (``share``, from ``source``) and each witness's own."""

    share: float | None
    source: str | None  # "requests", "server counters" or "server gauge"; None: not reported
    requests: float | None
    server: float | None


def cached_share(records: Sequence[RequestRecord], server_kind: str | None = None) -> float | None:
    """Cached prompt tokens / prompt tokens over the ok requests, or None when the requests do not tell.

    A request without a count is 0 only on a server known to leave zero out (``OMIT_ZERO_DETAILS``) once another
    request of the run showed that it reports counts; otherwise a run where some requests lack it has no share, and
    so has one where a count is impossible (below 0, above the prompt)."""
    ok = [r for r in records if r["status"] == "ok" and isinstance(r.get("prompt_tokens"), int)
          and int(r["prompt_tokens"] or 0) > 0]
    counted = [r for r in ok if isinstance(r.get("cached_tokens"), int)]
    if not counted or (len(counted) < len(ok) and server_kind not in OMIT_ZERO_DETAILS):
        return None
    if any(not 0 <= int(r["cached_tokens"] or 0) <= int(r["prompt_tokens"] or 0) for r in counted):
        return None  # a count no request can have: the server's counts are not averaged in
    prompt = sum(int(r["prompt_tokens"] or 0) for r in ok)
    return sum(int(r["cached_tokens"] or 0) for r in counted) / prompt


def server_cached_share(samples: Sequence[ServerMetricsSample]) -> tuple[float, str] | None:
    """The server's own share between the first and last samples that carry a counter pair, and its source."""
    for cached, looked_up in _COUNTER_PAIRS:
        having = [s for s in samples if cached in s["values"] and looked_up in s["values"]]
        if len(having) < 2:
            continue
        first, last = having[0]["values"], having[-1]["values"]
        queried = float(last[looked_up]) - float(first[looked_up])
        hits = float(last[cached]) - float(first[cached])
        if queried > 0 and 0 <= hits <= queried:  # counters that fall or hit more than they looked up: no share
            return hits / queried, "server counters"
    gauges = [float(s["values"]["cache_hit_rate"]) for s in samples if "cache_hit_rate" in s["values"]]
    gauges = [g for g in gauges if 0.0 <= g <= 1.0]
    return (sum(gauges) / len(gauges), "server gauge") if gauges else None


def witness_disagreement(cache: CacheShare) -> str | None:
    """Why the two witnesses cannot both be right, or None (one of them absent, or within ``WITNESS_GAP``)."""
    if cache.requests is None or cache.server is None or abs(cache.requests - cache.server) <= WITNESS_GAP:
        return None
    return (f"prompt tokens served from cache: {cache.requests:.0%} by the requests' counts, {cache.server:.0%} by "
            "the server's own; the share shown is the requests' (another client on the server, or counts that mean "
            "something else)")


def run_cache_share(records: Sequence[RequestRecord], samples: Sequence[ServerMetricsSample],
                    server_kind: str | None) -> CacheShare:
    """The share to show and judge: the requests' where they give one, else the server's."""
    requests = cached_share(records, server_kind)
    server = server_cached_share(samples)
    if requests is not None:
        return CacheShare(requests, "requests", requests, server[0] if server else None)
    if server is not None:
        return CacheShare(server[0], server[1], None, server[0])
    return CacheShare(None, None, None, None)
