"""The budget's unused reserve goes back to levels a ladder left without a finished request (#61).

Real runs: a ladder on an emulator whose level is starved (512-token answers of 3 s or more at C=8, a 3 s step:
no request can start and finish in a window inside it, and the window may not open at all), then
``specbench.topup.top_up`` with a real Locust run of that level as its runner, as the comparison job runs it
after refinement.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import summarize_run
from specbench.refine import added_level_options
from specbench.topup import short_levels, top_up
from tests.conftest import run_locust

STARVED = ["--ladder", "8", "--max-tokens", "512", "--min-requests", "8", "--min-step-time", "1",
           "--max-step-time", "3", "--step-ci", "0"]
AGAIN = ["--max-tokens", "512", "--min-requests", "8", "--min-step-time", "1", "--max-step-time", "60",
         "--step-ci", "0"]


@pytest.fixture
def starved(tmp_path: Path, emulator) -> tuple[str, Path]:
    emu = emulator("baseline", speed=2)
    run = tmp_path / "baseline"
    proc = run_locust(emu.url, run, *STARVED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = summarize_run(load_run(run)).rows
    assert short_levels(run) == [8], [(r.target_c, r.window_s, r.requests_ok) for r in rows]
    return emu.url, run


def _runner(url: str):
    def run_levels(_name: str, levels: Sequence[float], sub: Path, share: float | None) -> int:
        options = added_level_options(levels, share, rate_mode=False, extra=AGAIN)
        return run_locust(url, sub, *options, timeout=180).returncode
    return run_levels


def test_the_unused_budget_measures_a_starved_level_again(starved: tuple[str, Path],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    url, run = starved
    assert top_up(["baseline"], {"baseline": run}, _runner(url), lambda: 90.0) == 0
    out = capsys.readouterr().out
    assert "baseline: measuring C=8 again with 1m30s of the budget" in out
    assert short_levels(run) == [], out
    summary = summarize_run(load_run(run))
    assert [r.target_c for r in summary.rows] == [8]  # the starved step is superseded, not a second row
    assert summary.row_at(8) is not None and summary.row_at(8).requests_ok > 0
    assert not [w for w in summary.warnings if w.target_c == 8 and w.code in ("no_window", "no_finished_requests")]
    assert "no finished request in a measured window" not in out


def test_too_little_budget_left_says_so_in_one_line(starved: tuple[str, Path],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    url, run = starved
    assert top_up(["baseline"], {"baseline": run}, _runner(url), lambda: 5.0) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["no finished request in a measured window at baseline C=8 (5s of the budget was left; a "
                   "longer --time-budget or --max-step-time gives them one)"]
    assert not (run / "remeasured").exists()


def test_the_budget_line_says_how_the_time_is_split() -> None:
    # #61: the line named only the ladders' equal parts; a quarter kept for refinement went unmentioned.
    from specbench.compare import budget_line, ladder_share

    line = budget_line(240.0, ladder_share(240.0, 1, 3), 2)
    assert line.startswith("time budget 4m00s for all 2 runs: 3m00s for the ladders")
    assert "about 1m30s" in line and "1m00s kept to pin a crossover" in line
    assert "goes back to levels a ladder left without a finished request" in line
    assert "kept" not in budget_line(240.0, ladder_share(240.0, 1, 0), 2)  # --no-refine: nothing is kept
