"""Every fault knob produces the misbehaviour it names, in SGLang's shapes, chosen deterministically."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from specbench.emulator import EmulatorHandle, start_emulator

from loadclient import Connection

STREAM_BODY = {"messages": [{"role": "user", "content": "fault"}], "max_tokens": 40, "ignore_eos": True,
               "stream": True}


@contextmanager
def faulty(**faults: float) -> Iterator[EmulatorHandle]:
    handle = start_emulator("baseline", speed=20, overrides={"faults": faults})
    try:
        yield handle
    finally:
        handle.stop()


@pytest.mark.parametrize(("kind", "status", "err_type"), [
    ("error_503", 503, "503"), ("error_500", 500, "InternalServerError"), ("error_429", 429, "429")])
def test_http_error_faults_use_the_flat_shape(make_http, kind: str, status: int, err_type: str) -> None:
    with faulty(**{kind: 1.0}) as handle:
        http = make_http(handle.url)
        for path, body in (("/v1/chat/completions", STREAM_BODY), ("/generate", {"text": "x"})):
            reply = http.post(path, body)
            assert reply.status == status
            payload = reply.json()
            assert payload == {"object": "error", "message": payload["message"], "type": err_type, "param": None,
                               "code": status}
        assert [r["fault"] for r in handle.ledger.records()] == [kind, kind]
        assert all(r["status"] == status and r["completion_tokens"] == 0 for r in handle.ledger.records())


def test_cut_stream_closes_without_terminator_or_done(make_http) -> None:
    with faulty(cut_stream=1.0) as handle:
        reply = make_http(handle.url).stream("/v1/chat/completions", STREAM_BODY)
        assert reply.status == 200
        assert not reply.complete
        assert "[DONE]" not in reply.payloads
        assert all(e["choices"][0]["finish_reason"] is None for e in reply.events)
        record = handle.ledger.wait_for(1)[0]
        assert record["fault"] == "cut_stream" and record["finish_reason"] is None
        assert 0 < record["completion_tokens"] < 40


def test_malformed_chunk_has_one_unparseable_data_line(make_http) -> None:
    with faulty(malformed_chunk=1.0) as handle:
        reply = make_http(handle.url).stream("/v1/chat/completions", STREAM_BODY)
        broken = []
        for payload in reply.payloads:
            try:
                json.loads(payload) if payload != "[DONE]" else None
            except ValueError:
                broken.append(payload)
        assert len(broken) == 1 and reply.payloads[-1] == "[DONE]"
        record = handle.ledger.records()[0]
        assert record["fault"] == "malformed_chunk" and record["completion_tokens"] == 40


def test_stream_error_openai_nested_error_then_done(make_http) -> None:
    with faulty(stream_error=1.0) as handle:
        reply = make_http(handle.url).stream("/v1/chat/completions", STREAM_BODY)
        assert reply.status == 200 and reply.payloads[-1] == "[DONE]"
        error = reply.events[-1]["error"]
        assert error["code"] == 503 and error["object"] == "error" and error["type"] == "SERVICE_UNAVAILABLE"
        assert handle.ledger.records()[0]["finish_reason"] == "abort"


def test_stream_error_generate_is_an_abort_finish_reason(make_http) -> None:
    with faulty(stream_error=1.0) as handle:
        reply = make_http(handle.url).stream("/generate", {"text": "x", "stream": True, "sampling_params": {
            "max_new_tokens": 40, "ignore_eos": True}})
        assert reply.payloads[-1] == "[DONE]"
        finish = reply.events[-1]["meta_info"]["finish_reason"]
        assert finish["type"] == "abort" and finish["status_code"] == 503
        assert reply.events[-1]["meta_info"]["completion_tokens"] < 40


def test_stall_pauses_output_mid_stream() -> None:
    with faulty(stall=1.0, stall_s=4.0) as handle:  # 4 s at speed 20 = 0.2 s
        conn = Connection(handle.url)
        try:
            result = conn.stream("/v1/chat/completions", {**STREAM_BODY, "stream_options": {
                "continuous_usage_stats": True}})
        finally:
            conn.close()
        assert result.done and result.tokens == 40
        gaps = [b - a for a, b in zip(result.chunk_times, result.chunk_times[1:], strict=False)]
        assert max(gaps) >= 0.18
        assert sorted(gaps)[-2] < 0.1  # one stall only
        assert handle.ledger.records()[0]["fault"] == "stall"


def test_stream_faults_spare_non_stream_requests(make_http) -> None:
    with faulty(cut_stream=1.0) as handle:
        reply = make_http(handle.url).post("/v1/completions", {"prompt": "x", "max_tokens": 5})
        assert reply.status == 200 and reply.json()["usage"]["completion_tokens"] == 5
        assert handle.ledger.records()[0]["fault"] is None


def test_fault_selection_is_deterministic_given_the_seed(make_http) -> None:
    runs = []
    for _ in range(2):
        handle = start_emulator("baseline", speed=200, overrides={"faults": {"seed": 3, "error_503": 0.3}})
        try:
            http = make_http(handle.url)
            runs.append([http.post("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 1}}).status
                         for _ in range(30)])
        finally:
            handle.stop()
    assert runs[0] == runs[1]
    assert 3 <= runs[0].count(503) <= 18
