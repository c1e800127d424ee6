"""Crossover refinement end to end (#27): ``specbench compare`` on two real emulators whose curves cross
between two ladder levels (baseline against the 5-step draft: the cost model puts the crossing near C=14,
between the ladder's C=5 and C=30, where its ratios are 1.37 and 0.86, so a busy machine's drift cannot move
the crossing out of the bracket; with C=10, ratio 1.10, it once did) adds the bracket's geometric midpoint on
both servers, marks it as added everywhere, and states the crossover with its interval and how it was found.
``--no-refine`` adds none.

The statistical evidence (3 pairs x seeded runs, interval coverage of the analytic crossing) is in
``benchmarks/bench_refine.py``; this test runs one pair once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench.cli import main as specbench_main
from specbench.locustfiles.target import EmulatorProcess, start_emulator_process

LOAD = ["--ladder", "5,30", "--max-tokens", "48", "--min-requests", "40", "--min-step-time", "1",
        "--max-step-time", "20", "--step-ci", "0"]


# Speed 5, not 10: at 10 the load process on this 2-core machine caps the C=30 step, which pulls the ratio
# there toward 1 (0.93 measured against the model's 0.86) until the crossing is no longer significant.
@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[EmulatorProcess, EmulatorProcess]]:
    base = start_emulator_process("baseline", speed=5)
    spec = start_emulator_process("eagle3-steps5", speed=5)
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
    assert (crossing["below_c"], crossing["above_c"]) in ((5, 12), (12, 30))  # the added level brackets it now
    assert "refining the crossover: round 1 adds C=12 on every server" in stdout
    assert "crossover refinement: added C=12; stopped: " in stdout
    for name in ("baseline", "spec"):
        steps = _steps(out / name)
        assert [(s["target_c"], s.get("refined", False)) for s in steps] == [(5, False), (30, False), (12, True)]
        assert [s["index"] for s in steps] == [0, 1, 2]
        records = [json.loads(line) for line in (out / name / "records.jsonl").read_text().splitlines()]
        assert len({r["request_id"] for r in records}) == len(records)  # ids stay unique after the merge
        added = [r for r in records if r["step"] == 2]
        assert added and all(r["target_c"] == 12 and r["request_id"].startswith("r1-") for r in added)
        assert (out / name / "refined" / "round-1" / "records.jsonl").exists()  # the raw run is kept
    # Same prompt order on both servers at the added level: request N of the level has prompt N.
    first = {name: sorted((r["prompt_seq"], r["prompt_id"]) for r in map(json.loads, (
        out / name / "records.jsonl").read_text().splitlines()) if r["step"] == 2)[:12]
        for name in ("baseline", "spec")}
    assert first["baseline"] == first["spec"]
    levels = {lv["target_c"]: lv for lv in report["levels"]}
    assert levels[12]["refined"] is True and levels[5]["refined"] is False
    line = report["verdict"]["crossover_lines"][0]
    assert line.endswith("from 1 added level") and line.startswith(f"C = {crossing['c']:.3g} (")
    assert f"Crossover: {line}" in stdout
    assert "12*" in (out / "report.md").read_text()
    assert [s["name"] for s in report["saturation"]] == ["baseline", "spec"]


def test_negative_refine_levels_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = specbench_main(["compare", "--baseline", "http://127.0.0.1:9", "--spec", "http://127.0.0.1:9",
                           "--refine-levels", "-1"])
    assert code == 2 and "--refine-levels -1: expected a count of levels" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "needle"), [
    (["--stop-after-saturation", "5000"], "--stop-after-saturation"),
    (["--stop-after-saturation", "-2"], "--stop-after-saturation"),
    ("stop-after-saturation: 5000\n", "key 'stop-after-saturation'"),
])
def test_stop_after_saturation_out_of_range_is_one_line_before_any_request(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], given: list[str] | str, needle: str) -> None:
    """Its range is its row in contract.limits, checked through its declaration, flag or profile alike."""
    if isinstance(given, str):
        profile = tmp_path / "p.yaml"
        profile.write_text(given, encoding="utf-8")
        given = ["--suite-config", str(profile)]
    code = specbench_main(["compare", "--baseline", "http://127.0.0.1:9", "--spec", "http://127.0.0.1:9",
                           "--out", str(tmp_path / "out"), *given])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "at least -1 and at most 1000" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_stop_after_saturation_skips_beyond_every_servers_saturation_and_keeps_levels_paired(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Baseline capped at 8 running requests, spec at 2: each saturates at or one level above its cap (at the
    cap itself every request still waits one refill step; above it a queued request takes the slot at once).
    With --stop-after-saturation 1 each ladder stops one level after its own saturation; the spec server then
    measures the baseline's extra levels too, and the levels beyond the later saturation are skipped by both.
    The option comes from a suite profile, so compare must take it from the validated settings (not its own
    command line), and the report from the runs' typed meta.json settings."""
    # Speed 5 keeps the emulators' token rate low enough that a busy machine does not cap them first.
    base = start_emulator_process("baseline", speed=5, extra=["--max-running-requests", "8"])
    spec = start_emulator_process("eagle3", speed=5, extra=["--max-running-requests", "2"])
    out = tmp_path / "sat"
    ladder = [2, 4, 8, 16, 32, 64]
    try:
        profile = tmp_path / "sat.yaml"
        profile.write_text("stop-after-saturation: 1\n", encoding="utf-8")
        code = specbench_main(["compare", "--baseline", base.url, "--spec", spec.url, "--out", str(out),
                               "--no-refine", "--suite-config", str(profile), "--ladder", ",".join(map(str, ladder)),
                               *LOAD[2:]])
    finally:
        base.stop()
        spec.stop()
    stdout = capsys.readouterr().out
    assert code == 0, stdout[-3000:]
    report = json.loads((out / "comparison.json").read_text())
    sat = {s["name"]: s["target_c"] for s in report["saturation"]}
    assert sat["baseline"] in (4, 8, 16) and sat["spec"] in (2, 4)  # within one ladder level of each cap
    ran = [s["target_c"] for s in _steps(out / "baseline")]
    assert ran == ladder[:ladder.index(sat["baseline"]) + 2]  # one level beyond its saturation, then stopped
    spec_steps = _steps(out / "spec")
    # The spec ladder stopped where its own steps so far showed saturation; the report's saturation is judged
    # afterwards over every level (the topped-up ones too), so it may name a level one higher.
    paired = out / "spec" / "paired"
    topped_levels = [s["target_c"] for s in _steps(paired)] if (paired / "steps.jsonl").exists() else []
    own = [s["target_c"] for s in spec_steps][:len(spec_steps) - len(topped_levels)]
    assert own == ladder[:len(own)] and ladder.index(sat["spec"]) <= len(own)  # stopped within a level of it
    assert own + topped_levels == ran  # its own ladder, then the levels the baseline ran beyond it
    topped = ", ".join(f"C={c}" for c in topped_levels)
    if topped:  # the usual case: the spec server (cap 2) stops before the baseline (cap 8)
        assert f"spec: measuring {topped}, which another server ran, so the levels stay paired" in stdout
    else:
        assert "which another server ran" not in stdout
    assert not any(s.get("refined") for s in spec_steps)  # topped up to pair, not a refinement
    assert "refining" not in stdout and not (out / "spec" / "refined").exists()  # --no-refine
    assert [lv["target_c"] for lv in report["levels"]] == ran
    skipped = ", ".join(f"C={c}" for c in ladder[len(ran):])
    assert report["skipped"].startswith(f"skipped {skipped}: more than 1 level beyond the saturation")
    assert f"Skipped: {report['skipped']}" in stdout
