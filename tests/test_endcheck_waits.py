"""The end check waits for every level's window (#76): a drift check of the first level is no reason to leave a
top level without a figure. Run directories written through the schema's real fields; the level runner is the
job's seam (what it would launch is recorded, nothing is launched)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from specbench.endcheck import first_level, run_end_checks
from tests.analysis.synthetic_runs import Level, RunSpec, write_run

NO_WINDOW = {"steady_start_s": None, "achieved_c": None, "flags": ["no_window"]}


def _dirs(tmp_path: Path, spec_top_short: bool) -> dict[str, Path]:
    top = Level(250, 700.0, step_extra=NO_WINDOW) if spec_top_short else Level(250, 700.0)
    return {"baseline": write_run(tmp_path / "baseline", RunSpec("baseline", [Level(1, 90.0), Level(250, 770.0)])),
            "spec": write_run(tmp_path / "spec", RunSpec("spec", [Level(1, 77.0), top]))}


@pytest.mark.parametrize("short", [True, False])
def test_the_end_check_is_skipped_while_a_level_went_without_a_window(tmp_path: Path, capsys, short: bool) -> None:
    dirs = _dirs(tmp_path, short)
    asked: list[tuple[str, Sequence[float]]] = []

    shares: list[float | None] = []

    def run_levels(name: str, levels: Sequence[float], sub: Path, share: float | None) -> int:
        asked.append((name, list(levels)))
        shares.append(share)
        return 0

    assert run_end_checks(list(dirs), dirs, run_levels, lambda: 10_000.0, forced=False) == 0
    out = capsys.readouterr().out
    if short:  # spec C=250 has no window: named, and no first level measured again
        assert asked == [] and "end check: not run (spec C=250 went without a measured window" in out
    else:  # the near miss: every level measured, time enough: both servers measure C=1 again
        assert asked == [("baseline", [1.0]), ("spec", [1.0])] and "not run" not in out
        # each as long as its first step ran (plus the drain's reserve): never on to --max-step-time
        firsts = [first_level(dirs[name]) for name in ("baseline", "spec")]
        assert shares == [pytest.approx(f.seconds / 0.95 + 1.0) for f in firsts if f is not None]
    asked.clear()
    run_end_checks(list(dirs), dirs, run_levels, lambda: 10_000.0, forced=True)  # --end-check: always
    assert asked == [("baseline", [1.0]), ("spec", [1.0])]
