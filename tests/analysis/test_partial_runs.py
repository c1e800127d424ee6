"""A run killed mid-step still reads: the unfinished step's window comes from its measured records."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_runs import Level, RunSpec, write_run

from specbench.analysis.records.load import load_run
from specbench.analysis.records.steps import step_windows
from specbench.analysis.records.summary import summarize_run


def test_killed_step_window_runs_from_first_measured_start_to_last_measured_end(tmp_path: Path) -> None:
    spec = RunSpec("killed", [Level(1, 100.0, tokens=16), Level(2, 180.0, tokens=16, write_step=False)],
                   partial=True, torn_tail=True)
    run = load_run(write_run(tmp_path / "run", spec))
    measured = [r for r in run.records if r["step"] == 1 and r["phase"] == "measured"]
    last = step_windows(run)[-1]
    assert last.partial and last.min_requests is None
    assert last.bounds == (min(r["start_s"] for r in measured), max(r["start_s"] + r["e2e_s"] for r in measured))
    summary = summarize_run(run)
    first, killed = summary.rows
    assert not first.partial and "partial_run" not in first.flags
    assert killed.partial and "partial_run" in killed.flags
    assert killed.throughput_tok_s == pytest.approx(180.0, rel=0.05)  # users idle at the window's edges
    assert killed.min_requests == 30  # unknown, so max(30, 3*C)
    assert run.skipped_lines == 1


def test_step_killed_in_warm_up_has_a_row_without_figures(tmp_path: Path) -> None:
    spec = RunSpec("warm", [Level(1, 100.0, tokens=16), Level(4, 300.0, tokens=16, window_requests=0,
                                                               write_step=False)], partial=True)
    summary = summarize_run(load_run(write_run(tmp_path / "run", spec)))
    row = summary.rows[-1]
    assert row.target_c == 4 and row.window_s is None and row.throughput_tok_s is None
    assert row.flags == ("partial_run", "no_window")
