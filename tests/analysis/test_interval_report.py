"""The report names each interval's method, gives every step's tok/s interval, and counts the complete
requests behind its latency percentiles (marking fewer than 30 as indicative)."""

from __future__ import annotations

from pathlib import Path

from specbench.analysis import compare_runs, comparison_json, load_run, render_comparison, render_summary_table
from specbench.analysis.records.summary import summarize_run
from tests.analysis.synthetic_runs import small_pair, write_run


def test_report_names_the_method_and_marks_indicative_percentiles(tmp_path: Path) -> None:
    base, spec = small_pair()
    for run in (base, spec):
        run.levels[2].window_requests = 2  # C=4: 2 lifetimes per user, 8 complete requests (< 30)
    base_run = load_run(write_run(tmp_path / "base", base))
    comparison = compare_runs(base_run, load_run(write_run(tmp_path / "spec", spec)), n_boot=200)
    # C=4's window holds two request lifetimes, too short for the old rule (five); its several users' smooth
    # token streams still give batch means. C=1's single strictly periodic stream may fall back.
    methods = [lv.interval_method for lv in comparison.levels]
    assert methods[2] == "batch_means" and set(methods) <= {"batch_means", "lifetime_batches"}
    assert all(lv.ratio_low is not None for lv in comparison.levels)
    assert [lv["interval_method"] for lv in comparison_json(comparison)["levels"]] == methods
    rows = summarize_run(base_run).rows
    assert all(r.throughput_ci_rel is not None for r in rows) and rows[2].throughput_ci_method == "batch_means"
    assert [r.indicative_percentiles for r in rows] == [r.requests_ok < 30 for r in rows]
    assert rows[2].requests_ok < 30 and not rows[0].indicative_percentiles
    table = render_summary_table(summarize_run(base_run))
    c4 = next(line for line in table.splitlines() if line.split()[:2] == ["2", "4"])
    assert "~" in c4 and f" {rows[2].requests_ok} " in c4 and "bm" in c4
    assert "fewer than 30 (indicative only)" in table
    assert "bm" in render_comparison(comparison)
