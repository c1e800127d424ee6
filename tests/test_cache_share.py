"""Cached prompt tokens and zero-filled speculation as real servers send them (#55), against emulator vintages.

* vLLM with ``--enable-prompt-tokens-details`` (and SGLang with ``--enable-cache-report``) leaves
  ``prompt_tokens_details`` out when nothing was cached: an absent count is 0 there, so a fresh server's share is
  its true share, not the share of the requests that hit, and ``prompt_cache_mismatch`` fires against a reused one;
* a server's prefix-cache counters give the share where the requests say nothing (a default vLLM server), and
  agree with the emulator's ledger where both exist;
* older llama.cpp builds put ``timings.cache_n`` in the chunk whose ``usage`` has no details;
* SGLang's OpenAI routes zero-fill ``sglext``: a count the build did not populate is not reported, never 0.

Each run sends a small prompt file twice over or more, so repeats are cache hits (the emulator's prefix cache
serves an exact repeat) and first sends are misses.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis import load_run, summarize_run
from specbench.analysis.records.cacheshare import cached_share
from specbench.analysis.records.checks import CACHE_WITNESSES_DISAGREE, PROMPT_CACHE_MISMATCH
from specbench.analysis.verdicts.pair_checks import pair_warnings
from tests.conftest import ledger, run_locust

pytestmark = pytest.mark.slow

PROMPTS = 40
ARGS = ("--ladder", "2", "--max-tokens", "8", "--min-requests", "40", "--min-step-time", "1", "--max-step-time",
        "30", "--step-ci", "0", "--server-metrics-interval", "0.1")


def _prompts(tmp_path: Path) -> Path:
    """Prompts that share no leading block, so only an exact repeat is a cache hit."""
    path = tmp_path / "prompts.jsonl"
    rows = [{"id": f"p{i}", "prompt": f"{i:03d} " + f"Question {i}: describe the number {i} in a few words. " * 6}
            for i in range(PROMPTS)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(url: str, out: Path, prompts: Path, api: str = "chat") -> Any:
    proc = run_locust(url, out, "--api", api, "--prompts", str(prompts), *ARGS, timeout=150)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return load_run(out)


def _ledger_share(entries: list[dict[str, Any]]) -> float:
    return sum(e["cached_tokens"] for e in entries) / sum(e["prompt_tokens"] for e in entries)


def _ok_truth(run: Any, url: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    by_rid = {e["rid"]: e for e in ledger(url)}
    ok = [r for r in run.records if r["status"] == "ok"]
    assert len(ok) >= 30
    return ok, by_rid


def test_a_fresh_server_that_leaves_zero_out_shows_its_true_share_and_a_reused_one_is_flagged(tmp_path, emulator):
    """Fails before #55: the fresh server's share was taken over the requests that hit (~99%), like the reused one's."""
    prompts = _prompts(tmp_path)
    fresh = emulator("baseline", speed=2, extra=["--vintage", "vllm-details-nonzero", "--prefix-cache"])
    fresh_run = _run(fresh.url, tmp_path / "fresh", prompts)
    ok, truth = _ok_truth(fresh_run, fresh.url)
    assert fresh_run.meta.server["kind"] == "vllm"
    # misses carry no count at all (vLLM's truth test), hits carry theirs
    assert {r["cached_tokens"] is None for r in ok} == {True, False}
    for r in ok:
        true = truth[r["server_request_id"]]["cached_tokens"]
        assert r["cached_tokens"] == (true or None)
    entries = [truth[r["server_request_id"]] for r in ok]
    assert cached_share(fresh_run.records, "vllm") == pytest.approx(_ledger_share(entries))
    assert cached_share(fresh_run.records, None) is None  # a server not known to leave zero out: no share of a subset

    reused = emulator("baseline", speed=2, extra=["--vintage", "vllm-details-nonzero", "--prefix-cache"])
    _run(reused.url, tmp_path / "warm", prompts)
    reused_run = _run(reused.url, tmp_path / "reused", prompts)
    base, spec = summarize_run(fresh_run), summarize_run(reused_run)
    assert base.cache is not None and base.cache.source == "requests"
    assert base.cached_share is not None and spec.cached_share is not None
    assert base.cached_share < 0.75 and spec.cached_share > 0.95, (base.cached_share, spec.cached_share)
    assert PROMPT_CACHE_MISMATCH in {w.code for w in pair_warnings(base, spec)}


def _window_share(entries: list[dict[str, Any]], samples: list[Any]) -> float:
    """The ledger's share over the requests the server counted between the run's first and last samples."""
    t0, t1 = samples[0]["t_s"], samples[-1]["t_s"]
    inside = [e for e in entries if e["status"] == 200 and t0 < e["finished_s"] <= t1]
    assert len(inside) >= 30
    return _ledger_share(inside)


@pytest.mark.parametrize("vintage", ["vllm-0.33-nometrics", "vllm-0.8", "sglang-0.5.23"])
def test_the_servers_prefix_cache_counters_give_the_ledgers_share(tmp_path, emulator, vintage):
    """Fails before #55: the counters were not read, and a default vLLM server's share read "not reported"."""
    emu = emulator("baseline", speed=2, extra=["--vintage", vintage, "--prefix-cache"])
    run = _run(emu.url, tmp_path / "run", _prompts(tmp_path))
    ok, truth = _ok_truth(run, emu.url)
    summary = summarize_run(run)
    cache = summary.cache
    assert cache is not None and cache.server is not None
    true = _window_share(list(truth.values()), run.server_samples)
    assert 0.05 < true < 0.95  # misses and hits both: a share that can be wrong either way
    assert cache.server == pytest.approx(true, abs=0.01)
    if vintage.startswith("vllm"):  # a default vLLM server says nothing per request: the counters are the share
        assert all(r["cached_tokens"] is None for r in ok)
        assert (cache.source, cache.requests, summary.cached_share) == ("server counters", None, cache.server)
        fresh = summarize_run(run, name="fresh")
        fresh = replace(fresh, cached_share=0.0, cache=replace(cache, share=0.0, source="requests"))
        found = [w.message for w in pair_warnings(fresh, summary) if w.code == PROMPT_CACHE_MISMATCH]
        assert found and f"on {summary.name} (its server counters)" in found[0], found
    else:  # both witnesses: the requests' share is shown, the counters agree with it
        assert cache.source == "requests" and summary.cached_share == cache.requests
        assert cache.requests == pytest.approx(_ledger_share([truth[r["server_request_id"]] for r in ok]))
        assert cache.server == pytest.approx(cache.requests, abs=0.02)
        assert CACHE_WITNESSES_DISAGREE not in {w.code for w in summary.warnings}


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_older_llamacpp_cache_n_beside_usage_is_read(tmp_path, emulator, api):
    """Fails before #55: usage set prompt_tokens first, and cache_n in the same chunk was ignored (None)."""
    emu = emulator("baseline", speed=2, extra=["--vintage", "llamacpp-old", "--prefix-cache"])
    run = _run(emu.url, tmp_path / "run", _prompts(tmp_path), api)
    ok, truth = _ok_truth(run, emu.url)
    assert all(r["cached_tokens"] == truth[r["server_request_id"]]["cached_tokens"] for r in ok)
    assert any(r["cached_tokens"] for r in ok) and any(r["cached_tokens"] == 0 for r in ok)


def test_a_zero_filled_sglext_reads_not_reported(tmp_path, emulator):
    """Fails before #55: the zero-filled draft counts were read as "proposed 0, accepted 0"."""
    emu = emulator("eagle3", speed=2, extra=["--vintage", "sglang-sglext-zeros"])
    run = _run(emu.url, tmp_path / "run", _prompts(tmp_path))
    ok, truth = _ok_truth(run, emu.url)
    for r in ok:
        true = truth[r["server_request_id"]]["spec"]
        spec = r["spec"]
        assert spec is not None and spec["source"] == "sglext"
        assert true["spec_num_proposed_drafts"] > 0  # the server did draft: the zeros were fill, not figures
        assert (spec["accepted_drafts"], spec["proposed_drafts"]) == (None, None)
        assert spec["verify_ct"] == true["spec_verify_ct"]
        assert spec["accept_length"] == pytest.approx(true["spec_accept_length"])
