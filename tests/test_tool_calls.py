"""Tool-calling workloads (#55): a prompt file's ``tools`` reach the server, and an answer streamed as
``delta.tool_calls`` is timed chunk for chunk as the server wrote it.

Each server (SGLang, vLLM, llama.cpp, as the emulator's vintages stream them) answers a chat request that sends
``tools`` with tool-call deltas and no ``content``; the records' per-token arrival times must equal the emulator
ledger's write times (``--ledger-chunk-times``) within the loopback hop and the client's own measured lag.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from specbench.contract.rundir import read_run
from specbench.locustfiles.dialects import ChatDialect, Sampling
from specbench.locustfiles.prompts import load_prompts
from specbench.locustfiles.promptset import PromptError
from specbench.locustfiles.streams import StreamState
from tests.conftest import FAST_LADDER, ledger, read_lag_p90_s, run_locust

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}}}}}


def _write_prompts(path: Path, tools: list | None) -> Path:
    lines = []
    for i, city in enumerate(("Paris", "Lima", "Osaka", "Accra")):
        line: dict = {"id": f"w{i}", "category": "tools", "prompt": f"What is the weather in {city} right now?"}
        if tools is not None:
            line["tools"] = tools
        lines.append(json.dumps(line))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_prompt_file_tools_are_loaded_hashed_and_sent_on_chat(tmp_path: Path) -> None:
    with_tools = load_prompts(str(_write_prompts(tmp_path / "tools.jsonl", [WEATHER])))
    without = load_prompts(str(_write_prompts(tmp_path / "plain.jsonl", None)))
    assert with_tools.prompts[0].tools == (WEATHER,)
    assert without.prompts[0].tools is None
    assert with_tools.sha256 != without.sha256, "the tools are part of what a run sent"
    body = ChatDialect().body(with_tools.prompts[0], Sampling(8, 0.0, False), model="m", server_kind="vllm",
                              rid=None)
    assert body["tools"] == [WEATHER]
    assert "tools" not in ChatDialect().body(without.prompts[0], Sampling(8, 0.0, False), model="m",
                                             server_kind="vllm", rid=None)


@pytest.mark.parametrize(("tools", "expected"), [
    ('"get_weather"', '"tools" to be a non-empty list'),
    ("[]", '"tools" to be a non-empty list'),
    ('[{"type": "function", "function": {}}]', 'tools[0]: expected {"type": "function"'),
    ('[{"type": "retrieval"}]', 'tools[0]: expected {"type": "function"'),
])
def test_bad_tools_name_file_line_and_expectation(tmp_path: Path, tools: str, expected: str) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "fine"}\n{"prompt": "x", "tools": ' + tools + "}\n", encoding="utf-8")
    with pytest.raises(PromptError) as exc:
        load_prompts(str(path))
    assert "prompts.jsonl line 2:" in str(exc.value)
    assert expected in str(exc.value)


def test_a_delta_with_only_tool_calls_is_a_chunk() -> None:
    """vLLM's shape without per-chunk usage: the tool-call deltas are the chunks, the final usage their total."""
    state = StreamState("chat")
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
              {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                                                  "function": {"name": "f", "arguments": ""}}]}}]},
              {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
                            "finish_reason": "tool_calls"}]},
              {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}]
    for t, chunk in enumerate(chunks):
        state.feed(float(t), json.dumps(chunk).encode())
    counts = state.resolve_tokens()
    assert state.chunk_times == [1.0, 2.0]
    assert (counts.chunk_tokens, counts.chunk_tokens_source) == ([1, 2], "one_per_chunk")
    assert state.finish_reason == "tool_calls"


def test_tool_call_tokens_after_text_keep_their_own_times() -> None:
    """Text, then a tool call (SGLang's shape, continuous usage): each tool-call delta is its own chunk. Read as
    before #55, both calls' tokens were credited to the text chunk's time (one chunk, the final count on it)."""
    state = StreamState("chat")
    usage = {"prompt_tokens": 5, "total_tokens": 0}
    chunks = [{"choices": [{"index": 0, "delta": {"content": "Let me check."}}],
               "usage": {**usage, "completion_tokens": 4}},
              {"choices": [{"index": 0, "delta": {"content": None, "tool_calls": [
                  {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\""}}]}}],
               "usage": {**usage, "completion_tokens": 9}},
              {"choices": [{"index": 0, "delta": {"content": None, "tool_calls": [
                  {"index": 0, "function": {"arguments": ": 1}"}}]}}], "usage": {**usage, "completion_tokens": 12}},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    for t, chunk in enumerate(chunks, start=1):
        state.feed(float(t), json.dumps(chunk).encode())
    counts = state.resolve_tokens()
    assert state.chunk_times == [1.0, 2.0, 3.0]
    assert (counts.chunk_tokens, counts.chunk_tokens_source, counts.output_tokens) == ([4, 9, 12], "server", 12)


def _token_times(starts: float, chunk_ms: list[float], cumulative: list[int]) -> list[float]:
    """Each output token's arrival (or write) time: the time of the chunk that carried it."""
    times: list[float] = []
    for ms, (before, after) in zip(chunk_ms, itertools.pairwise([0, *cumulative]), strict=True):
        times += [starts + ms / 1000.0] * (after - before)
    return times


@pytest.mark.parametrize("vintage", ["sglang-0.5.23", "vllm-0.33", "llamacpp-new"])
def test_tool_call_chunk_times_equal_the_ledgers(tmp_path: Path, emulator, vintage: str) -> None:
    emu = emulator("baseline", speed=5, extra=["--vintage", vintage, "--ledger-chunk-times"])
    prompts = _write_prompts(tmp_path / "tools.jsonl", [WEATHER])
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--api", "chat", "--prompts", str(prompts), "--ladder", "2", "--max-tokens",
                      "24", "--min-requests", "6", *FAST_LADDER)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = read_run(out)
    truth = {e["rid"]: e for e in ledger(emu.url) if e["route"] == "/v1/chat/completions"}
    itls = sorted((e["finished_s"] - e["first_token_s"]) / (e["completion_tokens"] - 1) for e in truth.values()
                  if e["completion_tokens"] > 1)
    read_lag_s = max((read_lag_p90_s(step) for step in run.steps), default=0.0)
    bound = max(0.005, 0.5 * itls[len(itls) // 2]) + read_lag_s
    ttft_diffs: list[float] = []
    assert len(run.records) >= 6
    for rec in run.records:
        assert rec["status"] == "ok", rec["error"]
        server = truth[rec["server_request_id"]]
        assert rec["output_tokens"] == server["completion_tokens"] > 0
        assert rec["finish_reason"] in ("tool_calls", "length")
        sent = _token_times(server["arrival_s"], server["chunk_ms"], list(itertools.accumulate(
            server["tokens_per_chunk"])))
        seen = _token_times(rec["start_s"], rec["chunk_ms"], rec["chunk_tokens"])
        assert len(seen) == len(sent), (rec["chunk_tokens"], server["tokens_per_chunk"])
        # Each token arrives after it was written, by a loopback hop plus the client's lag; a token credited to
        # a neighbouring chunk is off by a token interval or more.
        diffs = [s - w for s, w in zip(seen, sent, strict=True)]
        assert min(diffs) > -0.002, ("a token seen before the server wrote it", diffs)
        assert sorted(diffs)[len(diffs) // 2] < bound, (bound, diffs)
        ttft_diffs.append(rec["ttft_s"] - (server["first_token_s"] - rec["start_s"]))
    ttft_diffs.sort()
    assert abs(ttft_diffs[len(ttft_diffs) // 2]) < bound, (bound, ttft_diffs)
