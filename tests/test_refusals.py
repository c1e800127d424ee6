"""Refused work (#55) against a queue-limited emulator: a server that runs 4, queues 2 and refuses the rest at once,
loaded at twice what it holds (C=12), as vLLM's --max-num-queued-reqs and SGLang's --max-queued-requests answer.

Before #55 every refusal was an ``http_error`` failure and the user sent again about a millisecond later: the
step's request count and error rate measured the client's retry speed, --max-error-rate ended the step, and the
load process burned the CPU the other users' timing needs. Here refusals are their own status, counted apart;
a closed-loop user backs off after one (the server's Retry-After, else a jittered back-off), an open-loop arrival
that is refused is not sent again; and the users the server took on are timed as well as without the limit.
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import requests

from specbench.analysis.records.checks import REFUSED_WORK
from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import summarize_run
from specbench.contract.rundir import read_run
from specbench.locustfiles.refusals import JITTER_LOW, REFUSAL_FIRST_S
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import FAST_LADDER, REPO, ledger, read_lag_p90_s, run_locust
from tests.tinyservers import tiny_server

RUNS, QUEUED = 4, 2  # the server runs 4 and queues 2: it holds 6
C = 2 * (RUNS + QUEUED)  # twice what it holds
SPEED = 10
ARGS = ("--max-tokens", "32", "--min-requests", "60", "--exit-code-on-error", "0", *FAST_LADDER)
SEND_SLACK_S = 0.002  # a user's next send is never before its back-off ends (timer and clock granularity)


def limited_profile(root: Path, queued: int | None) -> Path:
    """The baseline profile with a queue limit (``max_queued_requests``, a key older emulators read too)."""
    text = (REPO / "config" / "emulator" / "baseline.yaml").read_text()
    text = text.replace("max_running_requests: 80", f"max_running_requests: {RUNS}")
    text = text.replace("max_queued_requests: null", f"max_queued_requests: {'null' if queued is None else queued}")
    path = root / f"queue-{queued}.yaml"
    path.write_text(text)
    return path


def _run(root: Path, name: str, queued: int | None, *args: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    with start_emulator_process(str(limited_profile(root, queued)), speed=SPEED, extra=list(extra)) as emu:
        proc = run_locust(emu.url, root / name, *args, *ARGS)
        truth = ledger(emu.url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return {"dir": root / name, "ledger": truth}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Closed loop at 2x the limit (503, no Retry-After: vLLM's answer), the same server without the limit at what
    it holds (the control for the timing), closed loop with 429 and Retry-After (a gateway), and rate mode."""
    root = tmp_path_factory.mktemp("refusals")
    return {
        "limited": _run(root, "limited", QUEUED, "--ladder", str(C)),
        "control": _run(root, "control", None, "--ladder", str(RUNS + QUEUED)),
        "gateway": _run(root, "gateway", QUEUED, "--ladder", str(C),
                        extra=("--refuse-status", "429", "--retry-after", "0.3")),
        "rate": _run(root, "rate", QUEUED, "--rate-ladder", "100"),
    }


def _ttft_errors(run_dir: Path, truth: list[dict[str, Any]]) -> list[float]:
    """Client TTFT minus the server's (its ledger's first write, from the client's send), per served request."""
    by_rid = {e["rid"]: e for e in truth}
    return [r["ttft_s"] - (by_rid[r["server_request_id"]]["first_token_s"] - r["start_s"])
            for r in read_run(run_dir).records if r["status"] == "ok"]


def test_refusals_are_counted_apart_from_failures(runs: dict[str, dict[str, Any]]) -> None:
    run = read_run(runs["limited"]["dir"])
    statuses = Counter(r["status"] for r in run.records)
    assert set(statuses) <= {"ok", "refused"}, statuses  # no http_error: a refusal is not a failure
    assert statuses["refused"] > 0 and statuses["ok"] > 0, statuses
    refused = [r for r in run.records if r["status"] == "refused"]
    assert {r["http_status"] for r in refused} == {503}
    # Each refused record is a refusal the server made (its ledger counts them), none made up by the client.
    assert sum(1 for e in runs["limited"]["ledger"] if e.get("refused") == "queue_full") == len(refused)
    (step,) = run.steps
    assert step["ended_by"] != "refused"  # #70 near miss: a server that takes on some work is measured to the end
    mine = [r for r in run.records if r["step"] == step["index"]]
    assert step["requests_refused"] == sum(r["status"] == "refused" for r in mine)
    assert step["requests_failed"] == 0
    assert step["requests_total"] == sum(r["status"] == "ok" for r in mine)
    summary = summarize_run(load_run(runs["limited"]["dir"]))
    (row,) = summary.rows
    assert row.error_rate == 0 and row.failures == {}
    assert row.requests_refused > 0
    assert row.refused_share == pytest.approx(row.requests_refused / (row.requests_refused + row.requests_total))
    assert row.refusal_backoff_s is not None and row.refusal_backoff_s >= JITTER_LOW * REFUSAL_FIRST_S
    assert REFUSED_WORK in row.flags
    (said,) = [w.message for w in summary.warnings if w.code == REFUSED_WORK]
    assert f"refused {row.refused_share:.1%} of the offered work" in said


def _gaps_after_refusals(records: list[dict[str, Any]]) -> list[tuple[float, dict[str, Any]]]:
    """(seconds from a refusal's end to its user's next send, the refusal) for every refusal a send followed."""
    by_user: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_user[rec["user"]].append(rec)
    found = []
    for mine in by_user.values():
        mine.sort(key=lambda r: r["start_s"])
        for rec, after in itertools.pairwise(mine):
            if rec["status"] == "refused":
                found.append((after["start_s"] - (rec["start_s"] + rec["e2e_s"]), rec))
    return found


def test_a_refused_user_backs_off_so_the_request_rate_is_bounded(runs: dict[str, dict[str, Any]]) -> None:
    records = list(read_run(runs["limited"]["dir"]).records)
    gaps = _gaps_after_refusals(records)
    assert gaps, "no refusal was followed by another send"
    for gap, rec in gaps:
        assert rec["backoff_s"] >= JITTER_LOW * REFUSAL_FIRST_S
        assert gap >= rec["backoff_s"] - SEND_SLACK_S, (gap, rec["backoff_s"])
    # So no user sends refused requests faster than one per shortest back-off: at most C of them per 50 ms, where
    # the tight loop of old sent one about every millisecond per refused user (about 5,000 a second).
    refused = [r for r in records if r["status"] == "refused"]
    span = max(r["start_s"] + r["e2e_s"] for r in records) - min(r["start_s"] for r in records)
    assert len(refused) / span <= C / (JITTER_LOW * REFUSAL_FIRST_S), (len(refused), span)


def test_retry_after_is_honoured_and_recorded(runs: dict[str, dict[str, Any]]) -> None:
    records = list(read_run(runs["gateway"]["dir"]).records)
    refused = [r for r in records if r["status"] == "refused"]
    assert refused and {r["http_status"] for r in refused} == {429}
    assert {r["retry_after_s"] for r in refused} == {0.3}
    assert all(r["backoff_s"] >= 0.3 for r in refused)
    for gap, _ in _gaps_after_refusals(records):
        assert gap >= 0.3 - SEND_SLACK_S, gap


def test_the_served_users_ttft_error_is_unchanged_by_the_refusals(runs: dict[str, dict[str, Any]]) -> None:
    """The client's TTFT against the emulator's ledger, median error over the served requests, within 1 ms of the
    same server without the limit at what it holds, beyond what the machine's own measured read lag explains."""
    limited = _ttft_errors(runs["limited"]["dir"], runs["limited"]["ledger"])
    control = _ttft_errors(runs["control"]["dir"], runs["control"]["ledger"])
    lag_s = max(read_lag_p90_s(step) for name in ("limited", "control")
                for step in read_run(runs[name]["dir"]).steps)
    diff = statistics.median(limited) - statistics.median(control)
    assert abs(diff) <= 0.001 + lag_s, (diff, lag_s, statistics.median(limited), statistics.median(control))


def test_a_refused_arrival_in_rate_mode_is_not_sent_again(runs: dict[str, dict[str, Any]]) -> None:
    run = read_run(runs["rate"]["dir"])
    refused = [r for r in run.records if r["status"] == "refused"]
    assert refused and all(r["backoff_s"] == 0 for r in refused)  # the schedule sends the next arrival
    # Every record is its own arrival: no two share a due time (a resend would repeat its arrival's).
    due = [r["scheduled_s"] for r in run.records]
    assert len(set(due)) == len(due)
    (step,) = run.steps
    assert "low_rate" not in step["flags"] and step["achieved_rate"] <= 1.5 * step["target_rate"], step
    assert step["requests_refused"] == len(refused) and step["requests_failed"] == 0
    summary = summarize_run(load_run(runs["rate"]["dir"]))
    (said,) = [w.message for w in summary.warnings if w.code == REFUSED_WORK]
    assert "of the arrivals" in said and "none was sent again" in said


def test_a_vllm_vintage_refuses_with_its_body_and_counts_the_rejections() -> None:
    """vLLM's answer to a full queue: 503 with a plain JSON body even for a stream, no Retry-After, counted in
    vllm:admission_rejections_total{reason}."""
    with start_emulator_process("baseline", speed=1, extra=["--vintage", "vllm-0.33-nometrics",
                                                            "--max-running-requests", "1",
                                                            "--max-queued-requests", "1"]) as emu:
        answers: list[requests.Response] = []

        def ask() -> None:
            body = {"model": "kimi-k2.5-int4", "prompt": "Say something long.", "max_tokens": 200, "stream": True,
                    "ignore_eos": True}
            answers.append(requests.post(emu.url + "/v1/completions", json=body, timeout=60))

        threads = [threading.Thread(target=ask) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        refused = [a for a in answers if a.status_code == 503]
        # It holds 2 (one running, one queued) and each answer takes seconds: the other 4 or more are refused.
        assert len(refused) >= 4 and len(refused) + sum(a.status_code == 200 for a in answers) == 6
        for answer in refused:
            assert answer.headers["content-type"].startswith("application/json")
            assert "retry-after" not in answer.headers
            error = json.loads(answer.text)["error"]
            assert error["code"] == 503 and "queue is full" in error["message"]
        metrics = requests.get(emu.url + "/metrics", timeout=10).text
        (line,) = [ln for ln in metrics.splitlines() if ln.startswith("vllm:admission_rejections_total{")]
        assert 'reason="queue_full"' in line and line.endswith(f" {float(len(refused))}")



@pytest.mark.parametrize(("mode", "api", "says"), [("queue_full_sse", "generate", "queue is full"),
                                                   ("busy_sse", "chat", "currently busy")])
def test_a_full_queue_answered_inside_a_stream_is_a_refusal(tmp_path: Path, mode: str, api: str, says: str) -> None:
    """A full queue answered inside the stream, before any token, on HTTP 200 is a refusal too: SGLang's abort with
    status_code 503, and vLLM 0.32's error chunk with code 503 (half the refusals of a real vLLM at twice its queue
    limit came so: each was a stream_error, a failure, before). The user backs off after it: one user against a
    server that refuses everything sends a handful of requests in its step, not one a millisecond."""
    with tiny_server(mode) as server:
        proc = run_locust(server.url, tmp_path / "run", "--api", api, "--model", "m", "--ladder", "1",
                          "--min-step-time", "1", "--max-step-time", "2", "--warmup-time", "0.2",
                          "--max-error-rate", "1", "--exit-code-on-error", "0")
    # Every request refused: the step measured nothing, which is exit 3 whatever the limits (#70).
    assert proc.returncode == 3, proc.stderr[-2000:]
    records = list(read_run(tmp_path / "run").records)
    assert records and {(r["status"], r["http_status"]) for r in records} == {("refused", 200)}, records[0]
    assert re.search(r"step 1 C=1: all \d+ requests were refused", proc.stderr), proc.stderr[-2000:]
    assert all(says in (r["error"] or "") and r["backoff_s"] > 0 for r in records)
    span = max(r["start_s"] + r["e2e_s"] for r in records) - min(r["start_s"] for r in records)
    assert len(records) <= 1 + span / (JITTER_LOW * REFUSAL_FIRST_S), (len(records), span)
    for gap, rec in _gaps_after_refusals(records):
        assert gap >= rec["backoff_s"] - SEND_SLACK_S, (gap, rec["backoff_s"])
