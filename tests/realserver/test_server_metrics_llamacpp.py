"""Server metrics against the real llama-server: llama.cpp's names sampled, acceptance length filled, and a
server without ``--metrics`` leaves the run intact (one warning, no server_metrics.jsonl)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from specbench.analysis import load_run, summarize_run
from specbench.analysis.records.checks import SERVER_GAUGE_STALE
from specbench.contract.rundir import SERVER_METRICS_FILE
from specbench.contract.server_metrics import (
    accept_length_from_counters,
    accepted_by_position,
    read_server_metrics,
)
from tests.conftest import read_jsonl, run_locust

from .conftest import DRAFT_N_MAX, PROMPTS_SHORT
from .server import LlamaServer

pytestmark = pytest.mark.slow

MAX_TOKENS = 32
ARGS = ("--ladder", "1,4", "--max-tokens", str(MAX_TOKENS), "--min-requests", "8", "--min-step-time", "1",
        "--step-ci", "0", "--max-step-time", "60", "--prompts", str(PROMPTS_SHORT), "--server-metrics-interval", "0.2")


def test_llamacpp_series_are_sampled_and_acceptance_length_is_filled(spec_server: LlamaServer,
                                                                      tmp_path: Path) -> None:
    proc = run_locust(spec_server.url, tmp_path / "run", *ARGS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    samples, torn = read_server_metrics(tmp_path / "run" / SERVER_METRICS_FILE)
    assert torn == 0 and len(samples) >= 5
    assert {s["server"] for s in samples} == {"llamacpp"}
    first, last = samples[0]["values"], samples[-1]["values"]
    for term in ("running", "queued", "prefill_tokens_total", "generation_tokens_total", "spec_verify_total",
                 "spec_draft_tokens_total", "spec_accepted_tokens_total"):
        assert term in last, term
    assert any(k.startswith("llamacpp:n_decode_total") for k in samples[-1]["raw"])  # unmapped: kept raw
    run = load_run(tmp_path / "run")
    # The counters' rise over the run is the records' sum (the last sample is taken after the ladder drained).
    tokens = sum(r["output_tokens"] for r in run.records)
    assert last["generation_tokens_total"] - first["generation_tokens_total"] == tokens
    # llama.cpp's prompt counter leaves out the tokens it served from its cache: prompt minus cached, per request.
    computed = sum(r["prompt_tokens"] - (r["cached_tokens"] or 0) for r in run.records)
    assert last["prefill_tokens_total"] - first["prefill_tokens_total"] == computed
    assert "prompt_tokens_total" not in last  # not the figure SGLang and vLLM count
    accepted = sum(r["spec"]["accepted_drafts"] for r in run.records)
    assert last["spec_accepted_tokens_total"] - first["spec_accepted_tokens_total"] == accepted
    # Acceptance length from the records (SGLang's definition: tokens / verify passes, the prompt pass
    # not counted) equals the one the server's counters give for the same requests.
    verify = last["spec_verify_total"] - first["spec_verify_total"]
    assert verify == sum(r["output_tokens"] - r["spec"]["accepted_drafts"] - 1 for r in run.records)
    summary = summarize_run(run)
    # The running gauge is read and moves; a step whose reads contradict the client's held concurrency (a loaded
    # CI machine: llama-server answered 5 reads in a 1 s window between its slots' requests) is left out with the
    # stale-gauge warning naming it, never averaged in.
    assert max(s["values"].get("running", 0) for s in samples) >= 1
    stale = " ".join(w.message for w in summary.warnings if w.code == SERVER_GAUGE_STALE)
    for row in summary.rows:
        assert row.accept_length is not None and row.accept_length > 2  # the high-agreement draft
        assert row.server_samples > 0
        assert row.server_running is not None or row.level_text in stale, (row, stale)
    server_len = accept_length_from_counters(accepted, verify)
    assert server_len is not None and server_len == pytest.approx((tokens - len(run.records)) / verify)
    # This build also counts accepted drafts per draft position (position i only after 0..i-1): over the run the
    # positions' rises add up to the accepted drafts, never rise with the position, and each step's rates show it.
    # A position appears once some draft reached it (a fresh server lists none), so a missing one counts 0.
    before, after = accepted_by_position(first) or [], accepted_by_position(last) or []
    by_pos = [b - (before[i] if i < len(before) else 0.0) for i, b in enumerate(after)]
    assert len(by_pos) == DRAFT_N_MAX and sum(by_pos) == accepted
    assert all(later <= earlier for earlier, later in pairwise(by_pos)), by_pos
    for row in summary.rows:
        rates = row.server_accept_by_position
        assert rates is not None and len(rates) == DRAFT_N_MAX and 0 < rates[0] <= 1, row
        assert all(later <= earlier for earlier, later in pairwise(rates)), rates
        assert sum(rates) == pytest.approx(row.server_accept_length - 1)


def test_a_server_without_metrics_leaves_the_run_intact(
    llama_server_bin: Path, gguf_models: dict[str, Path], server_logs: Path, tmp_path: Path
) -> None:
    with LlamaServer(gguf_models["target"], n_parallel=4, ctx_size=8192, metrics=False, binary=llama_server_bin,
                     log_path=server_logs / "no-metrics.log") as server:
        proc = run_locust(server.url, tmp_path / "run", *ARGS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("Server metrics off for this run") == 1
    assert not (tmp_path / "run" / SERVER_METRICS_FILE).exists()
    steps = read_jsonl(tmp_path / "run" / "steps.jsonl")
    assert len(steps) == 2 and all(s["throughput_tok_s"] for s in steps)
    summary = summarize_run(load_run(tmp_path / "run"))
    assert all(r.server_samples == 0 and r.server_running is None for r in summary.rows)
