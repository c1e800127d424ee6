"""Health, model, server-info, metrics and cache endpoints answer like SGLang's."""

from __future__ import annotations

import time

from specbench.emulator import start_emulator


def test_ready_health_and_models(base_http) -> None:
    assert base_http.get("/ready").status == 200
    for path in ("/health", "/health_generate"):
        reply = base_http.get(path)
        assert reply.status == 200 and reply.body == b""
    models = base_http.get("/v1/models").json()
    assert models["object"] == "list"
    card = models["data"][0]
    assert card["id"] == "kimi-k2.5-int4" and card["owned_by"] == "sglang" and card["max_model_len"] == 262144
    assert base_http.get("/v1/models/kimi-k2.5-int4").json()["id"] == "kimi-k2.5-int4"


def test_server_info_baseline_has_null_speculation(base_http) -> None:
    for path in ("/server_info", "/get_server_info"):
        info = base_http.get(path).json()
        assert info["speculative_algorithm"] is None
        assert info["speculative_num_steps"] is None
        assert info["model_path"] == "/shared/kimi-k2.5-int4"
        assert info["served_model_name"] == "kimi-k2.5-int4"
        assert info["max_running_requests"] == 80
        assert info["version"] == "0.5.23"
        assert "last_gen_throughput" in info["internal_states"][0]
        assert "avg_spec_accept_length" not in info["internal_states"][0]


def test_server_info_eagle3_names_its_speculation(spec_http) -> None:
    spec_http.post("/generate", {"text": "warm up", "sampling_params": {"max_new_tokens": 30, "ignore_eos": True}})
    info = spec_http.get("/server_info").json()
    assert info["speculative_algorithm"] == "EAGLE3"
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) == (
        3, 1, 4)
    assert info["speculative_draft_model_path"] == "/shared/kimi-k2.5-eagle3"
    assert info["max_running_requests"] == 48
    assert 1.0 <= info["internal_states"][0]["avg_spec_accept_length"] <= 4.0


def _metric(text: str, name: str) -> float:
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(name + "{")]
    assert values, f"{name} missing"
    return sum(values)


def test_metrics_prometheus_text(spec_http) -> None:
    before = spec_http.get("/metrics").body.decode()
    spec_http.post("/v1/completions", {"prompt": "metrics", "max_tokens": 25, "ignore_eos": True})
    reply = spec_http.get("/metrics")
    assert reply.headers["content-type"].startswith("text/plain")
    text = reply.body.decode()
    for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput",
                 "sglang:spec_accept_length", "sglang:spec_accept_rate"):
        assert f"# TYPE {name} gauge" in text
        _metric(text, name)
    assert _metric(text, "sglang:generation_tokens_total") - _metric(before, "sglang:generation_tokens_total") == 25
    assert _metric(text, "sglang:prompt_tokens_total") - _metric(before, "sglang:prompt_tokens_total") == 2
    assert 'model_name="kimi-k2.5-int4"' in text and 'tp_rank="0"' in text
    assert _metric(text, "sglang:spec_accept_length") >= 1.0
    assert "sglang:e2e_request_latency_seconds_bucket" in text


def test_flush_cache_and_prefix_cache(make_http) -> None:
    handle = start_emulator("baseline", speed=100, overrides={"prefix_cache": True})
    try:
        http = make_http(handle.url)
        body = {"text": "a" * 400, "sampling_params": {"max_new_tokens": 2}}
        assert http.post("/generate", body).json()["meta_info"]["cached_tokens"] == 0
        assert http.post("/generate", body).json()["meta_info"]["cached_tokens"] == 99
        flushed = http.post("/flush_cache", {})
        assert flushed.status == 200 and flushed.body.startswith(b"Cache flushed.")
        assert http.post("/generate", body).json()["meta_info"]["cached_tokens"] == 0
    finally:
        handle.stop()


def test_ledger_text_is_opt_in_and_holds_what_was_received_and_sent(make_http) -> None:
    handle = start_emulator("baseline", speed=100, overrides={"ledger_text": True})
    try:
        http = make_http(handle.url)
        answer = http.post("/generate", {"text": "Name a prime.", "sampling_params": {"max_new_tokens": 5}}).json()
        chat = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                             {"role": "user", "content": "More?"}], "max_tokens": 3}
        http.post("/v1/chat/completions", chat)
        first, second = http.get("/_emulator/requests").json()
        assert first["prompt_text"] == "Name a prime." and first["output_text"] == answer["text"]
        assert second["prompt_text"] == "Hi\nHello!\nMore?" and len(second["output_text"].split()) == 3
    finally:
        handle.stop()
    plain = start_emulator("baseline", speed=100)
    try:
        http = make_http(plain.url)
        http.post("/generate", {"text": "Name a prime.", "sampling_params": {"max_new_tokens": 2}})
        assert "prompt_text" not in http.get("/_emulator/requests").json()[0]
    finally:
        plain.stop()


def test_startup_delay_answers_503_until_ready(make_http) -> None:
    handle = start_emulator("baseline", speed=10, overrides={"startup_delay_s": 4.0, "health_probe_s": 0.5})
    try:
        http = make_http(handle.url)
        t0 = time.monotonic()
        assert http.get("/ready").status == 503
        assert http.get("/health").status == 503
        assert http.get("/health_generate").status == 503
        early = http.post("/generate", {"text": "too early"})
        assert early.status == 503 and early.json()["code"] == 503
        for _ in range(100):
            if http.get("/ready").status == 200:
                break
            time.sleep(0.02)
        ready_after = time.monotonic() - t0
        assert 0.3 <= ready_after <= 1.5  # 4 s at speed 10
        probe_start = time.monotonic()
        assert http.get("/health").status == 200
        assert time.monotonic() - probe_start >= 0.045  # the probe takes health_probe_s (scaled)
        assert http.post("/generate", {"text": "now", "sampling_params": {"max_new_tokens": 2}}).status == 200
    finally:
        handle.stop()


def test_ledger_endpoint_matches_handle_and_clears(make_http) -> None:
    handle = start_emulator("baseline", speed=100)
    try:
        http = make_http(handle.url)
        for i in range(3):
            http.post("/generate", {"text": f"q{i}", "rid": f"led-{i}", "sampling_params": {"max_new_tokens": 3}})
        over_http = http.get("/_emulator/requests").json()
        assert [r["rid"] for r in over_http] == ["led-0", "led-1", "led-2"]
        assert over_http == handle.ledger.records()
        assert len(http.get("/_emulator/requests?clear=1").json()) == 3
        assert http.get("/_emulator/requests").json() == [] and len(handle.ledger) == 0
    finally:
        handle.stop()
