"""Inside a long step the terminal hears how long it has run and how long it may still take (#61): the watch of
the run directory, against a real Locust run and against the files as a run leaves them at a given moment."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import time
from pathlib import Path

from specbench.locustfiles.target import start_emulator_process
from specbench.progress import StepWatch, watch_on_terminal
from tests.conftest import locust_cmd


def _run_dir(root: Path, *, started_ago: float, closed_ago: list[float], records: int, budget: str = "",
             ladder: tuple[int, ...] = (1, 2, 3)) -> Path:
    """A run directory as a ladder leaves it mid-run: its plan, the steps closed so far, the records written."""
    now = time.time()
    root.mkdir()
    (root / "meta.json").write_text(json.dumps({"started_s": now - started_ago, "ladder": list(ladder),
                                                "settings": {"max_step_time": 600.0, "time_budget": budget,
                                                             "rate_ladder": []}}))
    (root / "steps.jsonl").write_text("".join(json.dumps({"index": i, "end_s": now - ago}) + "\n"
                                              for i, ago in enumerate(closed_ago)))
    (root / "records.jsonl").write_text("{}\n" * records)
    return root


def test_a_step_running_long_is_said_with_its_latest_end(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run", started_ago=100, closed_ago=[45], records=7)
    watch = StepWatch(run, io.StringIO(), since=0)
    line = watch.tick()
    assert line is not None and re.fullmatch(
        r"step 2/3 C=2: running for 4[5-9]s, 7 requests recorded so far; "
        r"at most 9m1\ds more \(--max-step-time 10m00s\)",
        line), line
    assert watch.tick() is None  # not again until every_s has passed
    with (run / "steps.jsonl").open("a") as f:  # the step closes: the next one starts its own count
        f.write(json.dumps({"index": 1, "end_s": time.time()}) + "\n")
    assert watch.tick() is None  # a fresh step is quiet for first_s


def test_a_short_step_and_a_finished_ladder_say_nothing(tmp_path: Path) -> None:
    assert StepWatch(_run_dir(tmp_path / "a", started_ago=50, closed_ago=[10], records=3),
                     io.StringIO(), since=0).tick() is None
    assert StepWatch(_run_dir(tmp_path / "b", started_ago=500, closed_ago=[400, 300, 200], records=3),
                     io.StringIO(), since=0).tick() is None
    assert StepWatch(tmp_path / "none", io.StringIO()).tick() is None  # no meta.json yet


def test_an_older_runs_files_are_not_this_runs(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run", started_ago=900, closed_ago=[45], records=7)
    assert StepWatch(run, io.StringIO(), since=0).tick() is not None  # the same files, as this run's
    assert StepWatch(run, io.StringIO()).tick() is None  # a directory reused with --overwrite, not yet rewritten


def test_under_a_budget_the_latest_end_is_the_steps_share(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run", started_ago=100, closed_ago=[45], records=7, budget="5m")
    line = StepWatch(run, io.StringIO(), since=0).tick()
    # 300 s less the 5% drain reserve, less 55 s used, over the two levels left: about 115 s, 45 s of them gone
    assert line is not None and re.search(r"at most 1m[01]\ds more \(its share of --time-budget\)", line), line


def test_only_a_terminal_gets_the_lines(tmp_path: Path) -> None:
    assert watch_on_terminal(tmp_path, io.StringIO()) is None
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as tty:
        watch = watch_on_terminal(tmp_path, tty)
        assert watch is not None
        watch.stop()
    os.close(leader)


def test_a_real_long_step_is_reported_while_it_runs(tmp_path: Path) -> None:
    out = io.StringIO()
    with start_emulator_process("baseline", speed=20) as emu:
        run = tmp_path / "run"
        child = subprocess.Popen(locust_cmd(emu.url, run, "--ladder", "1", "--max-tokens", "32", "--min-step-time",
                                            "6", "--step-ci", "0", "--max-step-time", "60"),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        watch = StepWatch(run, out, first_s=2.0, every_s=2.0, poll_s=0.2).start()
        try:
            _, err = child.communicate(timeout=180)
        finally:
            watch.stop()
    assert child.returncode == 0, err[-3000:]
    lines = out.getvalue().splitlines()
    assert lines, "no progress line during a step of 6 s or more"
    counts = []
    for line in lines:
        m = re.fullmatch(r"step 1/1 C=1: running for (\d+)s, (\d+) requests recorded so far; at most \d+s more "
                         r"\(--max-step-time 1m00s\)", line)
        assert m, line
        counts.append(int(m.group(2)))
    assert counts == sorted(counts) and counts[-1] > 0, counts
    step = json.loads((run / "steps.jsonl").read_text().splitlines()[0])
    # bounded: the first after 2 s of the step, then one per 2 s at most (the warm-up and Locust's start included)
    assert len(lines) <= (step["end_s"] - json.loads((run / "meta.json").read_text())["started_s"]) / 2.0 + 1, lines
