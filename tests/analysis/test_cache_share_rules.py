"""The cached-prompt share's rules on their own (#55): when an absent count is 0, when there is no share, and how
the servers' counters, read by the suite's own /metrics parser, give one."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.analysis.records.cacheshare import cached_share, run_cache_share, server_cached_share
from specbench.contract.server_metrics import parse_metrics


def _rec(prompt: int, cached: int | None, status: str = "ok") -> Any:
    return {"status": status, "prompt_tokens": prompt, "cached_tokens": cached}


def test_an_absent_count_is_zero_only_on_a_server_known_to_leave_zero_out():
    records = [_rec(100, None), _rec(100, 90), _rec(100, None), _rec(100, 70, status="stream_error")]
    assert cached_share(records, "vllm") == pytest.approx(90 / 300)
    assert cached_share(records, "sglang") == pytest.approx(90 / 300)
    assert cached_share(records, "openai") is None  # not known: never the share of the subset that reported
    assert cached_share(records, None) is None


def test_no_count_anywhere_or_an_impossible_one_gives_no_share():
    assert cached_share([_rec(100, None), _rec(50, None)], "vllm") is None  # the flag may be off: not reported
    assert cached_share([_rec(100, 0), _rec(50, 0)], "llamacpp") == 0.0  # counts of 0 said: a share of 0
    assert cached_share([_rec(100, 20), _rec(50, 60)], "llamacpp") is None  # more cached than the prompt
    assert cached_share([_rec(100, -1), _rec(50, 0)], "sglang") is None


def _sample(t: float, text: str) -> Any:
    return parse_metrics(text, t)


def test_vllm_counters_give_the_share_and_the_new_names_count_once():
    def text(queries: float, hits: float) -> str:  # 0.10-0.11 with hidden metrics shown: both names, same counts
        return "".join(f"# TYPE vllm:{p}_{k} counter\nvllm:{p}_{k}_total{{engine=\"0\"}} {v}\n"
                       for p in ("prefix_cache", "gpu_prefix_cache") for k, v in (("queries", queries), ("hits", hits)))
    samples = [_sample(1.0, text(100, 10)), _sample(2.0, text(500, 210)), _sample(3.0, text(1100, 510))]
    assert samples[-1]["values"]["prefix_cache_queries_total"] == 1100  # once, not twice
    assert server_cached_share(samples) == (pytest.approx(500 / 1000), "server counters")


def test_sglang_counters_then_its_gauge():
    def text(prompt: float, cached: float, rate: float) -> str:  # newer SGLang: cached tokens per cache_source
        return (f"# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total {prompt}\n"
                + "# TYPE sglang:cached_tokens_total counter\n"
                + "".join(f'sglang:cached_tokens_total{{cache_source="{source}"}} {cached / 2}\n'
                          for source in ("device", "host"))
                + f"# TYPE sglang:cache_hit_rate gauge\nsglang:cache_hit_rate {rate}\n")
    samples = [_sample(1.0, text(0, 0, 0.0)), _sample(2.0, text(400, 100, 0.5))]
    assert server_cached_share(samples) == (pytest.approx(0.25), "server counters")
    gauge_only = [_sample(1.0, "# TYPE sglang:cache_hit_rate gauge\nsglang:cache_hit_rate 0.4\n"),
                  _sample(2.0, "# TYPE sglang:cache_hit_rate gauge\nsglang:cache_hit_rate 0.6\n")]
    assert server_cached_share(gauge_only) == (pytest.approx(0.5), "server gauge")


def test_counters_that_fall_give_no_share():
    def text(queries: float, hits: float) -> str:
        return (f"# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total {queries}\n"
                f"# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total {hits}\n")
    restarted = [_sample(1.0, text(1000, 500)), _sample(2.0, text(100, 10))]
    assert server_cached_share(restarted) is None


def test_the_requests_share_is_shown_where_there_is_one_else_the_counters():
    def text(queries: float, hits: float) -> str:
        return (f"# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total {queries}\n"
                f"# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total {hits}\n")
    samples = [_sample(1.0, text(0, 0)), _sample(2.0, text(200, 80))]
    both = run_cache_share([_rec(100, None), _rec(100, 90)], samples, "vllm")
    assert (both.share, both.source, both.requests, both.server) == (pytest.approx(0.45), "requests",
                                                                     pytest.approx(0.45), pytest.approx(0.4))
    counters = run_cache_share([_rec(100, None), _rec(100, None)], samples, "vllm")
    assert (counters.share, counters.source, counters.requests) == (pytest.approx(0.4), "server counters", None)
    assert run_cache_share([_rec(100, None)], [], "vllm").source is None
