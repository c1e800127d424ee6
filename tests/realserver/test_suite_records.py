"""The suite itself against a real llama-server: its records equal what the server counted.

Each test is a real headless Locust run of locustfiles/sglang.py (as ``specbench run`` starts it) against one
of the session's tiny-target servers, on the chat and completions routes, with and without a draft.

The server's truth is its own ``/metrics`` counters (the servers run with ``--metrics``), differenced around
the run: ``llamacpp:tokens_predicted_total``, ``llamacpp:spec_decode_num_draft_tokens_total`` and
``llamacpp:spec_decode_num_accepted_tokens_total``. They are exact where replaying prompts would not be:
llama.cpp adds each request's own ``n_decoded`` / ``n_draft_total`` / ``n_draft_accepted`` (the numbers it
reports as ``timings.predicted_n`` / ``draft_n`` / ``draft_n_accepted``) when the request ends, nothing else
talks to the server during the run (the suite's identify step only sends GETs), and the ladder drains, so no
request is cut off. A replay with the stdlib client would need the draft's choices to be bit-identical under
other batch compositions, which llama.cpp does not promise. The draft-low server is used because there
acceptance is partial, so a parser that swapped or copied accepted/proposed would show.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis.records.request_metrics import verify_passes
from specbench.contract.rundir import read_run
from specbench.locustfiles.serverinfo import identify
from tests.conftest import run_locust

from .client import chat_payload, get_json, metrics, stream
from .conftest import N_PARALLEL, PROMPTS_SHORT
from .server import LlamaServer

pytestmark = pytest.mark.slow

MAX_TOKENS = 32
LOAD_ARGS = ("--ladder", "1,4,8", "--max-tokens", str(MAX_TOKENS), "--min-requests", "8",
             "--min-step-time", "1", "--step-ci", "0", "--max-step-time", "60", "--prompts", str(PROMPTS_SHORT))
PREDICTED = "llamacpp:tokens_predicted_total"
DRAFTED = "llamacpp:spec_decode_num_draft_tokens_total"
ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens_total"


def _delta(before: dict[str, float], after: dict[str, float], name: str) -> int:
    value = after.get(name, 0.0) - before.get(name, 0.0)
    assert value == int(value), (name, value)
    return int(value)


# llama-server's own per-request lines as each request ends (slot print_timing, keyed by task id): its decoded
# tokens and its draft counters, written to the server's log, not to the wire the suite reads.
_EVAL_LINE = re.compile(r"task (\d+) \|\s+eval time =\s+[\d.]+ ms /\s+(\d+) tokens")
_DRAFT_LINE = re.compile(r"task (\d+) \| draft acceptance = [\d.]+ \(\s*(\d+) accepted /\s*(\d+) generated\)")


def _logged_requests(log_text: str) -> Counter[tuple[int, int, int]]:
    """(decoded tokens, accepted drafts, proposed drafts) per request, as the server logged them."""
    decoded = {task: int(n) for task, n in _EVAL_LINE.findall(log_text)}
    drafts = {task: (int(acc), int(gen)) for task, acc, gen in _DRAFT_LINE.findall(log_text)}
    assert drafts and set(drafts) <= set(decoded), (len(drafts), len(decoded))
    return Counter((decoded[task], *counts) for task, counts in drafts.items())


def _failures(records: list[dict[str, Any]]) -> list[str]:
    return [f"{r['request_id']} C={r['target_c']}: {r['status']}: {r['error']}" for r in records if r["status"] != "ok"]


def test_identify_reads_speculation_from_slots(
    baseline_server: LlamaServer, spec_server: LlamaServer, spec_server_low: LlamaServer
) -> None:
    """kind, model, slots and speculation as /props, /v1/models and /slots give them (no request needed)."""
    for server in (baseline_server, spec_server, spec_server_low):
        ident = identify(server.url)
        _, models = get_json(server.url, "/v1/models")
        _, props = get_json(server.url, "/props")
        assert ident.kind == "llamacpp"
        assert ident.model == models["data"][0]["id"]
        assert ident.max_running_requests == props["total_slots"] == N_PARALLEL
        if server.speculative:
            assert ident.speculative is not None
            assert ident.speculative["source"] == "slots"
            assert ident.speculative["speculative_slots"] == N_PARALLEL
        else:
            assert ident.speculative is None
    # Once a slot has served a request, the speculative type is known.
    stream(spec_server.url, "/v1/chat/completions", chat_payload("Hello", 4))
    spec = identify(spec_server.url).speculative
    assert spec is not None and spec["algorithm"] == "draft-simple" and "draft-simple" in spec["types"]


def test_identify_a_loaded_but_unused_draft_is_not_speculation(
    llama_server_bin: Path, gguf_models: dict[str, Path], server_logs: Path
) -> None:
    """``-md`` without ``--spec-type`` loads the draft but never drafts: /slots says so, and so must identify."""
    draft = str(gguf_models["draft-high"])
    with LlamaServer(gguf_models["target"], n_parallel=2, ctx_size=2048, binary=llama_server_bin,
                     extra_args=["-md", draft], log_path=server_logs / "draft-unused.log") as server:
        timings = stream(server.url, "/v1/chat/completions", chat_payload("Hello", 8)).timings
        assert timings is not None and "draft_n" not in timings
        assert identify(server.url).speculative is None


@pytest.mark.parametrize(("server_name", "api"), [
    ("baseline_server", "auto"),
    ("baseline_server", "completions"),
    ("spec_server_low", "auto"),
    ("spec_server_low", "completions"),
    ("spec_server", "auto"),
])
def test_records_equal_the_servers_counters(
    request: pytest.FixtureRequest, tmp_path: Path, server_name: str, api: str
) -> None:
    server: LlamaServer = request.getfixturevalue(server_name)
    out = tmp_path / "run"
    before = metrics(server.url)
    log_start = server.log_path.stat().st_size
    proc = run_locust(server.url, out, "--api", api, *LOAD_ARGS)
    after = metrics(server.url)
    log_text = server.log_path.read_bytes()[log_start:].decode(errors="replace")
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: some request failed (checked below)
    run = read_run(out)
    records = run.records
    expected_api = "chat" if api == "auto" else api  # auto: not SGLang, so the OpenAI chat route

    # meta.json: who was measured
    assert run.meta.api == expected_api and not run.meta.partial
    server_block = run.meta.server
    _, models = get_json(server.url, "/v1/models")
    assert server_block["kind"] == "llamacpp"
    assert server_block["model"] == models["data"][0]["id"]
    assert server_block["max_running_requests"] == N_PARALLEL
    if server.speculative:
        assert server_block["speculative"] and server_block["speculative"]["source"] == "slots"
    else:
        assert server_block["speculative"] is None

    # The sums over every record equal the server's own counters.
    assert len(records) >= 3 * 8
    assert sum(r["output_tokens"] for r in records) == _delta(before, after, PREDICTED)
    specs = [r["spec"] for r in records if r["spec"] is not None]
    assert sum(s["proposed_drafts"] for s in specs) == _delta(before, after, DRAFTED)
    assert sum(s["accepted_drafts"] for s in specs) == _delta(before, after, ACCEPTED)

    # Every request succeeded, ran to max_tokens, and was counted from the server's usage.
    failures = _failures(records)
    assert not failures, f"{len(failures)} of {len(records)} requests failed, e.g. {failures[:3]}"
    assert proc.returncode == 0, proc.stderr[-3000:]
    ids = [r["server_request_id"] for r in records]
    assert all(ids) and len(set(ids)) == len(ids)  # the server's response id, one per request
    for rec in records:
        assert rec["api"] == expected_api
        assert rec["finish_reason"] == "length"
        assert rec["output_tokens"] == rec["max_tokens"] == MAX_TOKENS
        assert rec["output_tokens_source"] == "usage"
        assert rec["chunk_tokens_source"] in ("one_per_chunk", "server")
        assert list(rec["chunk_tokens"]) == list(range(1, MAX_TOKENS + 1))  # one SSE chunk per token
        assert rec["prompt_tokens"] is not None and rec["prompt_tokens"] > 0
        if server.speculative:
            spec = rec["spec"]
            assert spec is not None and spec["source"] == "timings"
            assert 0 <= spec["accepted_drafts"] <= spec["proposed_drafts"]
            assert spec["accept_rate"] == spec["accepted_drafts"] / spec["proposed_drafts"]
        else:
            assert rec["spec"] is None
    if server.speculative:
        # Per request, not only in sum: the records' counters are the ones llama.cpp logged for its requests
        # (matched as a multiset: the response id is not in the log), and so are the tokens per pass the
        # decomposition builds on them (passes = decoded - accepted - 1: the first token comes from the prompt).
        logged = _logged_requests(log_text)
        mine = Counter((r["output_tokens"], r["spec"]["accepted_drafts"], r["spec"]["proposed_drafts"])
                       for r in records)
        assert mine == logged, (mine - logged, logged - mine)
        per_pass = sorted(round((r["output_tokens"] - 1) / p, 9) for r in records if (p := verify_passes(r)))
        logged_per_pass = sorted(round((n - 1) / (n - 1 - acc), 9) for (n, acc, _), k in logged.items()
                                 for _ in range(k))
        assert len(per_pass) == len(records) and per_pass == logged_per_pass
    if server_name == "spec_server_low":  # partial acceptance: accepted and proposed really differ
        assert sum(s["accepted_drafts"] for s in specs) < 0.5 * sum(s["proposed_drafts"] for s in specs)
    elif server_name == "spec_server":
        assert all(s["accepted_drafts"] == s["proposed_drafts"] for s in specs)
