"""vLLM's per-request ``num_spec_steps`` is not the number of target passes, and neither is output - 1 - accepted.

vLLM counts a step in its speculative stats only when the step verified a proposal (issue #39); an n-gram
drafter that finds no match proposes nothing, and that step is a plain pass of one token that ``num_spec_steps``
leaves out. The other count, output tokens - 1 - accepted drafts, leaves out the drafts a last pass accepted
past ``max_tokens``: vLLM counts them accepted, then cuts the answer (issue #60: a draft model drafting 3, always
accepted, 64 tokens, 48 accepted, 16 steps gave 15 passes and an impossible 4.27 tokens per pass). The suite
takes the larger of the two, exact wherever either cause is absent. Real runs of the suite against the
emulator's ``vllm-0.33`` vintage are judged against the ledger, which keeps the tokens of every pass.
"""

from __future__ import annotations

from pathlib import Path

from specbench.analysis import load_run
from specbench.analysis.records.request_metrics import acceptance_length, verify_passes_source
from specbench.emulator.vintage import VINTAGES
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import FAST_LADDER, ledger, run_locust

NO_DRAFT_SHARE = 0.4


def test_tokens_per_pass_match_the_ledger_when_steps_draft_nothing(tmp_path: Path) -> None:
    assert VINTAGES["vllm-0.33"].request_spec_metrics
    profile = tmp_path / "profile.yaml"
    profile.write_text(f"base: eagle3\nvintage: vllm-0.33\nmax_running_requests: 8\n"
                       f"speculative: {{no_draft_share: {NO_DRAFT_SHARE}}}\n", encoding="utf-8")
    emu = start_emulator_process(str(profile), speed=10)
    try:
        proc = run_locust(emu.url, tmp_path / "run", "--api", "chat", "--ladder", "1,4", "--max-tokens", "64",
                          "--min-requests", "12", *FAST_LADDER)
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
        truth = {e["rid"]: e for e in ledger(emu.url)}
    finally:
        emu.stop()
    records = [r for r in load_run(tmp_path / "run").records if r["status"] == "ok" and r["spec"]]
    assert len(records) >= 12
    undrafted = exact = 0
    true_tokens = true_passes = 0
    for rec in records:
        entry = truth[rec["server_request_id"]]
        steps = entry["tokens_per_step"][1:]  # the first is the prompt pass's token
        passes, kept = len(steps), sum(steps) - len(steps)
        cut = entry["spec"]["spec_num_correct_drafts"] - kept  # drafts accepted past the answer's end
        undrafted += passes - entry["spec"]["drafting_steps"]
        found = verify_passes_source(rec)
        assert found is not None and found[1] == "verify_ct", found
        # both floors of the true passes; the larger is exact where either cause is absent
        assert found[0] == max(passes - cut, entry["spec"]["drafting_steps"]) <= passes, (found, passes, cut)
        if cut == 0:
            exact += 1
            assert found[0] == passes
            # tokens per pass of this request, as the decomposition takes it: decode tokens / passes
            assert (rec["output_tokens"] - 1) / found[0] == sum(steps) / passes
        true_tokens += entry["completion_tokens"]
        true_passes += passes
    assert undrafted >= len(records), "the profile must make steps that propose nothing"
    assert exact >= len(records) // 2
    # the run's tokens per pass (output tokens / passes, SGLang's definition) against the ledger's
    suite = acceptance_length(records)
    assert suite is not None and abs(suite / (true_tokens / true_passes) - 1) < 0.04, (suite, true_tokens / true_passes)


def test_tokens_per_pass_exact_when_every_step_drafts_and_last_pass_is_cut(tmp_path: Path) -> None:
    """Issue #60: a draft always accepted (3 drafts, 4 tokens a pass at most), answers cut at ``max_tokens``.

    64 tokens = 1 + 15 passes x 4 + 3 of a 16th pass whose last draft is cut: 48 accepted, 16 steps. The suite
    took passes = 64 - 1 - 48 = 15 and reported 4.27 tokens per pass, above the 4 a pass can make. Before the
    fix this failed on the first request (15 != 16); the run's figure is now the ledger's and at most 4.
    """
    profile = tmp_path / "profile.yaml"
    profile.write_text("base: eagle3\nvintage: vllm-0.33\nmax_running_requests: 8\n"
                       "speculative: {acceptance: {alpha_min: 1.0, alpha_max: 1.0, pinned: {}}}\n",
                       encoding="utf-8")
    emu = start_emulator_process(str(profile), speed=10)
    try:
        proc = run_locust(emu.url, tmp_path / "run", "--api", "chat", "--ladder", "1,4", "--max-tokens", "64",
                          "--min-requests", "8", *FAST_LADDER)
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
        truth = {e["rid"]: e for e in ledger(emu.url)}
    finally:
        emu.stop()
    records = [r for r in load_run(tmp_path / "run").records if r["status"] == "ok" and r["spec"]]
    assert len(records) >= 8
    true_tokens = true_passes = 0
    for rec in records:
        entry = truth[rec["server_request_id"]]
        passes = len(entry["tokens_per_step"]) - 1  # the first is the prompt pass's token
        assert rec["output_tokens"] == 64 and rec["spec"]["accepted_drafts"] == 48, rec["spec"]
        assert passes == entry["spec"]["drafting_steps"] == 16  # the cut case the issue measured
        assert verify_passes_source(rec) == (16.0, "verify_ct")
        true_tokens += entry["completion_tokens"]
        true_passes += passes
    suite = acceptance_length(records)
    assert suite == true_tokens / true_passes == 4.0
