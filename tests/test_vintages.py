"""Every emulated server version x every API it serves: the suite reads the same truth from each wire format.

One short real Locust run per pair (ladder 1,4 against a cap of 3, so C=4 queues one request; a few requests
abort gracefully or with an in-stream error, in the release's own shape). Against the emulator's ledger:

* every ok record's output tokens, and its acceptance where the release reports it per request, equal the
  ledger's (matched by the response id); where the release does not report acceptance the record says so
  (``spec`` is None, never zeros);
* every request the server aborted, or broke with an error event or chunk, is a ``stream_error`` whose
  message reached the record; no aborted request is counted as a success;
* every running and queued figure the suite sampled is exactly what the server showed while the suite read
  ``/metrics`` (the emulator logs each gauge refresh: ``/_emulator/gauges``), the table's figures are the means
  of those samples, and the counters of ``/metrics`` read by the suite's parser equal the ledger's sums
  exactly: whether the release writes priority series, duplicated TP ranks, DP ranks or several engines. (The
  gauges against the ledger's batch, a time average that needs long windows, are tests/test_server_metrics.py's.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from specbench.analysis import load_run, render_summary_table, summarize_run
from specbench.contract.server_metrics import accepted_by_position, parse_metrics
from specbench.emulator.vintage import VINTAGES
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import FAST_LADDER, ledger, run_locust

pytestmark = pytest.mark.slow

CAP = 3
MAX_TOKENS = 32
ARGS = ("--ladder", "1,4", "--max-tokens", str(MAX_TOKENS), "--min-requests", "12",
        "--server-metrics-interval", "0.05", *FAST_LADDER)
CASES = [(name, api) for name, v in VINTAGES.items() for api in v.apis]
NORMAL = ("length", "stop")


def _run(tmp_path: Path, vintage: str, api: str) -> tuple[Path, list[dict[str, Any]], str, list[list[float]]]:
    profile = tmp_path / "profile.yaml"
    profile.write_text(f"base: eagle3\nvintage: {vintage}\nmax_running_requests: {CAP}\nmetrics_interval_steps: 1\n"
                       "faults: {seed: 3, abort: 0.06, stream_error: 0.06}\n", encoding="utf-8")
    emu = start_emulator_process(str(profile), speed=10)
    try:
        proc = run_locust(emu.url, tmp_path / "run", "--api", api, *ARGS)
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        truth = ledger(emu.url)
        metrics = requests.get(emu.url + "/metrics", timeout=10).text
        gauges = requests.get(emu.url + "/_emulator/gauges", timeout=10).json()
    finally:
        emu.stop()
    return tmp_path / "run", truth, metrics, gauges


def _shown(gauges: list[list[float]], t0: float, t1: float) -> tuple[set[float], set[float]]:
    """Running and waiting values the server showed at some instant of [t0, t1]: the one in force at t0 and
    every refresh after it up to t1."""
    before = [g for g in gauges if g[0] <= t0]
    during = [g for g in gauges if t0 < g[0] <= t1]
    shown = ([before[-1]] if before else []) + during
    return {g[1] for g in shown}, {g[2] for g in shown}


@pytest.mark.parametrize(("vintage", "api"), CASES, ids=[f"{v}-{a}" for v, a in CASES])
def test_every_vintage_reads_the_same_truth(vintage: str, api: str, tmp_path: Path) -> None:
    wire = VINTAGES[vintage]
    run_dir, truth, metrics, gauges = _run(tmp_path, vintage, api)
    run = load_run(run_dir)
    by_rid = {e["rid"]: e for e in truth}
    records = [r for r in run.records if r["status"] != "cancelled"]
    ok = [r for r in records if r["status"] == "ok"]
    assert len(ok) >= 20
    for r in ok:
        entry = by_rid[r["server_request_id"]]
        assert entry["finish_reason"] in NORMAL and r["output_tokens"] == entry["completion_tokens"]
        _check_acceptance(wire.name, api, r["spec"], entry["spec"])
    aborted = [e for e in truth if e["fault"] in ("abort", "stream_error") and e["rid"] in
               {r["server_request_id"] for r in records}]
    assert aborted, "the faults must have struck"
    failed = {r["server_request_id"]: r for r in records if r["status"] != "ok"}
    for e in aborted:
        rec = failed[e["rid"]]
        assert rec["status"] == "stream_error" and rec["error"], rec
        if e["fault"] == "stream_error" or wire.server == "llamacpp":
            assert "emulated fault" in rec["error"]
    assert {r["server_request_id"] for r in ok} == {e["rid"] for e in truth if e["finish_reason"] in NORMAL} - {
        r["server_request_id"] for r in run.records if r["status"] == "cancelled"}
    _check_server_side(run, gauges)
    _check_counters(metrics, truth, wire.server)
    _check_unreported(run, wire.name, api)


def _check_unreported(run: Any, vintage: str, api: str) -> None:
    """What the version lacks, the report names as not reported (never a 0 in its place)."""
    wire = VINTAGES[vintage]
    text = render_summary_table(summarize_run(run))
    lines = [ln for ln in text.splitlines() if ln.startswith("Not reported by this server: ")]
    missing = lines[0].split(": ", 1)[1].split(", ") if lines else []
    no_request_spec = (wire.server == "vllm" and not wire.request_spec_metrics) or (
        wire.server == "sglang" and api != "generate" and not _sglext_spec(wire))
    assert ("acceptance per request" in missing) == no_request_spec, text
    assert ("max_running (batch cap)" in missing) == (wire.server == "vllm"), text
    assert ("kv_cache_usage" in missing) == (wire.server == "llamacpp" and wire.kv_metric is None), text
    per_position = {"vllm": wire.num_drafts_counter, "llamacpp": wire.spec_counters}.get(wire.server, False)
    assert ("acceptance by draft position" in missing) != per_position, text


def _sglext_spec(wire: Any) -> bool:
    """SGLang's OpenAI routes carry per-request figures (``sglext.spec_tokens_details``): not in 0.4 (verify count
    only) nor in 0.5.9 (its ``SglExt`` has no such field; read in the 0.5.9 wheel, #55)."""
    return bool(wire.sglext and wire.spec_names > 1)


def _check_acceptance(vintage: str, api: str, spec: dict[str, Any] | None, true: dict[str, Any]) -> None:
    wire = VINTAGES[vintage]
    reported = {"sglang": _sglext_spec(wire) or api == "generate", "vllm": wire.request_spec_metrics,
                "llamacpp": True}[wire.server]
    if not reported:
        assert spec is None  # not reported by this server: never a made-up figure
        return
    assert spec is not None
    if wire.sglext_zero_fill and api != "generate":  # the draft counts the build left out read "not reported" (#55)
        assert (spec["accepted_drafts"], spec["proposed_drafts"]) == (None, None)
        assert spec["verify_ct"] == true["spec_verify_ct"]
        assert spec["accept_length"] == pytest.approx(true["spec_accept_length"])
        return
    if wire.server == "sglang" and wire.spec_names == 1:  # verify passes only; the length follows from them
        assert spec["verify_ct"] == true["spec_verify_ct"] and spec["accepted_drafts"] is None
        assert spec["accept_length"] == pytest.approx(true["spec_accept_length"])
        return
    assert (spec["accepted_drafts"], spec["proposed_drafts"]) == (true["spec_num_correct_drafts"],
                                                                  true["spec_num_proposed_drafts"])
    assert spec["accept_rate"] == pytest.approx(true["spec_accept_rate"])


def _check_server_side(run: Any, gauges: list[list[float]]) -> None:
    summary = summarize_run(run)
    assert len(summary.rows) == 2
    for row in summary.rows:
        inside = [s for s in run.server_samples if row.window_start_s <= s["t_s"] <= row.window_end_s]
        assert len(inside) >= 10 and row.server_running is not None and row.server_queued is not None
        for s in inside:  # the server rendered /metrics at one instant between the GET and its whole answer
            half = s["read_s"] / 2
            running, waiting = _shown(gauges, s["t_s"] - half, s["t_s"] + half)
            values = s["values"]
            assert any(values["running"] == pytest.approx(v, abs=1e-9) for v in running), (row.target_c, s, running)
            assert any(values["queued"] == pytest.approx(v, abs=1e-9) for v in waiting), (row.target_c, s, waiting)
        assert row.server_running == pytest.approx(sum(s["values"]["running"] for s in inside) / len(inside))
        assert row.server_queued == pytest.approx(sum(s["values"]["queued"] for s in inside) / len(inside))
        assert row.server_running_max <= CAP
        if row.target_c == 4:  # the log is no constant: four users against a cap of three fill the batch
            assert max(s["values"]["running"] for s in inside) == CAP


def _check_counters(text: str, truth: list[dict[str, Any]], server: str) -> None:
    values = parse_metrics(text, 0.0)["values"]
    done = [e for e in truth if e["status"] == 200]
    assert values["generation_tokens_total"] == sum(e["completion_tokens"] for e in done)
    if server == "llamacpp":
        assert values["prefill_tokens_total"] == sum(e["prompt_tokens"] - e["cached_tokens"] for e in done)
    else:
        assert values["prompt_tokens_total"] == sum(e["prompt_tokens"] for e in done)
    if server != "sglang" and "spec_accepted_tokens_total" in values:
        assert values["spec_accepted_tokens_total"] == sum(e["spec"]["spec_num_correct_drafts"] for e in done
                                                           if e["spec"])
    if "spec_verify_total" in values:
        assert values["spec_verify_total"] == sum(e["spec"]["spec_verify_ct"] for e in truth if e["spec"])
    # Accepted per draft position (vLLM with the drafts counter, newer llama.cpp): a pass that accepted a drafts
    # counted at positions 0..a-1, summed over engines.
    exported = accepted_by_position(values)
    assert (exported is not None) == (server != "sglang" and "spec_verify_total" in values)
    if exported is not None:
        hists = [e["spec"]["spec_correct_drafts_histogram"] for e in done if e["spec"]]
        assert exported == [sum(sum(h[i + 1:]) for h in hists) for i in range(len(exported))]
        assert len(exported) == len(hists[0]) - 1


def test_sglext_spec_details_only_from_the_releases_that_send_them(tmp_path: Path) -> None:
    """SGLang 0.5.9's ``SglExt`` has no ``spec_tokens_details`` (read in its wheel, #55): its OpenAI routes carry no
    per-request speculation, while 0.5.23 answers ``return_spec_tokens_details``."""
    body = {"model": "m", "messages": [{"role": "user", "content": "Name three rivers."}], "max_tokens": 16,
            "stream": True, "return_spec_tokens_details": True}
    for vintage, sends in (("sglang-0.5.9", False), ("sglang-0.5.23", True)):
        profile = tmp_path / f"{vintage}.yaml"
        profile.write_text(f"base: eagle3\nvintage: {vintage}\n", encoding="utf-8")
        emu = start_emulator_process(str(profile), speed=20)
        try:
            text = requests.post(emu.url + "/v1/chat/completions", json=body, timeout=30).text
        finally:
            emu.stop()
        assert ("spec_tokens_details" in text) == sends, (vintage, text[-500:])
