"""Stream parsing: SSE framing and the SGLang, vLLM and llama.cpp chunk sequences (facts in docs/protocols.md)."""

from __future__ import annotations

import json

import pytest

from specbench.contract.receiveclock import wall_offset
from specbench.locustfiles.sse import EventReader, SSESplitter, iter_events
from specbench.locustfiles.streams import StreamState


def feed_all(api: str, payloads: list[object], t0: float = 0.0, dt: float = 0.01) -> StreamState:
    state = StreamState(api, keep_text=True)
    for i, p in enumerate(payloads):
        raw = p if isinstance(p, bytes) else json.dumps(p).encode()
        state.feed(t0 + i * dt, raw)
    return state


# -- SSE framing ---------------------------------------------------------------------------------------------


def test_splitter_handles_events_split_across_reads_and_skips_comments():
    s = SSESplitter()
    assert s.feed(b": ping\n\ndata: {\"a\"") == []
    assert s.feed(b": 1}\n") == []
    assert s.feed(b"\n") == [b'{"a": 1}']
    assert s.feed(b"event: x\r\ndata: one\r\ndata: two\r\n\r\ndata: [DONE]\n\n") == [b"one\ntwo", b"[DONE]"]


def test_event_time_is_when_its_last_byte_arrived_not_when_a_buffer_filled():
    blocks = iter([b"data: first\n\n", b"data: sec", b"ond\n\n", b""])
    clock = iter([1.0, 2.0, 3.0, 4.0])
    events = list(iter_events(lambda: next(blocks), clock=lambda: next(clock)))
    assert events == [(1.0, b"first"), (3.0, b"second")]


def test_event_without_trailing_blank_line_is_delivered_at_eof():
    blocks = iter([b"data: {\"stop\": true}", b""])
    assert [p for _, p in iter_events(lambda: next(blocks))] == [b'{"stop": true}']


# -- SGLang native /generate -----------------------------------------------------------------------------------


def sglang_generate_stream(spec: bool) -> list[object]:
    final_meta = {"id": "r1", "finish_reason": {"type": "length", "length": 7}, "prompt_tokens": 12,
                  "completion_tokens": 7, "cached_tokens": 4, "e2e_latency": 0.5}
    if spec:
        final_meta.update(spec_accept_rate=0.5, spec_accept_length=2.33, spec_num_correct_drafts=3,
                          spec_num_proposed_drafts=6, spec_verify_ct=3)
    return [
        {"text": "A", "output_ids": [1], "meta_info": {"id": "r1", "finish_reason": None, "prompt_tokens": 12,
                                                       "completion_tokens": 1, "cached_tokens": 4}},
        {"text": "A B C", "output_ids": [1, 2, 3],
         "meta_info": {"id": "r1", "finish_reason": None, "completion_tokens": 3}},
        {"text": "A B C D E F G", "output_ids": list(range(7)), "meta_info": final_meta},
        b"[DONE]",
    ]


def test_generate_counts_multi_token_chunks_from_meta_info():
    st = feed_all("generate", sglang_generate_stream(spec=True))
    counts = st.resolve_tokens()
    assert counts.chunk_tokens == [1, 3, 7]
    assert (counts.output_tokens, counts.output_tokens_source, counts.chunk_tokens_source) == (7, "meta_info",
                                                                                              "server")
    assert st.done and st.finish_reason == "length"
    assert (st.prompt_tokens, st.cached_tokens, st.server_request_id) == (12, 4, "r1")
    assert st.spec is not None and st.spec["verify_ct"] == 3 and st.spec["accepted_drafts"] == 3
    assert st.spec["accept_length"] == 2.33 and st.spec["source"] == "meta_info"


def test_generate_coalesced_chunk_with_no_new_tokens_is_not_a_chunk():
    payloads = sglang_generate_stream(spec=False)
    payloads.insert(2, payloads[1])  # the same cumulative state twice
    st = feed_all("generate", payloads)
    assert st.resolve_tokens().chunk_tokens == [1, 3, 7]
    assert st.spec is None


def test_generate_abort_finish_is_an_error_and_stream_error_payload_is_caught():
    st = feed_all("generate", [
        {"text": "", "meta_info": {"id": "x", "completion_tokens": 0,
                                   "finish_reason": {"type": "abort", "status_code": 503,
                                                     "message": "The request queue is full."}}},
        b"[DONE]"])
    assert st.finish_reason == "abort" and "queue is full" in (st.error or "") and st.error_code == 503
    st2 = feed_all("generate", [{"error": {"message": "bad", "type": "invalid_request_error", "code": 400}},
                                b"[DONE]"])
    assert st2.error == "bad" and st2.error_code == 400


def test_malformed_payload_is_remembered():
    st = feed_all("generate", [b"{not json", b"[DONE]"])
    assert st.malformed == "{not json"


# -- SGLang OpenAI routes --------------------------------------------------------------------------------------


def test_sglang_chat_with_continuous_usage_spec_details_and_usage_chunk():
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta, finish=None, usage=None):
        d = {**base, "choices": [{"index": 0, "delta": {"reasoning_content": None, **delta}, "logprobs": None,
                                  "finish_reason": finish, "matched_stop": None}]}
        if usage is not None:
            d["usage"] = usage
        return d

    payloads = [
        chunk({"role": "assistant", "content": ""}, usage={"prompt_tokens": 9, "completion_tokens": 0}),
        chunk({"content": " one two"}, usage={"prompt_tokens": 9, "completion_tokens": 2}),
        chunk({"content": " three four five"}, usage={"prompt_tokens": 9, "completion_tokens": 5}),
        chunk({}, finish="length"),
        {**base, "choices": [], "usage": None,
         "sglext": {"spec_tokens_details": {"spec_accept_rate": 0.4, "spec_accept_length": 2.5,
                                            "spec_num_correct_drafts": 3, "spec_num_proposed_drafts": 6,
                                            "spec_verify_ct": 2}}},
        {**base, "choices": [], "usage": {"prompt_tokens": 9, "total_tokens": 14, "completion_tokens": 5}},
        b"[DONE]",
    ]
    st = feed_all("chat", payloads)
    counts = st.resolve_tokens()
    assert counts.chunk_tokens == [2, 5] and counts.chunk_tokens_source == "server"
    assert counts.output_tokens == 5 and counts.output_tokens_source == "usage"
    assert st.finish_reason == "length" and st.done
    assert st.spec is not None and st.spec["source"] == "sglext" and st.spec["verify_ct"] == 2


def test_sglang_zero_spec_details_from_a_non_speculating_server_mean_no_speculation():
    zeros = {"spec_accept_rate": 0.0, "spec_accept_length": 0.0, "spec_num_correct_drafts": 0,
             "spec_num_proposed_drafts": 0, "spec_verify_ct": 0}
    st = feed_all("chat", [{"id": "c", "choices": [], "sglext": {"spec_tokens_details": zeros}}, b"[DONE]"])
    assert st.spec is None


def test_sglang_completions_without_continuous_usage_spreads_final_usage():
    base = {"id": "k", "object": "text_completion", "created": 1, "model": "m", "usage": None}
    payloads = [
        {**base, "choices": [{"index": 0, "text": " a b", "logprobs": None, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "text": " c", "logprobs": None, "finish_reason": "length",
                              "matched_stop": None}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 3, "total_tokens": 7, "completion_tokens": 4}},
        b"[DONE]",
    ]
    counts = feed_all("completions", payloads).resolve_tokens()
    assert counts.output_tokens == 4 and counts.output_tokens_source == "usage"
    assert counts.chunk_tokens_source == "interpolated" and counts.chunk_tokens == [2, 4]


# -- vLLM ------------------------------------------------------------------------------------------------------


def test_vllm_chat_final_delta_and_finish_in_one_chunk_with_token_ids_and_spec_metrics():
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    payloads = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                              "finish_reason": None}], "usage": {"prompt_tokens": 5, "completion_tokens": 0,
                                                                  "total_tokens": 5}},
        {**base, "choices": [{"index": 0, "delta": {"content": "x y"}, "logprobs": None, "finish_reason": None,
                              "token_ids": [7, 8]}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}},
        {**base, "choices": [{"index": 0, "delta": {"content": " z"}, "logprobs": None, "finish_reason": "length",
                              "token_ids": [9]}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}},
        {**base, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                                          "prompt_tokens_details": {"cached_tokens": 2}},
         "metrics": {"speculative_decoding": {"mean_acceptance_length": 1.5, "draft_acceptance_rate": 0.25,
                                              "num_spec_steps": 2, "num_accepted_draft_tokens": 1,
                                              "num_draft_tokens": 4}}},
        b"[DONE]",
    ]
    st = feed_all("chat", payloads)
    counts = st.resolve_tokens()
    assert counts.chunk_tokens == [2, 3] and counts.output_tokens == 3
    assert st.finish_reason == "length" and st.cached_tokens == 2
    assert st.spec is not None and st.spec["source"] == "vllm_metrics" and st.spec["proposed_drafts"] == 4


def test_vllm_keepalive_comment_lines_are_skipped():
    s = SSESplitter()
    assert s.feed(b": keep-alive\n\ndata: [DONE]\n\n") == [b"[DONE]"]


# -- llama.cpp ---------------------------------------------------------------------------------------------------


def llamacpp_chat(n: int, spec: bool) -> list[object]:
    base = {"created": 1, "id": "chatcmpl-x", "model": "t.gguf", "system_fingerprint": "b1-0c1e570",
            "object": "chat.completion.chunk"}
    out: list[object] = [{**base, "choices": [{"finish_reason": None, "index": 0,
                                               "delta": {"role": "assistant", "content": None}}]}]
    out += [{**base, "choices": [{"finish_reason": None, "index": 0, "delta": {"content": "2"}}]}
            for _ in range(n)]
    out.append({**base, "choices": [{"finish_reason": "length", "index": 0, "delta": {}}]})
    timings = {"cache_n": 0, "prompt_n": 20, "prompt_ms": 6.4, "predicted_n": n, "predicted_ms": 3.9}
    if spec:
        timings.update(draft_n=6, draft_n_accepted=3)
    out.append({**base, "choices": [], "usage": {"completion_tokens": n, "prompt_tokens": 20, "total_tokens": n + 20,
                                                 "prompt_tokens_details": {"cached_tokens": 0}},
                "timings": timings})
    out.append(b"[DONE]")
    return out


def test_llamacpp_chat_one_chunk_per_token_and_draft_timings():
    st = feed_all("chat", llamacpp_chat(4, spec=True))
    counts = st.resolve_tokens()
    assert counts.chunk_tokens == [1, 2, 3, 4] and counts.chunk_tokens_source == "one_per_chunk"
    assert counts.output_tokens == 4 and counts.output_tokens_source == "usage"
    assert st.spec is not None and st.spec["proposed_drafts"] == 6 and st.spec["accepted_drafts"] == 3
    assert st.spec["accept_rate"] == 0.5 and st.spec["source"] == "timings"
    assert feed_all("chat", llamacpp_chat(4, spec=False)).spec is None


def test_llamacpp_completions_final_chunk_without_usage_uses_timings():
    base = {"created": 1, "model": "t", "object": "text_completion", "id": "cmpl-1"}
    payloads = [
        {**base, "choices": [{"text": "a", "index": 0, "logprobs": None, "finish_reason": None}]},
        {**base, "choices": [{"text": "b", "index": 0, "logprobs": None, "finish_reason": None}]},
        {**base, "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": "length"}],
         "timings": {"predicted_n": 2, "prompt_n": 3, "cache_n": 1}},
        b"[DONE]",
    ]
    st = feed_all("completions", payloads)
    counts = st.resolve_tokens()
    assert counts.output_tokens == 2 and counts.output_tokens_source == "timings"
    assert counts.chunk_tokens == [1, 2] and st.prompt_tokens == 4 and st.cached_tokens == 1


def test_llamacpp_native_completion_ends_at_stop_true_and_counts_tokens_predicted():
    payloads = [
        {"index": 0, "content": " a", "tokens": [5], "stop": False, "tokens_predicted": 1},
        {"index": 0, "content": " b", "tokens": [6], "stop": False, "tokens_predicted": 2},
        {"index": 0, "content": "", "tokens": [], "stop": True, "tokens_predicted": 2, "stop_type": "limit",
         "timings": {"predicted_n": 2, "prompt_n": 4}},
    ]
    st = feed_all("generate", payloads)
    counts = st.resolve_tokens()
    assert st.done and counts.chunk_tokens == [1, 2] and counts.output_tokens_source == "tokens_predicted"


def test_no_server_count_falls_back_to_counting_chunks_and_says_so():
    base = {"id": "k", "object": "text_completion"}
    payloads = [{**base, "choices": [{"index": 0, "text": "x", "finish_reason": None}]},
                {**base, "choices": [{"index": 0, "text": "y", "finish_reason": "stop"}]}, b"[DONE]"]
    counts = feed_all("completions", payloads).resolve_tokens()
    assert (counts.output_tokens, counts.output_tokens_source, counts.chunk_tokens_source) == (2, "chunks",
                                                                                              "chunks")


# -- answer text (multi-turn conversations resend it) ------------------------------------------------------------


def test_answer_text_per_dialect_cumulative_generate_delta_openai_and_llamacpp():
    assert feed_all("generate", sglang_generate_stream(spec=False)).answer_text == "A B C D E F G"
    incremental = [{"text": " A", "output_ids": [1], "meta_info": {"completion_tokens": 1}},
                   {"text": " A", "output_ids": [2], "meta_info": {"completion_tokens": 2}},  # a delta, not cumulative
                   {"text": " C", "output_ids": [3], "meta_info": {"completion_tokens": 3}}, b"[DONE]"]
    assert feed_all("generate", incremental).answer_text == " A A C"
    llamacpp = [{"content": " x", "tokens_predicted": 1, "stop": False},
                {"content": " y", "tokens_predicted": 2, "stop": False}, {"content": "", "stop": True}]
    assert feed_all("generate", llamacpp).answer_text == " x y"
    chat = [{"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            {"id": "c", "choices": [{"index": 0, "delta": {"reasoning_content": "think", "content": None}}]},
            {"id": "c", "choices": [{"index": 0, "delta": {"content": " one"}}]},
            {"id": "c", "choices": [{"index": 1, "delta": {"content": " other choice"}}]},
            {"id": "c", "choices": [{"index": 0, "delta": {"content": " two"}, "finish_reason": "length"}]},
            b"[DONE]"]
    assert feed_all("chat", chat).answer_text == " one two"  # reasoning and other choices are not the answer
    completions = [{"id": "k", "choices": [{"index": 0, "text": " a b"}]},
                   {"id": "k", "choices": [{"index": 0, "text": " c", "finish_reason": "length"}]}, b"[DONE]"]
    assert feed_all("completions", completions).answer_text == " a b c"


# -- protocol generations: SGLang's three spec-field names, aborts, error events ---------------------------------


def _generate_final(spec: dict[str, object]) -> list[object]:
    meta = {"id": "g", "finish_reason": {"type": "length", "length": 8}, "completion_tokens": 8, **spec}
    return [{"text": "x", "output_ids": list(range(8)), "meta_info": meta}, b"[DONE]"]


def test_sglang_spec_fields_of_every_generation_give_the_same_figures():
    oldest = feed_all("generate", _generate_final({"spec_verify_ct": 4})).spec
    assert oldest is not None and (oldest["verify_ct"], oldest["accept_length"]) == (4, 2.0)
    assert oldest["accepted_drafts"] is None and oldest["proposed_drafts"] is None  # not reported, never 0
    middle = feed_all("generate", _generate_final({"spec_verify_ct": 4, "spec_accept_token_num": 4,
                                                   "spec_draft_token_num": 12, "spec_accept_histogram": [0, 4]}))
    drafts = feed_all("generate", _generate_final({"spec_verify_ct": 4, "spec_accepted_drafts": 4,
                                                   "spec_proposed_drafts": 12, "spec_accept_histogram": [0, 4]}))
    newest = feed_all("generate", _generate_final({"spec_verify_ct": 4, "spec_num_correct_drafts": 4,
                                                   "spec_num_proposed_drafts": 12, "spec_accept_length": 2.0}))
    for st in (middle, drafts, newest):
        assert st.spec is not None
        assert (st.spec["accepted_drafts"], st.spec["proposed_drafts"], st.spec["accept_length"]) == (4, 12, 2.0)
        assert st.spec["accept_rate"] == 4 / 12
    # Newest names beside their aliases: the newest wins, nothing is added twice.
    both = feed_all("generate", _generate_final({"spec_verify_ct": 4, "spec_num_correct_drafts": 5,
                                                 "spec_accept_token_num": 99, "spec_num_proposed_drafts": 12,
                                                 "spec_draft_token_num": 99})).spec
    assert both is not None and (both["accepted_drafts"], both["proposed_drafts"]) == (5, 12)
    aliases = feed_all("generate", _generate_final({"spec_verify_ct": 4, "spec_num_correct_drafts": 5,
                                                    "spec_accepted_drafts": 99, "spec_num_proposed_drafts": 12,
                                                    "spec_proposed_drafts": 99})).spec
    assert aliases is not None and (aliases["accepted_drafts"], aliases["proposed_drafts"]) == (5, 12)


def test_sglext_with_middle_generation_names_is_read():
    details = {"spec_verify_ct": 2, "spec_accept_token_num": 3, "spec_draft_token_num": 6}
    st = feed_all("chat", [{"id": "c", "choices": [], "usage": {"completion_tokens": 5}},
                           {"id": "c", "choices": [], "sglext": {"spec_tokens_details": details}}, b"[DONE]"])
    assert st.spec is not None and (st.spec["accepted_drafts"], st.spec["accept_length"]) == (3, 2.5)


def test_openai_finish_reason_abort_is_an_error_not_a_short_answer():
    chunk = {"id": "a", "choices": [{"index": 0, "delta": {"content": " w"}, "finish_reason": None}],
             "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    end = {"id": "a", "choices": [{"index": 0, "delta": {}, "finish_reason": "abort"}]}
    st = feed_all("chat", [chunk, end, b"[DONE]"])
    assert st.done and st.finish_reason == "abort" and st.error == "finish_reason abort"


def test_flat_error_object_chunk_is_a_stream_error_with_its_message():
    st = feed_all("completions", [{"object": "error", "message": "engine dead", "type": "InternalServerError",
                                   "param": None, "code": 500}, b"[DONE]"])
    assert (st.error, st.error_code) == ("engine dead", 500)


def test_sse_error_field_becomes_an_error_payload():
    s = SSESplitter()
    got = s.feed(b'data: {"a": 1}\n\nerror: {"code":500,"message":"slot died"}\n\ndata: [DONE]\n\n')
    assert got[1] == b'{"error": {"code":500,"message":"slot died"}}'
    st = feed_all("chat", got)
    assert (st.error, st.error_code, st.done) == ("slot died", 500, True)
    assert SSESplitter().feed(b"error: not json\n\n") == [b'{"error": "not json"}']


def test_kernel_stamps_are_the_event_times_never_before_the_send_nor_running_backwards():
    """On the kernel's clock each read's events take its stamp (converted to the perf_counter scale), bounded:
    a stamp before the request's send (a wall clock stepped back, or a conversion skewed by a pause) is the
    send, one before an earlier read's is that read's, and none is after its own read. The receive lag is how
    much later the loop's own clock put the read."""
    offset = wall_offset()
    blocks = iter([b"data: a\n\n", b"data: b\n\n", b"data: c\n\n", b"data: d\n\n", b""])
    reads = iter([10.0, 11.0, 12.0, 13.0, 14.0])  # the loop's clock when each read returned
    # a stamp before the send, a good one 0.2 s before its read, one before the previous, one "after" its read
    stamps = iter([5.0, 10.8, 10.5, 13.5, 13.5])
    current: list[float | None] = [None]

    def read() -> bytes:
        current[0] = next(stamps) + offset  # the epoch time a kernel stamp would carry
        return next(blocks)

    reader = EventReader(read, clock=lambda: next(reads), stamp=lambda: current[0], kernel=True, not_before=9.0)
    assert [t for t, _ in reader] == pytest.approx([9.0, 10.8, 10.8, 13.0], abs=1e-3)
    # the third read: returned at 12.0, its bytes taken as arrived at 10.8
    assert reader.recv_lag_max_ms == pytest.approx(1200, abs=1)
    # the same reads on the loop's clock keep the loop's times, and measure the same lag
    blocks = iter([b"data: a\n\n", b"data: b\n\n", b"data: c\n\n", b"data: d\n\n", b""])
    reads, stamps = iter([10.0, 11.0, 12.0, 13.0, 14.0]), iter([5.0, 10.8, 10.5, 13.5, 13.5])
    reader = EventReader(read, clock=lambda: next(reads), stamp=lambda: current[0], not_before=9.0)
    assert [t for t, _ in reader] == [10.0, 11.0, 12.0, 13.0]
    assert reader.recv_lag_max_ms == pytest.approx(1200, abs=1)


def test_reads_without_a_kernel_stamp_keep_the_loops_clock_and_say_which_clock_dated_the_events():
    """#70: on the kernel's clock a read that carried no stamp (the kernel gave none) is dated by the loop's own
    clock, and the reader says so: "kernel" where every event had a stamp, "user" where none did, "mixed" where
    some did (the record's and the step's ``receive_clock``)."""
    offset = wall_offset()

    def reader_of(stamps: list[float | None]) -> EventReader:
        blocks = iter([b"data: a\n\n", b"data: b\n\n", b""])
        got, current = iter(stamps), [None]

        def read() -> bytes:
            stamp = next(got)
            current[0] = None if stamp is None else stamp + offset
            return next(blocks)

        reads = iter([10.0, 11.0, 12.0])
        return EventReader(read, clock=lambda: next(reads), stamp=lambda: current[0], kernel=True, not_before=9.0)

    cases = {"kernel": ([9.5, 10.5, None], [9.5, 10.5]), "user": ([None, None, None], [10.0, 11.0]),
             "mixed": ([9.5, None, None], [9.5, 11.0])}
    for clock, (stamps, times) in cases.items():
        reader = reader_of(stamps)
        assert [t for t, _ in reader] == pytest.approx(times, abs=1e-3)
        assert reader.chunk_clock == clock
    assert EventReader(lambda: b"", clock=lambda: 1.0, stamp=lambda: None, kernel=True).chunk_clock is None
