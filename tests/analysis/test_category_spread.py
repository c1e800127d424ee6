"""Per-category spread: one fast prompt shows a win while the mean loses (the single-prompt trap)."""

from __future__ import annotations

import pytest
from synthetic_runs import DEFAULT_PROMPTS, Prompt, small_pair, write_run

from specbench.analysis.records.load import load_run
from specbench.analysis.reporting.render import render_comparison
from specbench.analysis.verdicts.categories import ALL
from specbench.analysis.verdicts.compare import compare_runs


@pytest.fixture(scope="module")
def trap_comparison(tmp_path_factory: pytest.TempPathFactory):
    base, spec = small_pair()  # spec runs every user at 0.8x the baseline's rate...
    spec.prompts = [Prompt(p.prompt_id, p.category, speed=1.3 / 0.8 if p.prompt_id == "p0" else 1.0,
                           accept_length=4.0 if p.prompt_id == "p0" else 2.0) for p in DEFAULT_PROMPTS]
    root = tmp_path_factory.mktemp("trap")  # ...except on prompt p0, where it is 1.3x faster
    return compare_runs(load_run(write_run(root / "b", base)), load_run(write_run(root / "s", spec)), n_boot=200)


def test_best_prompt_speedup_is_shown_next_to_a_losing_mean(trap_comparison) -> None:
    overall = next(r for r in trap_comparison.categories.rows if r.target_c == 1 and r.category == ALL)
    assert overall.prompts == 8
    assert overall.best_prompt_id == "p0"
    assert overall.best_prompt_speedup == pytest.approx(1.3)
    assert overall.worst_prompt_speedup == pytest.approx(0.8)
    assert overall.speedup < 1.0
    assert any(t.startswith("single-prompt trap at C=1: prompt 'p0' alone shows a win (1.30x")
               for t in trap_comparison.categories.traps)
    assert "single-prompt trap at C=1" in render_comparison(trap_comparison)


def test_category_speedup_is_the_ratio_of_mean_per_request_speeds(trap_comparison) -> None:
    rows = {r.category: r for r in trap_comparison.categories.rows if r.target_c == 2}
    assert rows["math"].speedup == pytest.approx(0.8)
    assert rows["code"].spec_per_request_tok_s / rows["code"].baseline_per_request_tok_s == pytest.approx(
        rows["code"].speedup)
    assert rows["code"].speedup > 0.8  # p0 lifts its category
    assert rows[ALL].spec_per_request_tok_s == pytest.approx(trap_comparison.levels[1].spec.per_request_tok_s)


def test_acceptance_length_by_category_pools_the_spec_run(trap_comparison) -> None:
    accept = dict(trap_comparison.categories.accept_by_category)
    assert accept["math"] == pytest.approx(2.0)
    assert 2.0 < accept["code"] < 4.0
