"""Output equivalence at temperature 0, judged against the emulator's ledger (its truth of every changed token).

Real runs against real emulators: a lossless pair through ``specbench compare`` (the check is on by default),
a lossy speculative profile (``lossy``: a token changes after a position, the same place at every load) and a
batch-variant baseline (``batch_variance``: a token changes when the step's batch is not 1). Per level the
suite's changed counts and first-difference positions must equal the ledger's ``output_change`` of the very
same requests (matched by request id, which the suite sends as SGLang's ``rid``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis import compare_many, compare_runs, load_run, write_outputs
from specbench.analysis.reporting.multi_render import render_multi
from specbench.analysis.verdicts.equivalence import Answer, Changes, first_difference, run_answers, verdict
from specbench.contract.rundir import ANSWERS_FILE
from specbench.contract.schema import RunData
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import FAST_LADDER, ledger, read_jsonl, run_locust

LADDER = ("--ladder", "1,4,8", "--max-tokens", "32", "--min-requests", "16", *FAST_LADDER, "--check-output")


def _run(profile: str, out: Path, *extra: str) -> tuple[RunData, dict[str, dict[str, Any]]]:
    """One ladder against a fresh emulator of ``profile``; the run and its ledger by request id."""
    with start_emulator_process(profile, speed=20) as emu:
        proc = run_locust(emu.url, out, *LADDER, *extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return load_run(out), {e["rid"]: e for e in ledger(emu.url)}


def _truth(run: RunData, entries: dict[str, dict[str, Any]], c: int, seqs: set[int]) -> list[int]:
    """The ledger's first changed positions of ``run``'s answers at level ``c`` to the prompts ``seqs``."""
    found = []
    for rec in run.records:
        if rec["target_c"] == c and rec["prompt_seq"] in seqs and rec["status"] == "ok" and rec.get("answer_digest"):
            change = entries[rec["request_id"]]["output_change"]
            if change is not None:
                found.append(change["position"])
    return sorted(found)


def _by_level(run: RunData) -> dict[int, set[int]]:
    return {c: set(level) for c, level in run_answers(run).items()}


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunData, dict[str, dict[str, Any]]]:
    return _run("baseline", tmp_path_factory.mktemp("equiv") / "base")


def test_lossy_profile_divergence_per_level_equals_the_ledger_distributed(tmp_path, base_run):
    """eagle3-lossy, run with two load processes (answers travel to the master with their records)."""
    base, _ = base_run
    spec, entries = _run("eagle3-lossy", tmp_path / "lossy", "--processes", "2")
    answers = read_jsonl(spec.path / ANSWERS_FILE)
    ok = [r for r in spec.records if r["status"] == "ok"]
    assert {a["request_id"] for a in answers} == {r["request_id"] for r in ok}, "one answer per ok record"
    assert len({r["worker"] for r in ok}) == 2, "both load processes answered"
    eq = compare_runs(base, spec).equivalence
    assert eq is not None and eq.unit == "token"
    b_seqs, s_seqs = _by_level(base), _by_level(spec)
    assert [lv.target_c for lv in eq.levels] == [1, 4, 8]
    for lv in eq.levels:
        common = b_seqs[lv.target_c] & s_seqs[lv.target_c]
        truth = _truth(spec, entries, lv.target_c, common)
        assert lv.spec_vs_baseline.compared == len(common) >= 16
        assert list(lv.spec_vs_baseline.positions) == truth, f"C={lv.target_c}"
        assert all(p >= 8 for p in truth), "the profile changes nothing before position 8"
        assert lv.spec_noise is None or lv.spec_noise.changed == 0, "a lossy change is the same at every load"
        assert lv.baseline_noise is None or lv.baseline_noise.changed == 0
    assert eq.total.changed > 0 and eq.kind == "not_lossless", eq.text
    assert "this server is not lossless" in eq.text
    # Several configurations, each against the baseline (the baseline's own run stands in for a lossless one).
    multi = compare_many(base, [("lossy", spec), ("same", base)])
    write_outputs(multi, tmp_path / "multi")
    configs = json.loads((tmp_path / "multi" / "comparison.json").read_text())["configurations"]
    assert [(c["name"], c["equivalence"]["kind"]) for c in configs] == [("lossy", "not_lossless"),
                                                                        ("same", "lossless")]
    rows = list(csv.DictReader((tmp_path / "multi" / "equivalence.csv").open()))
    assert [(r["config"], r["target_c"], int(r["changed"])) for r in rows] == \
        [("lossy", str(lv.target_c), lv.spec_vs_baseline.changed) for lv in eq.levels] + \
        [("same", str(lv.target_c), 0) for lv in eq.levels]
    assert "lossy: lossy changed" in render_multi(multi) and "same: same changed 0 of" in render_multi(multi)


def test_batch_variance_is_the_noise_floor_and_not_blamed_on_speculation(tmp_path):
    """A batch-variant baseline against a lossless eagle3: the baseline's own changes under load equal the
    ledger's per level, none at C=1 (a lone request), and the verdict does not call speculation lossy."""
    profile = tmp_path / "bv.yaml"  # 2% a token at B > 1: about half the answers above C=1 change
    profile.write_text("base: baseline-batchvariant\nbatch_variance:\n  prob: 0.02\n")
    base, entries = _run(str(profile), tmp_path / "bv")
    spec, spec_entries = _run("eagle3", tmp_path / "e3")
    eq = compare_runs(base, spec).equivalence
    assert eq is not None and eq.lowest_c == 1
    answers = _by_level(base)
    for lv in eq.levels:
        if lv.target_c == 1:
            assert lv.baseline_noise is None and _truth(base, entries, 1, answers[1]) == []
            continue
        common = answers[lv.target_c] & answers[1]
        assert lv.baseline_noise is not None and lv.baseline_noise.compared == len(common)
        assert list(lv.baseline_noise.positions) == _truth(base, entries, lv.target_c, common), f"C={lv.target_c}"
        paired = answers[lv.target_c] & _by_level(spec)[lv.target_c]
        assert list(lv.spec_vs_baseline.positions) == _truth(base, entries, lv.target_c, paired)
        assert _truth(spec, spec_entries, lv.target_c, paired) == []
    assert eq.baseline_noise.changed > 0, "2% of 32 tokens at B > 1 over 32 or more answers: changes expected"
    assert eq.kind == "within_noise", eq.text


def test_specbench_compare_checks_a_lossless_pair_by_default(compare_pair):
    out, proc, _, _ = compare_pair  # the same run's report figures are judged in tests/test_specbench.py
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Output equivalence: speculation changed 0 of" in proc.stdout
    data = json.loads((out / "comparison.json").read_text())["equivalence"]
    assert data["kind"] == "lossless" and data["total"]["compared"] >= 24
    assert data.get("probe") is None  # the paired probe runs only when asked for (--equivalence-probe)
    assert [lv["spec_vs_baseline"]["changed"] for lv in data["levels"]] == [0, 0]
    rows = list(csv.DictReader((out / "equivalence.csv").open()))
    assert [(r["target_c"], r["changed"]) for r in rows] == [("1", "0"), ("4", "0")]
    assert "## Output equivalence" in (out / "report.md").read_text()
    assert (out / "equivalence_vs_c.png").stat().st_size > 0
    for name in ("baseline", "spec"):
        records = read_jsonl(out / name / "records.jsonl")
        assert all(r["answer_digest"].startswith("ids:") for r in records if r["status"] == "ok")


def test_sampling_runs_say_equivalence_is_not_checked(tmp_path, emulator):
    emu = emulator("baseline")
    proc = run_locust(emu.url, tmp_path / "t", "--ladder", "1", "--max-tokens", "8", "--min-requests", "5",
                      *FAST_LADDER, "--check-output", "--temperature", "0.7")
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = load_run(tmp_path / "t")
    assert not (tmp_path / "t" / ANSWERS_FILE).exists() and not any("answer_digest" in r for r in run.records)
    eq = compare_runs(run, run).equivalence
    assert eq is not None and eq.kind == "not_checked" and "temperature 0.7" in eq.text


def test_first_difference_and_verdict_rules():
    a = Answer("ids:a", (1, 2, 3, 4), None)
    assert first_difference(a, Answer("ids:b", (1, 2, 9, 4), None)) == 2
    assert first_difference(a, Answer("ids:c", (1, 2), None)) == 2, "a prefix differs where it ends"
    assert first_difference(a, Answer("ids:a", (1, 2, 3, 4), None)) is None
    assert first_difference(Answer("text:x", None, "hello"), Answer("text:y", None, "help!")) == 3
    assert verdict(Changes(240, 0, ()), Changes(200, 3, (5, 6, 7)), [1, 16])[1] == \
        "speculation changed 0 of 240 answers at C=1..16 (the baseline itself changed 3 of 200 under load)"
    assert verdict(Changes(100, 37, (9,) * 37), Changes(100, 2, (4, 4)), [1, 8])[0] == "not_lossless"
    assert verdict(Changes(100, 3, (9,) * 3), Changes(100, 2, (4, 4)), [1, 8])[0] == "within_noise"


def test_chat_route_keeps_the_text_as_the_identity(tmp_path, emulator):
    """No token ids on SGLang's OpenAI routes: the answer's text, exactly as the server wrote it, is kept."""
    emu = emulator("baseline", extra=["--ledger-text"])
    proc = run_locust(emu.url, tmp_path / "chat", "--api", "chat", "--ladder", "2", "--max-tokens", "12",
                      "--min-requests", "6", *FAST_LADDER, "--check-output")
    assert proc.returncode == 0, proc.stderr[-2000:]
    truth = {e["rid"]: e["output_text"] for e in ledger(emu.url)}
    run = load_run(tmp_path / "chat")
    answers = {a["request_id"]: a for a in run.answers}
    ok = [r for r in run.records if r["status"] == "ok"]
    assert len(ok) >= 6 and all(r["answer_digest"].startswith("text:") for r in ok)
    for rec in ok:
        line = answers[rec["request_id"]]
        assert line["kind"] == "text" and line["digest"] == rec["answer_digest"]
        assert line["text"] == truth[rec["server_request_id"]], "the answer as the emulator wrote it"


def test_vllm_token_ids_are_the_identity(tmp_path, emulator):
    """vLLM gives token ids when asked (``return_token_ids``): the answer's ids are the emulator's own words'."""
    from specbench.emulator.textmodel import WordStream

    emu = emulator("baseline", extra=["--vintage", "vllm-0.33", "--ledger-text"])
    proc = run_locust(emu.url, tmp_path / "vllm", "--ladder", "2", "--max-tokens", "12", "--min-requests", "6",
                      *FAST_LADDER, "--check-output")
    assert proc.returncode == 0, proc.stderr[-2000:]
    truth = {e["rid"]: e["prompt_text"] for e in ledger(emu.url)}
    run = load_run(tmp_path / "vllm")
    answers = {a["request_id"]: a for a in run.answers}
    ok = [r for r in run.records if r["status"] == "ok"]
    assert len(ok) >= 6 and run.meta.server["kind"] == "vllm"
    for rec in ok:
        line = answers[rec["request_id"]]
        words = WordStream(truth[rec["server_request_id"]])
        words.extend_to(12)
        assert line["kind"] == "ids" and line["ids"] == words.ids[:12]
