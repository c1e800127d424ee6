"""The OpenAI routes send SGLang's chunk sequences, usage variants and spec details."""

from __future__ import annotations

from specbench.emulator import start_emulator

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


def _chat(max_tokens: int = 12, **extra: object) -> dict[str, object]:
    return {"model": "default", "messages": [{"role": "user", "content": "Explain the CAP theorem."}],
            "max_tokens": max_tokens, "ignore_eos": True, "stream": True, **extra}


def test_chat_stream_role_first_deltas_then_separate_finish_chunk(base_http) -> None:
    reply = base_http.stream(CHAT, _chat(rid="chat-seq"))
    assert reply.status == 200 and reply.payloads[-1] == "[DONE]"
    events = reply.events
    assert all(e["object"] == "chat.completion.chunk" and e["id"] == "chat-seq" for e in events)
    assert all(e["model"] == "default" for e in events)
    assert events[0]["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
    content = events[1:-1]
    assert content and all(set(e["choices"][0]["delta"]) == {"reasoning_content", "content"} for e in content)
    assert all(e["choices"][0]["finish_reason"] is None and "usage" not in e for e in content)
    text = "".join(e["choices"][0]["delta"]["content"] for e in content)
    assert len(text.split()) == 12  # deltas add up to the whole answer
    last = events[-1]["choices"][0]
    assert last["delta"] == {"reasoning_content": None}
    assert last["finish_reason"] == "length" and last["matched_stop"] is None
    assert last["logprobs"] is None


def test_chat_include_usage_and_spec_details_come_last(spec_http) -> None:
    reply = spec_http.stream(CHAT, _chat(stream_options={"include_usage": True}, return_spec_tokens_details=True))
    events = reply.events
    spec_chunk, usage_chunk = events[-2], events[-1]
    assert spec_chunk["choices"] == [] and spec_chunk["usage"] is None
    details = spec_chunk["sglext"]["spec_tokens_details"]
    assert details["spec_verify_ct"] >= 1 and details["spec_accept_length"] == 12 / details["spec_verify_ct"]
    assert set(details) >= {"spec_accept_rate", "spec_num_correct_drafts", "spec_num_proposed_drafts",
                            "spec_correct_drafts_histogram", "spec_cap_length", "spec_cap_lens_histogram"}
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == 12
    assert usage["total_tokens"] == usage["prompt_tokens"] + 12
    assert usage["prompt_tokens_details"] is None and usage["reasoning_tokens"] == 0
    assert events[-3]["choices"][0]["finish_reason"] == "length"


def test_continuous_usage_is_honoured_without_include_usage(base_http) -> None:
    reply = base_http.stream(CHAT, _chat(stream_options={"continuous_usage_stats": True}))
    events = reply.events
    content = [e for e in events if e["choices"] and "content" in e["choices"][0]["delta"]
               and "role" not in e["choices"][0]["delta"]]
    counts = [e["usage"]["completion_tokens"] for e in content]
    assert counts == sorted(counts) and counts[-1] == 12
    assert all(e["choices"] for e in events)  # no separate usage chunk without include_usage


def test_completions_stream_deltas_and_finish_on_last_content_chunk(base_http) -> None:
    body = {"prompt": "Once upon a time", "max_tokens": 10, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    reply = base_http.stream(COMPLETIONS, body)
    events = reply.events
    content, usage_chunk = events[:-1], events[-1]
    assert all(e["object"] == "text_completion" for e in events)
    for event in content:
        choice = event["choices"][0]
        assert set(choice) == {"index", "text", "logprobs", "finish_reason", "matched_stop"}
        assert event["usage"]["prompt_tokens_details"] is None
    assert [e["choices"][0]["finish_reason"] for e in content] == [None] * (len(content) - 1) + ["length"]
    assert len("".join(e["choices"][0]["text"] for e in content).split()) == 10
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 4, "total_tokens": 14, "completion_tokens": 10,
                                    "reasoning_tokens": 0}


def test_completions_chunks_keep_null_usage(base_http) -> None:
    reply = base_http.stream(COMPLETIONS, {"prompt": "hi", "max_tokens": 3, "stream": True})
    assert all("usage" in e and e["usage"] is None for e in reply.events)
    assert reply.events[-1]["choices"][0]["finish_reason"] == "length"


def test_non_stream_defaults_completions_16(base_http) -> None:
    body = base_http.post(COMPLETIONS, {"prompt": "Count to three.", "ignore_eos": True}).json()
    assert body["object"] == "text_completion"
    assert body["usage"]["completion_tokens"] == 16
    assert body["choices"][0]["finish_reason"] == "length"
    assert len(body["choices"][0]["text"].split()) == 16


def test_non_stream_chat_with_meta_info_and_spec_details(spec_http) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "ignore_eos": True,
            "return_meta_info": True, "return_spec_tokens_details": True}
    reply = spec_http.post(CHAT, body).json()
    assert reply["object"] == "chat.completion"
    choice = reply["choices"][0]
    assert choice["message"]["role"] == "assistant" and len(choice["message"]["content"].split()) == 20
    assert choice["meta_info"]["spec_verify_ct"] == reply["sglext"]["spec_tokens_details"]["spec_verify_ct"]
    assert reply["usage"]["completion_tokens"] == 20


def test_chat_without_max_tokens_runs_to_the_context_limit(make_http) -> None:
    handle = start_emulator("baseline", speed=200, overrides={"context_length": 120})
    try:
        http = make_http(handle.url)
        messages = [{"role": "user", "content": "Tell me everything."}]
        body = http.post(CHAT, {"messages": messages, "ignore_eos": True}).json()
        prompt = body["usage"]["prompt_tokens"]
        assert body["usage"]["completion_tokens"] == 120 - prompt
        too_long = http.post(CHAT, {"messages": messages, "max_tokens": 500})
        assert too_long.status == 400 and too_long.json()["object"] == "error"
    finally:
        handle.stop()


def test_natural_stop_reports_matched_stop(base_http) -> None:
    reply = base_http.stream(CHAT, {"messages": [{"role": "user", "content": "What is a mutex?"}],
                                    "max_tokens": 5000, "stream": True})
    finish = reply.events[-1]["choices"][0]
    assert finish["finish_reason"] == "stop" and finish["matched_stop"] == 163586


def test_openai_errors_are_flat(base_http) -> None:
    bad = base_http.request("POST", CHAT, raw=b"[1, 2")
    assert bad.status == 400 and set(bad.json()) == {"object", "message", "type", "param", "code"}
    no_messages = base_http.post(CHAT, {"messages": []})
    assert no_messages.status == 400 and no_messages.json()["code"] == 400
    n_two = base_http.post(COMPLETIONS, {"prompt": "x", "n": 2})
    assert n_two.status == 400
    unknown = base_http.get("/v1/models/nope")
    assert unknown.status == 404 and unknown.json()["error"]["code"] == "model_not_found"
