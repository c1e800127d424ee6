"""The web UI's Tokens tab as data: final rows are summarize's rows, live rows are the same figures so far."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_runs import Level, RunSpec, write_run

from specbench.analysis.records.checks import CLIENT_BOUND, CLIENT_PAUSED, CLIENT_READ_LAG
from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import summarize_run
from specbench.analysis.reporting.columns import STEP_COLUMNS
from specbench.analysis.reporting.live import (
    OpenStep,
    exact_until,
    final_row,
    live_row,
    tab_cells,
    tab_csv,
    tab_structure,
)
from specbench.contract.policy import CLIENT_BOUND_CPU, READ_LAG_FLOOR_MS, read_lag_limit_ms
from specbench.contract.rundir import STEPS_FILE

SPEC = RunSpec("tab", [Level(1, 100.0, tokens=16), Level(3, 240.0, tokens=16, error_every=7),
                       Level(5, 300.0, tokens=16, users=4)])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("tab") / "run", SPEC)


def test_every_summarize_column_is_in_the_tab_with_the_same_cells(run_dir: Path) -> None:
    run = load_run(run_dir)
    summary = summarize_run(run)
    titles = [s["title"] for s in tab_structure()]
    assert all(col.header in titles for col in STEP_COLUMNS)
    tab = [final_row(summary.name, step, run.records) for step in run.steps]
    cells = tab_cells(tab)
    keys = {s["title"]: s["key"] for s in tab_structure()}
    for row, tab_row in zip(summary.rows, cells, strict=True):
        for col in STEP_COLUMNS:
            assert tab_row[keys[col.header]] == col.cell(row), col.header
    # the flags are summarize's too: errors at C=3, concurrency not reached at C=5
    assert "error_rate" in cells[1][keys["flags"]] and "low_concurrency" in cells[2][keys["flags"]]
    assert {c["name"] for c in cells} == {"0-final", "1-final", "2-final"}  # the web UI keys rows by name


def test_live_row_is_the_step_so_far_up_to_the_oldest_request_in_flight(run_dir: Path) -> None:
    run = load_run(run_dir)
    step = run.steps[0]  # C=1, 100 tok/s
    t0, t1 = step["steady_start_s"], step["end_s"]
    now = t0 + 0.8 * (t1 - t0)
    mine = [r for r in run.records if r["step"] == 0]
    records = [r for r in mine if r["start_s"] + r["e2e_s"] <= now]  # what has been recorded by now
    oldest = min(r["start_s"] for r in mine if r["start_s"] + r["e2e_s"] > now)  # the one still streaming
    open_step = OpenStep(0, 1, step["min_requests"], step["start_s"], t0)
    live = live_row("tab", open_step, records, now=now, oldest_in_flight_start=oldest, in_flight=1)
    assert exact_until(now, oldest) == oldest == live.row.window_end_s == live.recent_end_s
    assert live.state == "measuring" and live.in_flight == 1
    assert live.recent_start_s == pytest.approx(max(step["start_s"], oldest - 10.0))
    assert live.row.throughput_tok_s == pytest.approx(100.0, rel=0.03)
    assert live.recent_tok_s == pytest.approx(100.0, rel=0.03)
    warming = live_row("tab", OpenStep(0, 1, 30, step["start_s"], None), records, now=t0, oldest_in_flight_start=None,
                       in_flight=1)
    assert warming.state == "warming up" and warming.row.window_s is None


def test_csv_has_live_fields_then_every_summary_field(run_dir: Path) -> None:
    run = load_run(run_dir)
    rows = [final_row("tab", step, run.records) for step in run.steps]
    lines = tab_csv(rows).splitlines()
    assert lines[0].startswith("state,in_flight,recent_tok_s,recent_start_s,recent_end_s,step,target_c,")
    assert len(lines) == 1 + len(run.steps)
    assert lines[2].split(",")[0] == "final"


def test_a_straggler_from_the_previous_step_leaves_nothing_exact_yet(run_dir: Path) -> None:
    run = load_run(run_dir)
    step = run.steps[1]
    open_step = OpenStep(1, 3, step["min_requests"], step["start_s"], None)
    live = live_row("tab", open_step, [], now=step["start_s"] + 1.0, oldest_in_flight_start=step["start_s"] - 0.5,
                    in_flight=4)
    assert live.state == "warming up" and live.row.flags == ()
    assert live.recent_tok_s is None and live.recent_start_s is None and live.recent_end_s is None
    cells = tab_cells([live])[0]
    assert cells["last10s"] == "-" and cells["toks"] == "-" and cells["inflight"] == "4"


def test_final_rows_flag_the_load_processes_as_summarize_does(tmp_path: Path) -> None:
    """The step line's client figures (CPU, standstill, read lag) reach the tab's final rows: a fresh-clone CI run
    beside two others showed ``client_read_lag`` in summarize's row and not in the tab's."""
    run_dir = write_run(tmp_path / "run", SPEC)
    steps_path = run_dir / STEPS_FILE
    steps = [json.loads(line) for line in steps_path.read_text().splitlines()]
    ttft_ms = 1000.0 * summarize_run(load_run(run_dir)).rows[0].ttft_p50_s
    limit_ms = read_lag_limit_ms(ttft_ms / 1000.0)
    # each figure just over its limit on one step, and just under it on the next
    steps[0].update(read_lag_p90_ms={"0": limit_ms + 0.5}, load_cpu={"0": 100.0 * CLIENT_BOUND_CPU - 1.0})
    steps[1].update(load_cpu={"0": 100.0 * CLIENT_BOUND_CPU + 1.0, "1": 20.0}, paused_s=0.0)
    steps[2].update(paused_s=1.5, read_lag_p90_ms={"0": READ_LAG_FLOOR_MS - 0.5})
    steps_path.write_text("".join(json.dumps(s) + "\n" for s in steps))
    run = load_run(run_dir)
    summary = summarize_run(run)
    tab = [final_row(summary.name, step, run.records) for step in run.steps]
    assert [t.row.flags for t in tab] == [r.flags for r in summary.rows]
    flags = [set(t.row.flags) for t in tab]
    assert CLIENT_READ_LAG in flags[0] and CLIENT_BOUND not in flags[0]
    assert CLIENT_BOUND in flags[1] and CLIENT_READ_LAG not in flags[1] and CLIENT_PAUSED not in flags[1]
    assert CLIENT_PAUSED in flags[2] and CLIENT_READ_LAG not in flags[2]
