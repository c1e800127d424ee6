"""A line now and then while a ladder step runs long, on a terminal: how long it has run, what it has recorded,
and when it will end at the latest.

Why: a step ends on its precision target or at ``--max-step-time`` (600 s by default), and the child prints one
line when it ends; on a real server nothing moved for up to ten minutes. Read from the run directory the child
writes (``meta.json`` for the plan, ``steps.jsonl`` for the closed steps, ``records.jsonl`` for the requests),
so the load processes are not touched and their step lines stay theirs. Bounded: the first line after a step
has run ``first_s`` (30 s), then one every ``every_s`` (60 s), none for a step shorter than that; none at all
when stdout is not a terminal (a log or a pipe gets the step lines alone).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from specbench.contract.rundir import RunDir
from specbench.contract.settings import parse_budget
from specbench.shapes.books import step_min_requests
from specbench.shapes.budget import fmt_duration, level_needs, step_share


class StepWatch:
    """Watches one run directory; ``tick`` says what to print now (or None), ``start``/``stop`` run it in a thread."""

    def __init__(self, run_dir: Path, out: TextIO, *, first_s: float = 30.0, every_s: float = 60.0,
                 poll_s: float = 1.0, clock: Callable[[], float] = time.time, since: float | None = None) -> None:
        self.run_dir, self.out = run_dir, out
        self.first_s, self.every_s, self.poll_s, self.clock = first_s, every_s, poll_s, clock
        self._plan: dict[str, Any] | None = None
        self._closed: list[dict[str, Any]] = []
        self._steps_at = self._records_at = 0  # bytes of each file already read
        self._step_records = 0
        self._said_at: float | None = None
        # an older run's meta.json (a directory reused with --overwrite) is not this one's: it started before
        self._since = clock() if since is None else since
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> str | None:
        """The progress line due now, if any."""
        now = self.clock()
        if self._plan is None:
            self._plan = self._read_plan()
            if self._plan is None:
                return None
        if self._read_steps():
            self._step_records, self._said_at = 0, None
        self._step_records += self._new_lines(RunDir(self.run_dir).records_file)
        levels = self._plan["levels"]
        if len(self._closed) >= levels:
            return None  # the ladder is over: the child drains and reports
        began = self._closed[-1]["end_s"] if self._closed else self._plan["started_s"]
        running = now - began
        due = self.first_s if self._said_at is None else self._said_at + self.every_s
        if running < due:
            return None
        self._said_at = running
        step = len(self._closed)
        return (f"step {step + 1}/{levels} {self._plan['names'][step]}: running for {fmt_duration(running)}, "
                f"{self._step_records} requests recorded so far; {self._latest(running)}")

    def _latest(self, running: float) -> str:
        """When the step ends at the latest: its --max-step-time, or its share of --time-budget if smaller."""
        plan = self._plan or {}
        cap, budget_s = plan["max_step_time"], plan["budget_s"]
        if budget_s:
            elapsed = (self._closed[-1]["end_s"] if self._closed else plan["started_s"]) - plan["started_s"]
            needs = level_needs(plan["ladder"][len(self._closed):], self._closed, plan["min_requests"],
                                plan["min_step_time"])
            share = step_share(budget_s, elapsed, plan["levels"] - len(self._closed), cap, needs)
            if share < cap:
                return f"at most {fmt_duration(max(0.0, share - running))} more (its share of --time-budget)"
        return f"at most {fmt_duration(max(0.0, cap - running))} more (--max-step-time {fmt_duration(cap)})"

    def _read_plan(self) -> dict[str, Any] | None:
        try:
            meta = json.loads(RunDir(self.run_dir).meta_file.read_text(encoding="utf-8"))
            settings = meta["settings"]
            rates = settings.get("rate_ladder") or []
            names = [f"{r:g} req/s" for r in rates] if rates else [f"C={c}" for c in meta["ladder"]]
            levels = len(names)
            if float(meta["started_s"]) < self._since - 5.0:
                return None
            step_ci = float(settings.get("step_ci") or 0.0)
            fixed = int(settings.get("min_requests") or 0)
            return {"levels": levels, "names": names, "started_s": float(meta["started_s"]),
                    "max_step_time": float(settings["max_step_time"]),
                    "ladder": [] if rates else [int(c) for c in meta["ladder"]],
                    "min_requests": lambda c: fixed or step_min_requests(c, step_ci),
                    "min_step_time": float(settings.get("min_step_time") or 0.0),
                    "budget_s": parse_budget(str(settings.get("time_budget") or ""))}
        except (OSError, ValueError, KeyError, TypeError):
            return None  # not written yet (or not a ladder this watch understands): say nothing

    def _read_steps(self) -> bool:
        """Whether a step closed since the last look."""
        before = len(self._closed)
        for line in self._new_text(RunDir(self.run_dir).steps_file):
            try:
                end_s = float(json.loads(line)["end_s"])
                if self._plan and end_s >= self._plan["started_s"]:  # not a line of an older run's file
                    self._closed.append({**json.loads(line), "end_s": end_s})
            except (ValueError, KeyError, TypeError):
                continue
        return len(self._closed) > before

    def _new_text(self, path: Path) -> list[str]:
        """Whole lines appended to a file since the last look (a torn last line waits for its end)."""
        try:
            with path.open("rb") as f:
                if f.seek(0, 2) < self._steps_at:  # rewritten from the start
                    self._steps_at = 0
                f.seek(self._steps_at)
                data = f.read()
        except OSError:
            return []
        whole = data[:data.rfind(b"\n") + 1]
        self._steps_at += len(whole)
        return whole.decode("utf-8", "replace").splitlines()

    def _new_lines(self, path: Path) -> int:
        """Lines appended to a (possibly large) file since the last look, counted without parsing."""
        try:
            with path.open("rb") as f:
                if f.seek(0, 2) < self._records_at:  # rewritten from the start
                    self._records_at = 0
                f.seek(self._records_at)
                data = f.read(1 << 24)
        except OSError:
            return 0
        whole = data[:data.rfind(b"\n") + 1]
        self._records_at += len(whole)
        return whole.count(b"\n")

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            line = self.tick()
            if line:
                print(line, file=self.out, flush=True)

    def start(self) -> StepWatch:
        self._thread = threading.Thread(target=self._loop, name="step-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def watch_on_terminal(run_dir: Path, out: TextIO | None = None) -> StepWatch | None:
    """A started watch of ``run_dir`` where stdout is a terminal; None (nothing printed) where it is not."""
    stream = out or sys.stdout
    try:
        interactive = stream.isatty()
    except (AttributeError, ValueError):
        interactive = False
    return StepWatch(run_dir, stream).start() if interactive else None
