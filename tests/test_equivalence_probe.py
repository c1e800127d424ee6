"""The paired output-equivalence probe (#76): the test on discordant pairs, and whole `specbench compare` jobs.

Real compares against real emulators: a speculative server that changes 0.5% of its tokens (``lossy.prob 0.005``,
a profile written here: about 18% of 48-token answers) must be caught by the probe, its changed count equal to
the emulator's ledger for the very same requests; the lossless ``eagle3`` against ``baseline-batchvariant``, whose
own answers change under load, must not be flagged (the near miss: the repeat's noise is the floor).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis import load_run
from specbench.analysis.stats.proportion import sign_greater, smallest_sign_detectable
from specbench.analysis.verdicts.equivalence import Answer, Changes, Equivalence
from specbench.analysis.verdicts.equivalence_probe import (
    ProbeAnswers,
    judge_probe,
    probe_levels,
    probe_of,
    with_probe,
)
from specbench.contract.rundir import RunDir
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import ledger, wait_until
from tests.procs import descendants, running

LOSSY_05 = "base: eagle3\nlossy:\n  prob: 0.005\n  after: 8\n"
SHORT = ("--ladder", "1,4", "--max-tokens", "48", "--min-requests", "8", "--min-step-time", "1",
         "--max-step-time", "60", "--step-ci", "0", "--equivalence-probe")


def _answers(changed: set[int], n: int) -> dict[int, Answer]:
    return {q: Answer(f"x{q}" if q in changed else f"a{q}", None, None) for q in range(n)}


def test_the_sign_test_on_discordant_pairs() -> None:
    assert sign_greater(0, 0) == 1.0
    assert sign_greater(5, 0) == pytest.approx(1 / 32)  # five prompts only speculation changed: p < 5%
    assert sign_greater(4, 0) == pytest.approx(1 / 16)
    assert sign_greater(3, 3) == pytest.approx(42 / 64)
    assert smallest_sign_detectable(0, 60) == 5
    assert smallest_sign_detectable(0, 3) is None


def test_the_probe_verdicts() -> None:
    ref = ProbeAnswers(4, _answers(set(), 60))
    same = ProbeAnswers(8, _answers(set(), 60))
    lossy = judge_probe(ref, same, ProbeAnswers(8, _answers({1, 5, 9, 20, 33, 41}, 60)))
    assert (lossy.kind, lossy.spec_only, lossy.repeat_only, lossy.compared) == ("not_lossless", 6, 0, 60)
    assert "this server is not lossless" in lossy.text and "p = 0.016" in lossy.text
    assert judge_probe(ref, same, ProbeAnswers(8, _answers(set(), 60))).kind == "lossless"
    # The repeat changed as many as speculation: the floor, not a finding.
    wide = ProbeAnswers(4, _answers(set(), 200))
    noisy = judge_probe(wide, ProbeAnswers(8, _answers({2, 3, 4, 6}, 200)), ProbeAnswers(8, _answers({1, 5, 9}, 200)))
    assert noisy.kind == "within_noise" and (noisy.spec_only, noisy.repeat_only) == (3, 4)
    few = judge_probe(ProbeAnswers(4, _answers(set(), 12)), ProbeAnswers(8, _answers(set(), 12)),
                      ProbeAnswers(8, _answers({1, 2}, 12)))
    assert few.kind == "too_few" and "not enough answers to tell" in few.text


def test_with_probe_puts_the_probe_first_and_keeps_a_load_finding() -> None:
    empty = Changes(0, 0, ())
    level = Equivalence("too_few", "not enough answers to tell: ...", "token", 1, (), empty, empty, empty)
    caught = judge_probe(ProbeAnswers(4, _answers(set(), 40)), ProbeAnswers(8, _answers(set(), 40)),
                         ProbeAnswers(8, _answers(set(range(8)), 40)))
    eq = with_probe(level, caught)
    assert eq.kind == "not_lossless" and eq.probe is caught
    assert eq.text.startswith("paired probe: speculation changed 8 of 40") and "; under load, not enough" in eq.text
    clean = judge_probe(ProbeAnswers(4, _answers(set(), 40)), ProbeAnswers(8, _answers(set(), 40)),
                        ProbeAnswers(8, _answers(set(), 40)))
    load_only = Equivalence("not_lossless", "speculation changed ...", "token", 1, (), empty, empty, empty)
    assert with_probe(load_only, clean).kind == "not_lossless"  # a change under load alone still counts
    assert with_probe(level, None) is level


def _compare(base: str, spec: str, out: Path, *extra: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """One `specbench compare` (no budget: the probe's default size); its equivalence, the spec's ledger, stdout."""
    with start_emulator_process(base, speed=20) as b, start_emulator_process(spec, speed=20) as s:
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", b.url, "--spec",
                               s.url, "--out", str(out), *SHORT, *extra], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        entries = ledger(s.url)
    return json.loads((out / "comparison.json").read_text())["equivalence"], entries, proc.stdout


def test_a_spec_changing_half_a_percent_of_tokens_is_caught_by_the_probe(tmp_path: Path) -> None:
    profile = tmp_path / "lossy05.yaml"
    profile.write_text(LOSSY_05)
    eq, entries, stdout = _compare("baseline", str(profile), tmp_path / "out")
    assert ("output-equivalence probe: about 64 prompts to baseline at C=4 and again at C=8, beside spec at C=8"
            in stdout)
    pr = eq["probe"]
    assert eq["kind"] == "not_lossless" and pr["kind"] == "not_lossless", eq["text"]
    assert pr["compared"] >= 60 and pr["repeat_changed"] == 0 and pr["repeat_only"] == 0
    # The probe's changed count is the ledger's: the spec's probe answers the emulator changed, prompt by prompt.
    base_levels = probe_levels(load_run(RunDir(tmp_path / "out" / "baseline").probe().path))
    spec_run = load_run(RunDir(tmp_path / "out" / "spec").probe().path)
    compared = set(base_levels[4]) & set(base_levels[8]) & set(probe_levels(spec_run)[8])
    by_rid = {e["rid"]: e for e in entries}
    truth = sorted(by_rid[r["request_id"]]["output_change"]["position"] for r in spec_run.records
                   if r["status"] == "ok" and r["prompt_seq"] in compared
                   and by_rid[r["request_id"]]["output_change"] is not None)
    assert pr["first_diff_positions"] == truth and pr["spec_changed"] == len(truth) >= 5
    again = probe_of(load_run(tmp_path / "out" / "baseline"), load_run(tmp_path / "out" / "spec"))
    assert again is not None and again.spec_only == pr["spec_only"]
    assert "Paired probe:" in (tmp_path / "out" / "report.md").read_text()


def test_a_lossless_spec_beside_a_batch_variant_baseline_is_not_flagged(tmp_path: Path) -> None:
    """The near miss: the baseline's own answers change under load (its repeat at C=8 against its reference at
    C=4); the lossless spec's answers differ from the reference only where the reference itself changed."""
    eq, _, _ = _compare("baseline-batchvariant", "eagle3", tmp_path / "out")
    pr = eq["probe"]
    assert pr is not None and pr["compared"] >= 60
    assert pr["repeat_changed"] > 0, "the batch-variant baseline changed none of its answers at C=8"
    assert pr["kind"] != "not_lossless" and eq["kind"] != "not_lossless", eq["text"]
    # A lossless spec differs from the reference where the reference itself changed; the repeat shares such a
    # change only where a step happened to hold the same batch size at that token (the draw is per batch size).
    assert pr["spec_only"] < pr["repeat_only"]


def test_no_probe_without_kept_answers(tmp_path: Path) -> None:
    eq_none = tmp_path / "out"
    with start_emulator_process("baseline", speed=20) as b, start_emulator_process("eagle3", speed=20) as s:
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", b.url, "--spec",
                               s.url, "--out", str(eq_none), *SHORT, "--no-check-output"], capture_output=True,
                              text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "output-equivalence probe" not in proc.stdout
    assert not RunDir(eq_none / "baseline").probe().path.exists()


def test_the_budget_line_names_the_probe_share() -> None:
    from specbench.compare import budget_line, ladder_share
    from specbench.probe import PROBE_SHARE

    ladders = ladder_share(80.0, 1, 3, probe=True)
    assert ladders == pytest.approx(80.0 * (1 - 0.25 - PROBE_SHARE))
    line = budget_line(80.0, ladders, 2, 80.0 * PROBE_SHARE)
    assert "20s kept for the output-equivalence probe" in line and "20s kept to pin a crossover" in line


def test_a_ladder_after_one_that_ran_over_takes_from_the_probe_reserve() -> None:
    # Seen in the benchmark on a loaded machine: the baseline's ladder ran 10 s over its 20 s, and the spec's
    # 10.5 s for 5 levels was refused ("a step needs at least 2 s"); the probe's reserve lends it what it needs.
    from specbench.compare import ladder_budget, least_ladder_s

    assert ladder_budget(5, 40.0, 20.0, 0.0, 2) == pytest.approx(20.0)  # on plan: an equal part
    assert ladder_budget(5, 40.0, 20.0, 29.5, 1) == pytest.approx(least_ladder_s(5))
    assert least_ladder_s(5) > 10.5
    assert ladder_budget(5, 40.0, 0.0, 29.5, 1) == pytest.approx(10.5)  # no probe: nothing to lend
    assert ladder_budget(5, 40.0, 20.0, 55.0, 1) == pytest.approx(5.0)  # the reserve is spent too


def test_ctrl_c_during_the_probe_stops_its_runs_and_writes_a_partial_report(tmp_path: Path) -> None:
    """Ctrl-C reaches specbench's main thread only; the probe's runs, waited on by other threads, are stopped
    (SIGTERM) rather than left to run their count, and the report is still written (exit 130)."""
    out = tmp_path / "out"
    with start_emulator_process("baseline", speed=2) as b, start_emulator_process("eagle3", speed=2) as s:
        proc = subprocess.Popen([sys.executable, "-m", "specbench.cli", "compare", "--baseline", b.url, "--spec",
                                 s.url, "--out", str(out), "--ladder", "1", "--max-tokens", "48", "--min-requests",
                                 "4", "--min-step-time", "1", "--step-ci", "0", "--equivalence-probe"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        below: set[int] = set()
        try:
            wait_until(lambda: RunDir(out / "spec").probe().has_records(), timeout_s=120, what="the probe's records")
            below = descendants(proc.pid)
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 130, stdout[-2000:] + stderr[-2000:]
            assert "output-equivalence probe: interrupted" in stdout and "Traceback" not in stderr
            assert (out / "report.md").exists()
            wait_until(lambda: not any(map(running, below)), timeout_s=10,
                       what=lambda: f"no process left; running: {sorted(filter(running, below))}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
