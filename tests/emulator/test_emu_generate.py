"""Native /generate speaks SGLang's wire format: cumulative text, object finish_reason, spec fields."""

from __future__ import annotations

import itertools

from specbench.emulator import EmulatorHandle


def test_stream_text_is_cumulative_and_counts_are_cumulative(base_http, baseline: EmulatorHandle) -> None:
    reply = base_http.stream("/generate", {"text": "Why is the sky blue?", "rid": "gen-cum",
                                           "sampling_params": {"max_new_tokens": 20, "ignore_eos": True},
                                           "stream": True})
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    assert reply.payloads[-1] == "[DONE]"
    events = reply.events
    texts = [e["text"] for e in events]
    for earlier, later in itertools.pairwise(texts):
        assert later.startswith(earlier) and len(later) > len(earlier)
    counts = [e["meta_info"]["completion_tokens"] for e in events]
    assert counts == sorted(counts) and counts[-1] == 20
    assert [len(e["output_ids"]) for e in events] == counts
    assert len(texts[-1].split()) == 20  # one word per token
    for event in events:
        meta = event["meta_info"]
        assert meta["id"] == "gen-cum"
        assert meta["prompt_tokens"] == 5  # ceil(20 chars / 4)
        assert meta["cached_tokens"] == 0
    assert "response_sent_to_client_ts" in events[0]["meta_info"]
    assert all(e["meta_info"]["finish_reason"] is None for e in events[:-1])
    assert all("e2e_latency" not in e["meta_info"] for e in events[:-1])
    final = events[-1]["meta_info"]
    assert final["finish_reason"] == {"type": "length", "length": 20}
    assert final["e2e_latency"] > 0
    assert "spec_verify_ct" not in final  # no speculation on the baseline
    record = baseline.ledger.find("gen-cum")
    assert record is not None and record["completion_tokens"] == 20
    assert record["tokens_per_chunk"] == [b - a for a, b in zip([0, *counts], counts, strict=False)]


def test_non_stream_body_and_default_max_new_tokens(base_http) -> None:
    reply = base_http.post("/generate", {"text": "Explain entropy.", "sampling_params": {"ignore_eos": True}})
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert body["meta_info"]["completion_tokens"] == 128
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 128}
    assert len(body["output_ids"]) == 128
    assert len(body["meta_info"]["id"]) == 32  # uuid4 hex when no rid is sent


def test_without_ignore_eos_answer_stops_at_its_natural_length(base_http) -> None:
    body = {"text": "What is a mutex?", "sampling_params": {"max_new_tokens": 4000}}
    first = base_http.post("/generate", body).json()["meta_info"]
    second = base_http.post("/generate", body).json()["meta_info"]
    assert first["finish_reason"] == {"type": "stop", "matched": 163586}
    assert 64 <= first["completion_tokens"] <= 1024
    assert second["completion_tokens"] == first["completion_tokens"]
    capped = base_http.post("/generate", {"text": "What is a mutex?", "sampling_params": {"max_new_tokens": 8}})
    assert capped.json()["meta_info"]["finish_reason"] == {"type": "length", "length": 8}


def test_speculative_final_chunk_carries_spec_figures(spec_http, eagle3: EmulatorHandle) -> None:
    reply = spec_http.stream("/generate", {"text": "Write a haiku about batching.", "rid": "gen-spec",
                                           "sampling_params": {"max_new_tokens": 64, "ignore_eos": True},
                                           "stream": True})
    events = reply.events
    final = events[-1]["meta_info"]
    steps = final["spec_verify_ct"]
    assert final["completion_tokens"] == 64
    assert final["spec_accept_length"] == 64 / steps
    assert final["spec_num_proposed_drafts"] == steps * 3
    assert final["spec_accept_rate"] == final["spec_num_correct_drafts"] / final["spec_num_proposed_drafts"]
    histogram = final["spec_correct_drafts_histogram"]
    assert len(histogram) == 4 and sum(histogram) == steps
    assert sum(k * n for k, n in enumerate(histogram)) == final["spec_num_correct_drafts"]
    assert all("spec_verify_ct" not in e["meta_info"] for e in events[:-1])
    deltas = [b["meta_info"]["completion_tokens"] - a["meta_info"]["completion_tokens"]
              for a, b in itertools.pairwise(events)]
    assert max(deltas) > 1  # several tokens per chunk, as on a real speculative server
    record = eagle3.ledger.find("gen-spec")
    assert record["spec"]["spec_verify_ct"] == steps
    assert sum(record["tokens_per_step"]) == 64 and record["tokens_per_step"][0] == 1


def test_same_prompt_is_reproducible_across_servers(make_http) -> None:
    from specbench.emulator import start_emulator

    outputs = []
    for _ in range(2):
        handle = start_emulator("eagle3", speed=100)
        try:
            body = make_http(handle.url).post("/generate", {"text": "Same prompt", "sampling_params": {
                "max_new_tokens": 40, "ignore_eos": True}}).json()
            outputs.append((body["text"], body["meta_info"]["spec_correct_drafts_histogram"]))
        finally:
            handle.stop()
    assert outputs[0] == outputs[1]


def test_input_ids_and_put_are_accepted(base_http) -> None:
    reply = base_http.request("PUT", "/generate", {"input_ids": [1, 2, 3, 4, 5], "sampling_params": {
        "max_new_tokens": 3}})
    assert reply.status == 200
    assert reply.json()["meta_info"]["prompt_tokens"] == 5


def test_errors_have_sglang_shapes(base_http) -> None:
    bad_json = base_http.request("POST", "/generate", raw=b"{not json")
    assert bad_json.status == 400
    assert bad_json.json() == {"object": "error", "message": "Invalid JSON body", "type": "Bad Request",
                               "param": None, "code": 400}
    missing = base_http.post("/generate", {"sampling_params": {}})
    assert missing.status == 400 and isinstance(missing.json()["error"], str)
    wrong_type = base_http.post("/generate", {"text": "x", "sampling_params": {"max_new_tokens": "many"}})
    assert wrong_type.status == 400 and wrong_type.json()["code"] == 400
    too_long = base_http.post("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 10**7}})
    assert too_long.status == 400
    assert "context length" in too_long.json()["error"]["message"]
    assert base_http.get("/generate").status == 405
    assert base_http.get("/nope").json() == {"detail": "Not Found"}
