"""No pass yields more than its drafts plus one: an acceptance length above that is flagged and left out (#60)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import RunSpec, small_pair, write_run

from specbench.analysis.records.load import load_run
from specbench.analysis.records.passbound import bound_accept_lengths, pass_limit
from specbench.analysis.records.summary import RunSummary, summarize_run
from specbench.analysis.reporting.render import render_summary_table
from specbench.contract.server_metrics import ACCEPTED_POS_PREFIX

Records = list[dict[str, Any]]
CODE = "impossible_accept_length"


def _passes(per_record: Callable[[int], int]) -> Callable[[Records], Records]:
    """Give each ok speculative record ``per_record(i)`` verify passes (i: its index among them)."""
    def edit(recs: Records) -> Records:
        ok = [r for r in recs if r["status"] == "ok" and r.get("spec")]
        for i, rec in enumerate(ok):
            rec["spec"] = {**rec["spec"], "verify_ct": per_record(i), "accept_length": None}
        return recs
    return edit


def _summary(tmp_path: Path, speculative: Any, edit: Callable[[Records], Records]) -> RunSummary:
    spec: RunSpec = small_pair()[1]
    spec.levels = [replace(level, tokens=17) for level in spec.levels]  # 17 output tokens per request
    spec.speculative, spec.edit_records = speculative, edit
    return summarize_run(load_run(write_run(tmp_path / "spec", spec)), name="spec")


EAGLE_3_STEPS = {"algorithm": "EAGLE3", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}


def test_an_acceptance_length_at_the_bound_is_a_measurement(tmp_path: Path) -> None:
    """17 tokens: the prompt pass's first, then 4 passes of 3 drafts + 1. Each pass yielded exactly the most it
    can, so nothing is flagged, though tokens / passes (4.25, the figure shown) is above 4."""
    summary = _summary(tmp_path, EAGLE_3_STEPS, _passes(lambda i: 4))
    assert [r.accept_length for r in summary.rows] == [4.25, 4.25, 4.25]
    assert [r.most_tokens_per_pass for r in summary.rows] == [4.0, 4.0, 4.0]
    assert not [w for w in summary.warnings if w.code == CODE]


def test_one_pass_short_makes_the_level_impossible_flagged_and_left_out(tmp_path: Path) -> None:
    """One request in 40 counted in 3 passes (16 tokens past the first: 5.33 a pass, the miscount a last pass cut
    at max_tokens once made): a counting error, so that level's figure is left out and named, with the bound and
    where it comes from; the other levels keep theirs."""
    summary = _summary(tmp_path, EAGLE_3_STEPS, _passes(lambda i: 3 if i % 40 == 0 else 4))
    flagged = [w for w in summary.warnings if w.code == CODE]
    hit = {w.message.split(": ")[0] for w in flagged}
    assert hit, "a level above the bound is flagged"
    for row in summary.rows:
        above = row.most_tokens_per_pass is not None and row.most_tokens_per_pass > 4
        assert (row.accept_length is None) == above == (f"spec, C={row.target_c}" in hit)
    assert all("yielded 5.333 tokens each past its first (the client's records), above the most a pass can "
               "yield, 4 (3 drafts per pass (speculative_num_steps) + 1)" in w.message for w in flagged)
    assert "impossible_accept_length" in render_summary_table(summary)


def test_without_a_declared_draft_count_nothing_is_flagged(tmp_path: Path) -> None:
    """No bound known (an algorithm name only, no counters): 5.67 tokens per pass stands, unjudged."""
    summary = _summary(tmp_path, "EAGLE3", _passes(lambda i: 3))
    assert not [w for w in summary.warnings if w.code == CODE]
    assert all(r.accept_length and r.accept_length > 5 for r in summary.rows)


def _sample(counts: list[float]) -> dict[str, Any]:
    return {"t_s": 0.0, "values": {f"{ACCEPTED_POS_PREFIX}{i}": n for i, n in enumerate(counts)}}


@pytest.mark.parametrize(("speculative", "samples", "bound"), [
    ({"num_steps": 3}, [], 4),  # SGLang: speculative_num_steps
    ({"n_max": 8, "algorithm": "draft"}, [], 9),  # llama.cpp: speculative.n_max
    ({"source": "metrics"}, [_sample([90, 40, 0])], 3),  # vLLM: no pass accepted past position 1
    (None, [_sample([5, 3]), _sample([9, 6, 2])], 4),  # the latest sample holds every position reached
    ({"num_steps": True}, [], None),  # not a count: nothing bounds it
    ("EAGLE3", [_sample([0, 0])], None),  # counters that never moved bound nothing
])
def test_the_bound_comes_from_the_declared_drafts_else_the_positions_reached(
        speculative: Any, samples: list[Any], bound: int | None) -> None:
    found = pass_limit(speculative, samples)
    assert (found[0] if found else None) == bound


@pytest.mark.parametrize(("server_figure", "left_out"), [(4.0, False), (4.004, True)])
def test_the_servers_figure_is_held_to_the_same_bound(tmp_path: Path, server_figure: float, left_out: bool) -> None:
    """The server counts verify passes only (no prompt pass), so its tokens per pass meet the bound itself: 4.0
    stands, 4.004 is a counting error."""
    row = replace(_summary(tmp_path, EAGLE_3_STEPS, _passes(lambda i: 4)).rows[0], server_accept_length=server_figure)
    (kept,), said = bound_accept_lengths([row], (4, "3 drafts per pass (speculative_num_steps) + 1"))
    assert (kept.server_accept_length is None) == left_out == bool(said)
    assert kept.accept_length == 4.25
    if left_out:
        assert said == ["C=1: the server's acceptance length 4.004 tokens per pass is above the most a pass can "
                        "yield, 4 (3 drafts per pass (speculative_num_steps) + 1); left out as a counting error"]


def test_passes_derived_from_accepted_drafts_are_not_judged(tmp_path: Path) -> None:
    """llama.cpp gives accepted drafts, not passes: output - 1 - accepted falls short by the drafts of a last pass
    cut at max_tokens (a documented shortfall), so such a figure is shown as counted, not flagged."""
    def from_drafts(recs: Records) -> Records:
        for rec in recs:
            if rec["status"] == "ok" and rec.get("spec"):
                rec["spec"] = {"verify_ct": None, "accept_length": None, "accepted_drafts": 13, "source": "timings"}
        return recs
    summary = _summary(tmp_path, {"n_max": 3, "algorithm": "draft"}, from_drafts)  # 17 - 1 - 13 = 3 passes
    assert not [w for w in summary.warnings if w.code == CODE]
    assert all(r.most_tokens_per_pass is None and r.accept_length == 17 / 3 for r in summary.rows)
