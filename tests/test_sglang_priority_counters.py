"""SGLang's ``priority`` label on its token counters: parts without a total (issue #39).

With ``--enable-priority-scheduling`` SGLang's running and queue gauges carry a total under ``priority=""`` and one
series per priority. Its tokenizer counters (prompt and generation tokens, requests, verify passes) are raised per
finished request with that request's own labels: the ``priority=""`` series counts the requests sent without a
priority, disjoint from the others, and the server's total is the sum over every priority. Read as a total, the
empty series leaves out every request that had one, and the token cross-check (``server_token_gap``) then blames
a count that was right.

A real emulator on loopback (``sglang-0.5.9``, priority series) gets mixed traffic, some requests without a
priority and some with 0 or 1, from several threads while the test samples its ``/metrics`` as the suite does;
the server's side of that window, read by the suite, must match the ledger and raise no token gap.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest
import requests

from specbench.analysis.records.server_side import MAX_TOKEN_GAP, server_step
from specbench.contract.schema import RequestRecord
from specbench.contract.server_metrics import ServerMetricsSample, combine_series, parse_metrics

PRIORITIES: tuple[int | None, ...] = (None, 0, 1)
USERS = 3
PER_USER = 9


def _traffic(url: str, user: int, errors: list[BaseException]) -> None:
    try:
        for i in range(PER_USER):
            body: dict[str, Any] = {"text": f"user {user} asks question {i} about the weather",
                                    "sampling_params": {"max_new_tokens": 24 + 8 * (i % 3)}}
            priority = PRIORITIES[(user + i) % len(PRIORITIES)]
            if priority is not None:
                body["priority"] = priority
            requests.post(url + "/generate", json=body, timeout=60).raise_for_status()
    except BaseException as exc:  # handed to the test thread
        errors.append(exc)


def _sample(url: str) -> ServerMetricsSample:
    sent = time.time()
    text = requests.get(url + "/metrics", timeout=10).text
    done = time.time()
    sample = parse_metrics(text, (sent + done) / 2)
    sample["read_s"] = done - sent
    return sample


def test_mixed_priority_traffic_raises_no_token_gap(emulator, tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("base: eagle3\nvintage: sglang-0.5.9\n", encoding="utf-8")
    emu = emulator(str(profile), speed=10)
    errors: list[BaseException] = []
    users = [threading.Thread(target=_traffic, args=(emu.url, u, errors)) for u in range(USERS)]
    samples = [_sample(emu.url)]
    for user in users:
        user.start()
    while any(user.is_alive() for user in users):
        samples.append(_sample(emu.url))
        time.sleep(0.05)
    for user in users:
        user.join()
    samples.append(_sample(emu.url))
    assert not errors, errors
    truth = requests.get(emu.url + "/_emulator/requests", timeout=10).json()
    assert len(truth) == USERS * PER_USER
    # The client's side of the same traffic, as records: whole requests by the time they finished.
    records = [cast(RequestRecord, {"status": "ok", "start_s": e["arrival_s"],
                                    "e2e_s": e["finished_s"] - e["arrival_s"],
                                    "output_tokens": e["completion_tokens"], "chunk_ms": []}) for e in truth]
    side = server_step(samples, records, samples[0]["t_s"], samples[-1]["t_s"])
    assert side is not None and side.token_gap is not None, side
    assert abs(side.token_gap) <= MAX_TOKEN_GAP, side
    text = requests.get(emu.url + "/metrics", timeout=10).text
    # The wire: every priority the traffic used has its own counter series, none of them a total.
    for name in ("sglang:generation_tokens_total", "sglang:num_requests_total", "sglang:spec_verify_calls_total"):
        for label in ('priority=""', 'priority="0"', 'priority="1"'):
            assert any(line.startswith(name + "{") and label in line for line in text.splitlines()), (name, label)
    values = parse_metrics(text, 0.0)["values"]
    assert values["generation_tokens_total"] == sum(e["completion_tokens"] for e in truth)
    assert values["prompt_tokens_total"] == sum(e["prompt_tokens"] for e in truth)
    assert values["requests_total"] == len(truth)
    assert values["spec_verify_total"] == sum(e["spec"]["spec_verify_ct"] for e in truth)


def test_the_empty_priority_is_the_total_only_for_running_and_queued() -> None:
    series = [({"priority": ""}, 10.0), ({"priority": "0"}, 6.0), ({"priority": "1"}, 4.0)]
    assert combine_series("running", series) == 10.0
    assert combine_series("queued", series) == 10.0
    # counters: "" holds the requests without a priority, the rest are more requests
    assert combine_series("generation_tokens_total", series) == 20.0
    assert combine_series("requests_total", series) == 20.0


@pytest.mark.parametrize("term", ["running", "queued"])
def test_per_priority_gauges_without_a_total_add_up(term: str) -> None:
    assert combine_series(term, [({"priority": "0"}, 6.0), ({"priority": "1"}, 4.0)]) == 10.0
