"""What a stream's server-filled fields mean, chunk by chunk (#55): SGLang's zero-filled ``sglext`` and older
llama.cpp's ``timings.cache_n`` in the chunk whose ``usage`` carries no details. The end-to-end runs against the
emulator's vintages are tests/test_cache_share.py."""

from __future__ import annotations

import json

from specbench.locustfiles.streams import StreamState


def _feed(api: str, payloads: list[object]) -> StreamState:
    state = StreamState(api)
    for i, p in enumerate(payloads):
        state.feed(i * 0.01, p if isinstance(p, bytes) else json.dumps(p).encode())
    return state


def _sglext(**details: object) -> list[object]:
    return [{"id": "c", "choices": [{"index": 0, "text": "a b", "finish_reason": "length"}]},
            {"id": "c", "choices": [], "sglext": {"spec_tokens_details": details}},
            {"id": "c", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 6}}, b"[DONE]"]


def test_zero_filled_draft_counts_are_not_reported():
    st = _feed("completions", _sglext(spec_verify_ct=3, spec_accept_length=2.0, spec_accept_rate=0.0,
                                      spec_num_correct_drafts=0, spec_num_proposed_drafts=0,
                                      spec_correct_drafts_histogram=[]))
    assert st.spec is not None
    assert (st.spec["verify_ct"], st.spec["accept_length"]) == (3, 2.0)
    assert (st.spec["accepted_drafts"], st.spec["proposed_drafts"], st.spec["accept_rate"]) == (None, None, None)


def test_drafts_proposed_and_all_rejected_stay_zero():
    st = _feed("completions", _sglext(spec_verify_ct=3, spec_accept_length=1.0, spec_accept_rate=0.0,
                                      spec_num_correct_drafts=0, spec_num_proposed_drafts=9))
    assert st.spec is not None
    assert (st.spec["accepted_drafts"], st.spec["proposed_drafts"], st.spec["accept_rate"]) == (0, 9, 0.0)


def test_an_all_zero_block_is_no_speculation_figure_at_all():
    st = _feed("completions", _sglext(spec_verify_ct=0, spec_accept_length=0.0, spec_num_proposed_drafts=0))
    assert st.spec is None


def test_older_llamacpp_cache_n_in_the_usage_chunk_is_read():
    st = _feed("chat", [{"choices": [{"index": 0, "delta": {"content": "hi"}}]},
                        {"choices": [{"index": 0, "finish_reason": "length", "delta": {}}]},
                        {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 1, "total_tokens": 31},
                         "timings": {"cache_n": 24, "prompt_n": 6, "predicted_n": 1}}, b"[DONE]"])
    assert (st.prompt_tokens, st.cached_tokens) == (30, 24)
