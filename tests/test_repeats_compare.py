"""compare --repeats: two identical emulators (true ratio 1) that both slow down over wall time.

Measured once each, the spec after the baseline, the drift reads as a baseline win (at 25% per minute on a
ladder of 4,16: 0.94x, 95% CI 0.92-0.96, with no true difference; ``benchmarks/bench_drift.py``). With three
repeats run in alternating order (baseline spec, spec baseline, baseline spec) the combined interval holds 1,
each side's repeats are flagged ``drift`` with its size, and the sentence says the first repeat's verdict could
come from the order alone.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from specbench.contract.rundir import read_run

DRIFT = "-0.2"  # per minute: about 30% over the run (a minute and a half on a quiet machine)


def test_interleaved_repeats_hold_the_true_ratio_under_drift_and_flag_it(tmp_path, emulator):
    base = emulator("baseline", speed=10, extra=["--drift", DRIFT])
    spec = emulator("baseline", speed=10, extra=["--drift", DRIFT])
    out = tmp_path / "report"
    cmd = [sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec", spec.url,
           "--out", str(out), "--ladder", "4,8", "--max-tokens", "64", "--min-step-time", "3",
           "--max-step-time", "6", "--warmup-time", "1", "--repeats", "3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]

    # level by level, in alternating order (A B, B A, A B at C=4, then at C=8): each run after the one before it
    order = [("baseline", 1), ("spec", 1), ("spec", 2), ("baseline", 2), ("baseline", 3), ("spec", 3)]
    dirs = [out / name if r == 1 else out / f"repeat-{r}" / name for name, r in order]
    runs = [read_run(d) for d in dirs]
    starts = [min(rec["start_s"] for rec in run.records if rec["target_c"] == c) for c in (4, 8) for run in runs]
    assert starts == sorted(starts), starts
    assert all([s["target_c"] for s in run.steps] == [4, 8] and not any(s.get("refined") for s in run.steps)
               for run in runs)

    data = json.loads((out / "repeats.json").read_text())
    level, level_8 = data["levels"]
    assert level_8["target_c"] == 8 and level_8["ratio_low"] <= 1.0 <= level_8["ratio_high"], level_8
    assert data["repeats"] == 3 and level["target_c"] == 4 and len(level["ratios"]) == 3
    assert level["ratio_low"] <= 1.0 <= level["ratio_high"], level
    assert level["winner"] == "unclear" and "drift" in level["flags"], level
    # three repeats run the baseline first twice: the ratio weighs the two orders equally (#76)
    assert level["method"] == "order-balanced" and level["orders"] == {"spec_second": 2, "spec_first": 1}, level
    fell = {d["side"]: d["change"] for d in level["drift"] if d["flagged"]}
    assert set(fell) == {"baseline", "spec"} and all(-0.5 < c < -0.05 for c in fell.values()), level["drift"]
    assert level["dominated_by"] == "between repeats"

    text = proc.stdout
    assert "Over 3 interleaved repeats, spec against baseline: no clear difference at C=4 (" in text, text[-2000:]
    assert "3 repeats, each level in alternating order (baseline spec spec baseline ...)" in text
    assert "drift: baseline at C=4 fell" in text and "drift: spec at C=4 fell" in text
    assert "balanced: each combined ratio is the mean of the two orders' means (the spec measured second in 2" in text
    report = (out / "report.md").read_text()
    assert report.index("## Over the repeats") < report.index("## Verdict")
    if level["first_repeat_winner"] == "baseline":  # the first repeat, baseline first, read the drift as a win
        assert "order: at C=4 the first repeat alone said baseline wins" in text


def test_two_repeats_within_a_budget_hold_the_true_ratio_and_flag_a_25_percent_a_minute_drift(tmp_path, emulator):
    """#76, the issue's drift (25% a minute on both identical servers) with --repeats 2 and a --time-budget: every
    level's interval holds 1 (two repeats, one of each order, are balanced as they stand) and every level has a side
    flagged ``drift``, said per minute in the terminal, report.md and repeats.json."""
    base = emulator("baseline", speed=10, extra=["--drift", "-0.25"])
    spec = emulator("baseline", speed=10, extra=["--drift", "-0.25"])
    out = tmp_path / "report"
    cmd = [sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec", spec.url,
           "--out", str(out), "--ladder", "4,8", "--max-tokens", "64", "--min-step-time", "3", "--warmup-time", "1",
           "--repeats", "2", "--time-budget", "80s"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    data = json.loads((out / "repeats.json").read_text())
    assert [lv["target_c"] for lv in data["levels"]] == [4, 8]
    for level in data["levels"]:
        assert level["ratio_low"] <= 1.0 <= level["ratio_high"], level
        assert level["method"] == "paired" and "drift" in level["flags"], level
        flagged = [d for d in level["drift"] if d["flagged"]]
        assert all(d["per_min"] < -0.05 and d["method"] == "windows" for d in flagged), level["drift"]
    assert re.search(r"drift: (baseline|spec) at C=4 fell \d+%/min over its repeats", proc.stdout), proc.stdout[-2000:]
    assert "%/min over its repeats" in (out / "report.md").read_text()


def test_the_end_check_flags_the_server_that_drifted_and_not_the_steady_one(tmp_path, emulator):
    """One pass, each server's first level measured again at the end: the baseline, slowing by 20% a minute,
    has changed beyond both windows' intervals (flagged, with its size); the spec, which does not drift, has not."""
    base = emulator("baseline", speed=10, extra=["--drift", DRIFT])
    spec = emulator("baseline", speed=10)
    out = tmp_path / "report"
    cmd = [sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec", spec.url,
           "--out", str(out), "--ladder", "4,8", "--max-tokens", "64", "--min-step-time", "4",
           "--max-step-time", "8", "--warmup-time", "1", "--no-refine", "--end-check"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    found = {f["config"]: f for f in json.loads((out / "endcheck.json").read_text())}
    assert set(found) == {"baseline", "spec"}
    assert found["baseline"]["drift"] and found["baseline"]["change"] < -0.05, found["baseline"]
    # Not flagged is the claim. Its size stays well under the baseline's 20% a minute, not under 5%: a fresh-clone CI
    # run beside another suite run and a benchmark measured the steady server 6.1% apart within its windows' noise.
    assert not found["spec"]["drift"] and abs(found["spec"]["change"]) < 0.10, found["spec"]
    assert all(f["level"] == 4 for f in found.values())
    assert "baseline: the first level (4) measured again at the end:" in proc.stdout
    assert "drift, the server changed during the run" in proc.stdout
    assert "spec: the first level (4) measured again at the end:" in proc.stdout
    assert "no change beyond the windows' noise" in proc.stdout
    assert "## Did the servers change during the run?" in (out / "report.md").read_text()
    # never merged into the run: its steps stay the ladder's
    assert [s["target_c"] for s in read_run(out / "baseline").steps] == [4, 8]


def test_a_repeat_count_out_of_range_is_one_line_before_any_server_is_asked(tmp_path):
    for bad in ("0", "21"):
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", "http://127.0.0.1:9",
                               "--spec", "http://127.0.0.1:9", "--out", str(tmp_path / bad), "--repeats", bad],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == (
            f"specbench: error: --repeats {bad}: expected a count from 1 to 20"), proc.stderr
        assert "Traceback" not in proc.stderr and not (tmp_path / bad).exists()


def test_a_sweep_repeats_each_configuration_in_alternating_order_from_a_fresh_server(tmp_path):
    """sweep --repeats 2: each run starts its server afresh (a cold start every repeat), the order reverses in the
    second repeat, and the answer over the repeats holds the true ratio of two identical servers."""
    lines = ["ready_timeout_s: 60", "stop_timeout_s: 10", "configurations:"]
    for name in ("off", "on"):
        lines += [f"  - name: '{name}'", *(["    baseline: true"] if name == "off" else []),
                  f"    command: [{sys.executable}, -m, specbench.emulator, --profile, baseline, --port, '{{port}}', "
                  "--speed, '10']",
                  "    ready: {url: 'http://127.0.0.1:{port}/ready', interval_s: 0.1}"]
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("\n".join(lines) + "\n")
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "sweep", str(sweep), "--out", str(out),
                           "--ladder", "4", "--max-tokens", "64", "--min-step-time", "3", "--max-step-time", "6",
                           "--warmup-time", "1", "--repeats", "2", "--time-budget", "2m"], capture_output=True,
                          text=True, timeout=400,
                          cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    order = [out / "off", out / "on", out / "repeat-2" / "on", out / "repeat-2" / "off"]
    starts = [min(rec["start_s"] for rec in read_run(d).records) for d in order]
    assert starts == sorted(starts), starts
    assert proc.stdout.count(": starting ") == 4 and proc.stdout.count(": server stopped") == 4
    assert proc.stdout.count(" of the budget") == 4  # --time-budget shared run by run, each told its part
    (level,) = json.loads((out / "repeats.json").read_text())["levels"]
    # Two identical servers: the answer sits at 1 within the machine's own unevenness. Not "its interval holds 1":
    # a fresh-clone CI run beside another suite run and a benchmark measured one of them 0.5% slower in both repeats,
    # alternating order and all (0.9950, 0.9957), and the interval, rightly narrow, ended at 0.9993.
    assert level["config"] == "on" and len(level["ratios"]) == 2
    assert level["ratio_low"] <= 1.02 and level["ratio_high"] >= 0.98 and abs(level["ratio"] - 1) < 0.02, level
    assert "Over 2 interleaved repeats, on against off:" in proc.stdout
