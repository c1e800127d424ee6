"""The emulator's speculative depth: costs re-anchored per depth, a per-batch-size schedule (vLLM's
num_speculative_tokens_per_batch_size) run step by step, and the launch flags that set them."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from specbench.emulator import costmodel, start_emulator
from specbench.emulator.profile import ProfileError, load_profile, with_depth

REPO = Path(__file__).resolve().parents[2]
SCHEDULE = [[1, 1, 5], [2, 256, 1]]  # alone: 5 draft tokens a step; two or more running: 1


def _completion(prompt: str, tokens: int = 40) -> dict[str, object]:
    """The tuning profiles speak vLLM's wire: /v1/completions."""
    return {"model": "m", "prompt": f"depth {prompt}", "max_tokens": tokens, "ignore_eos": True, "stream": True}


def _send_together(url: str, bodies: list[dict[str, object]]) -> None:
    """Stream every body at once, each on its own connection, to its end ("data: [DONE]").

    Threads and ``http.client``, not greenlets: this process then keeps no event loop of its own for the streams,
    so nothing an earlier test in the same pytest worker left in one can hold them back (a gevent client here
    twice waited 120 s for a first response in fresh-clone CI, both times in the same worker order, and never
    alone or in any order tried by hand)."""
    host, port = urlsplit(url).hostname, urlsplit(url).port

    def one(body: dict[str, object]) -> None:
        conn = http.client.HTTPConnection(host or "127.0.0.1", port, timeout=60)
        try:
            conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            text = resp.read().decode()
            assert resp.status == 200 and text.rstrip().endswith("data: [DONE]"), (resp.status, text[-300:])
        finally:
            conn.close()

    with ThreadPoolExecutor(len(bodies)) as pool:
        for future in [pool.submit(one, body) for body in bodies]:
            future.result(timeout=120)  # raised, not swallowed: a failed stream says why


def test_depth_zero_costs_the_baseline_and_the_configured_depth_its_own_costs() -> None:
    spec, base = load_profile("tune-spec"), load_profile("tune-baseline")
    assert spec.speculative is not None
    assert spec.speculative.step_coefficients(spec.speculative.num_steps) == (spec.speculative.step_a_ms,
                                                                              spec.speculative.step_b_ms)
    assert spec.speculative.step_coefficients(0) == pytest.approx((base.step_a_ms, base.step_b_ms))
    three = with_depth(spec, 3)
    assert three.speculative is not None and three.speculative.num_steps == 3
    assert three.speculative.num_draft_tokens == 4  # a chain: depth + 1
    # One draft token costs the same at any anchor: depth 3 re-anchored to 1 is depth 1 from the file.
    assert with_depth(three, 1).speculative.step_coefficients(1) == pytest.approx(  # type: ignore[union-attr]
        spec.speculative.step_coefficients(1))
    at_one = costmodel.at_depth(spec, 1)
    assert costmodel.expected_step_ms(at_one, 10) == pytest.approx(
        (base.step_a_ms + 0.6 + 10 * (base.step_b_ms + 0.5)) * spec.scale)


def test_the_profiles_best_depth_falls_with_load() -> None:
    """The tuning profile's truth: deep drafts win alone, shallow ones in a batch, none at saturation."""
    spec, base = load_profile("tune-spec"), load_profile("tune-baseline")

    def best(c: int) -> int:
        tok_s = {0: costmodel.expected_throughput(base, c, 128, 64)}
        tok_s |= {k: costmodel.expected_throughput(costmodel.at_depth(spec, k), c, 128, 64) for k in range(1, 6)}
        return max(tok_s, key=lambda k: tok_s[k])

    picks = [best(c) for c in (1, 10, 70, 250)]
    assert picks[0] == 5 and picks[-1] == 0
    assert picks == sorted(picks, reverse=True) and len(set(picks)) == 4, picks


@pytest.mark.parametrize(("schedule", "what"), [
    ([[2, 16, 3]], "must start at 1"),
    ([[1, 16, 3], [16, 32, 2]], "overlap"),
    ([[1, 16, 6]], "more than num_steps"),
    ([[1, 16, -1]], "K must be >= 0"),
])
def test_a_bad_schedule_in_a_profile_names_the_key(schedule: list[list[int]], what: str) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile("tune-spec", overrides={"speculative.k_schedule": schedule})
    assert "speculative.k_schedule" in str(info.value) and what in str(info.value)


def test_a_schedule_runs_its_depth_per_batch_size() -> None:
    """Alone a request drafts 5 tokens a step; beside three others 1, as vLLM's lookup gives those batch sizes."""
    handle = start_emulator("tune-spec", speed=50.0, overrides={"speculative.k_schedule": SCHEDULE})
    try:
        _send_together(handle.url, [_completion("solo")])
        # The ledger takes a record just after the last byte: the client may hold the response before it exists.
        (solo,) = handle.ledger.wait_for(1)
        handle.ledger.clear()
        assert solo["spec"]["spec_num_proposed_drafts"] == 5 * solo["spec"]["drafting_steps"] > 0
        assert max(solo["tokens_per_step"]) <= 6
        _send_together(handle.url, [_completion(f"four {i}", tokens=60) for i in range(4)])
        four = handle.ledger.wait_for(4)
        assert len(four) == 4
        proposed = sum(r["spec"]["spec_num_proposed_drafts"] for r in four)
        steps = sum(r["spec"]["drafting_steps"] for r in four)
        # Every step with two or more running drafts 1; only a request's last steps alone may draft 5.
        assert steps <= proposed < 2 * steps, (proposed, steps)
    finally:
        handle.stop()


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "specbench.emulator", "--port", "0", "--speed", "50", *args],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_vllm_speculative_config_flag_launches_the_schedule(tmp_path: Path) -> None:
    """vLLM's own --speculative-config JSON, as ``specbench tune`` writes it: alone, 4 draft tokens a step."""
    config = {"method": "eagle3", "model": "/emulated/draft", "num_speculative_tokens": 4,
              "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 256, 0]]}
    ledger_file = tmp_path / "ledger.jsonl"
    proc = _start("--profile", "tune-spec", "--speculative-config", json.dumps(config), "--ledger-file",
                  str(ledger_file))
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()  # type: ignore[union-attr]
        _send_together(url, [_completion("flag")])
        deadline = time.monotonic() + 10  # the ledger line is written just after the last byte is sent
        while not ledger_file.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.01)
        (record,) = [json.loads(line) for line in ledger_file.read_text().splitlines()]
        assert record["spec"]["spec_num_proposed_drafts"] == 4 * record["spec"]["drafting_steps"] > 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize(("args", "what"), [
    (["--speculative-config", "{nope"], "not JSON"),
    (["--speculative-config", '{"num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[1, 9, 3]]}'],
     "more than num_speculative_tokens"),
    (["--speculative-config", '{"num_speculative_tokens": 2}', "--num-speculative-tokens", "3"], "disagrees"),
    (["--num-speculative-tokens", "0"], "must be >= 1"),
])
def test_a_bad_depth_flag_is_one_line_exit_2(args: list[str], what: str) -> None:
    proc = _start("--profile", "tune-spec", *args)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and what in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
