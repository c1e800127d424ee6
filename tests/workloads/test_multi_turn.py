"""Multi-turn conversations (--multi-turn N): each turn resends the answers the server really gave, follow-ups
are the seeded ones, and the emulator's prefix cache serves later turns' history from cache."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

import pytest

from specbench.contract.rundir import read_run
from specbench.locustfiles.conversation import FOLLOW_UPS, Conversation, follow_up
from specbench.locustfiles.prompts import Prompt
from tests.conftest import ledger, run_locust
from tests.test_hardening_inputs import one_line_error, specbench


def test_next_turn_resends_the_answer_exactly_and_the_transcript_grows_from_the_last_one():
    first = Conversation.start(None, 0, 7, Prompt(id="code-001", category="code", text="Reverse a list."))
    assert first.prompt.as_text() == "User: Reverse a list.\nAssistant:"
    second = first.next_turn(" the list reversed", seed=3)
    assert second.turn == 2 and second.seq == 7 and second.prompt.id == "code-001/t2"
    assert second.prompt.category == "code" and second.conversation_id == "s0-7"
    assert second.prompt.as_messages()[1] == {"role": "assistant", "content": " the list reversed"}
    # on the text routes turn 2 starts with turn 1's text and the model's own continuation of it
    assert second.prompt.as_text().startswith(first.prompt.as_text() + " the list reversed\nUser: ")
    assert second.prompt.as_messages()[-1]["content"] == follow_up(3, 7, 2) in FOLLOW_UPS
    assert [follow_up(0, s, t) for s in range(20) for t in (2, 3)] == \
        [follow_up(0, s, t) for s in range(20) for t in (2, 3)]
    assert len({follow_up(0, s, 2) for s in range(50)}) > 5


@pytest.mark.parametrize("value", ["0", "x"])
def test_bad_multi_turn_is_one_line_and_exit_2(tmp_path, value):
    one_line_error(specbench("run", "--label", "x", "--host", "http://127.0.0.1:9", "--multi-turn", value,
                             cwd=tmp_path), "--multi-turn")


def _by_conversation(records: list[dict]) -> dict[str, list[dict]]:
    convs: dict[str, list[dict]] = defaultdict(list)
    for rec in records:
        convs[rec["conversation_id"]].append(rec)
    return {k: sorted(v, key=lambda r: r["turn"]) for k, v in convs.items()}


def _share(records: list[dict]) -> float:
    return sum(r["cached_tokens"] for r in records) / sum(r["prompt_tokens"] for r in records)


@pytest.mark.parametrize("api", ["chat", "generate"])
def test_turns_resend_the_real_answers_and_later_turns_are_served_from_cache(tmp_path, emulator, api):
    emu = emulator("baseline", speed=5, extra=["--prefix-cache", "--ledger-text"])
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--api", api, "--multi-turn", "3", "--seed", "5", "--ladder", "2",
                      "--max-tokens", "16", "--min-requests", "24", "--min-step-time", "1", "--max-step-time", "30",
                      "--step-ci", "0", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    assert run.meta.settings.multi_turn == 3
    truth = {e["rid"]: e for e in ledger(emu.url)}
    convs = _by_conversation([r for r in run.records if r["status"] == "ok"])
    complete = [turns for turns in convs.values() if [r["turn"] for r in turns] == [1, 2, 3]]
    assert len(complete) >= 8, {k: [r["turn"] for r in v] for k, v in convs.items()}
    for turns in convs.values():  # a run's end may cut a conversation short, never leave a gap
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1))
    for turns in complete:
        seq, base = turns[0]["prompt_seq"], turns[0]["prompt_id"]
        assert [r["prompt_seq"] for r in turns] == [seq] * 3
        assert [r["prompt_id"] for r in turns] == [base, f"{base}/t2", f"{base}/t3"]
        assert turns[0]["conversation_id"] == f"s{turns[0]['step']}-{seq}"
        for prev, nxt in pairwise(turns):
            sent, answered = truth[prev["request_id"]], truth[nxt["request_id"]]
            assert sent["output_text"] and sent["output_text"] in answered["prompt_text"]
            # the whole history, then the answer exactly as sent, then the seeded follow-up
            joint = "" if api == "generate" else "\n"
            assert answered["prompt_text"].startswith(sent["prompt_text"] + joint + sent["output_text"] + "\n")
            tail = follow_up(5, seq, nxt["turn"]) + ("\nAssistant:" if api == "generate" else "")
            assert answered["prompt_text"].endswith(tail)
    assert all(r["cached_tokens"] == truth[r["request_id"]]["cached_tokens"] for r in run.records)
    shares = {t: _share([turns[t - 1] for turns in complete]) for t in (1, 2, 3)}
    print(f"cached-token share by turn on the emulator ({api}): "
          + ", ".join(f"turn {t} {s:.0%}" for t, s in shares.items()))
    # short first turns leave part of the history in a 64-character block the cache cannot match yet
    assert shares[1] < 0.1 and shares[2] > 0.3 and shares[3] > shares[2], shares


def test_a_failed_turn_and_a_step_change_end_the_conversation(tmp_path, emulator):
    emu = emulator("baseline", speed=10, extra=["--fault-503", "0.15", "--fault-seed", "3"])
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--api", "chat", "--multi-turn", "4", "--ladder", "1,2", "--max-tokens", "8",
                      "--min-requests", "20", "--min-step-time", "1", "--max-step-time", "30", "--step-ci", "0",
                      "--max-error-rate", "1", "--exit-code-on-error", "0", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [r for r in read_run(out).records if r["status"] != "cancelled"]
    by_user: dict[str, list[dict]] = defaultdict(list)
    for rec in sorted(records, key=lambda r: r["start_s"]):
        by_user[rec["user"]].append(rec)
    failed = after_failure = 0
    for recs in by_user.values():
        assert recs[0]["turn"] == 1
        for prev, nxt in pairwise(recs):
            if prev["status"] != "ok" or prev["turn"] == 4 or prev["step"] != nxt["step"]:
                assert nxt["turn"] == 1, (prev, nxt)  # a new conversation, on the next prompt of the order
                assert nxt["prompt_seq"] != prev["prompt_seq"] or nxt["step"] != prev["step"]
                after_failure += prev["status"] != "ok"
            else:
                assert (nxt["turn"], nxt["conversation_id"]) == (prev["turn"] + 1, prev["conversation_id"])
            failed += prev["status"] != "ok"
    assert failed >= 3 and after_failure >= 3, (failed, after_failure)
    assert {r["step"] for r in records} == {0, 1}
    firsts = {}
    for rec in records:  # every conversation lives in one step and starts at turn 1
        firsts.setdefault(rec["conversation_id"], rec)
        assert rec["step"] == firsts[rec["conversation_id"]]["step"]
    assert all(r["turn"] == 1 for r in firsts.values())
