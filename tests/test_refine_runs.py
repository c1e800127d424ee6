"""Crossover refinement end to end (#27): ``specbench compare`` on two real emulators whose curves cross
between two ladder levels (baseline against the 5-step draft: the cost model puts the crossing near C=14,
between the ladder's C=10 and C=30) adds the bracket's geometric midpoint on both servers, marks it as
added everywhere, and states the crossover with its interval and how it was found. ``--no-refine`` adds none.

The statistical evidence (3 pairs x seeded runs, interval coverage of the analytic crossing) is in
``benchmarks/bench_refine.py``; this test runs one pair once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from locustfiles.target import EmulatorProcess, start_emulator_process
from specbench.cli import main as specbench_main

LOAD = ["--ladder", "1,10,30", "--max-tokens", "48", "--min-requests", "20", "--min-step-time", "1.5",
        "--max-step-time", "20", "--step-ci", "0"]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[EmulatorProcess, EmulatorProcess]]:
    base = start_emulator_process("baseline", speed=10)
    spec = start_emulator_process("eagle3-steps5", speed=10)
    try:
        yield base, spec
    finally:
        base.stop()
        spec.stop()


def _steps(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]


def test_refinement_adds_the_midpoint_on_every_server_and_marks_it(
        servers: tuple[EmulatorProcess, EmulatorProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, spec = servers
    out = tmp_path / "cmp"
    code = specbench_main(["compare", "--baseline", base.url, "--spec", spec.url, "--out", str(out),
                           "--refine-levels", "1", *LOAD])
    stdout = capsys.readouterr().out
    assert code == 0, stdout[-3000:]
    report = json.loads((out / "comparison.json").read_text())
    crossing = report["verdict"]["crossovers"][0]
    assert (crossing["below_c"], crossing["above_c"]) in ((10, 17), (17, 30))  # the added level brackets it now
    assert "refining the crossover: round 1 adds C=17 on every server" in stdout
    assert "crossover refinement: added C=17; stopped: " in stdout
    for name in ("baseline", "spec"):
        steps = _steps(out / name)
        assert [(s["target_c"], s.get("refined", False)) for s in steps] == [(1, False), (10, False), (30, False),
                                                                              (17, True)]
        assert [s["index"] for s in steps] == [0, 1, 2, 3]
        records = [json.loads(line) for line in (out / name / "records.jsonl").read_text().splitlines()]
        assert len({r["request_id"] for r in records}) == len(records)  # ids stay unique after the merge
        added = [r for r in records if r["step"] == 3]
        assert added and all(r["target_c"] == 17 and r["request_id"].startswith("r1-") for r in added)
        assert (out / name / "refined" / "round-1" / "records.jsonl").exists()  # the raw run is kept
    # Same prompt order on both servers at the added level: request N of the level has prompt N.
    first = {name: sorted((r["prompt_seq"], r["prompt_id"]) for r in map(json.loads, (
        out / name / "records.jsonl").read_text().splitlines()) if r["step"] == 3)[:17]
        for name in ("baseline", "spec")}
    assert first["baseline"] == first["spec"]
    levels = {lv["target_c"]: lv for lv in report["levels"]}
    assert levels[17]["refined"] is True and levels[10]["refined"] is False
    line = report["verdict"]["crossover_lines"][0]
    assert line.endswith("from 1 added level") and line.startswith(f"C = {crossing['c']:.3g} (")
    assert f"Crossover: {line}" in stdout
    assert "17*" in (out / "report.md").read_text()
    assert [s["name"] for s in report["saturation"]] == ["baseline", "spec"]


def test_no_refine_adds_no_level(servers: tuple[EmulatorProcess, EmulatorProcess], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    base, spec = servers
    out = tmp_path / "cmp"
    code = specbench_main(["compare", "--baseline", base.url, "--spec", spec.url, "--out", str(out), "--no-refine",
                           "--ladder", "1,30", *LOAD[2:]])
    stdout = capsys.readouterr().out
    assert code == 0, stdout[-3000:]
    assert "refining" not in stdout and not (out / "baseline" / "refined").exists()
    assert [s["target_c"] for s in _steps(out / "spec")] == [1, 30]
    assert "interpolated between C=1 and C=30" in json.loads((out / "comparison.json").read_text())[
        "verdict"]["crossover_lines"][0]


def test_negative_refine_levels_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = specbench_main(["compare", "--baseline", "http://127.0.0.1:9", "--spec", "http://127.0.0.1:9",
                           "--refine-levels", "-1"])
    assert code == 2 and "--refine-levels -1: expected a count of levels" in capsys.readouterr().err
