"""Shared fixtures: emulators as real server processes on loopback, and headless Locust runs of the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
import requests

from specbench.launch import free_port
from specbench.locustfiles.target import EmulatorProcess, start_emulator_process

REPO = Path(__file__).resolve().parent.parent
# The benchmark scripts (benchmarks/, not installed) import their siblings by bare name, as when run as scripts;
# the emulator tests reuse their client and figures the same way.
sys.path.insert(0, str(REPO / "benchmarks"))
LOCUSTFILE = REPO / "locustfiles" / "sglang.py"

# The quick tier (`pytest -m quick`, the inner loop: about a minute): contract, analysis and unit tests that start
# no load run. A test in these paths that is marked `slow` (e.g. a long real run) stays out of it.
QUICK_PATHS = ("tests/analysis/", "tests/test_import_rules.py", "tests/test_settings.py", "tests/test_prompts.py",
               "tests/test_budget.py", "tests/emulator/test_emu_costmodel.py", "tests/test_hardening_inputs.py",
               "tests/test_streams.py", "tests/test_module_size.py", "tests/test_rundir_owner.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
        if path.startswith(QUICK_PATHS) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.quick)


@pytest.fixture
def emulator() -> Iterator[Callable[..., EmulatorProcess]]:
    """Factory: ``emulator("baseline", speed=20, extra=["--fault-503", "0.1"])``; all stopped at teardown."""
    started: list[EmulatorProcess] = []

    def start(profile: str = "baseline", *, speed: float = 20.0, extra: list[str] | None = None) -> EmulatorProcess:
        emu = start_emulator_process(profile, speed=speed, extra=extra)
        started.append(emu)
        return emu

    yield start
    for emu in started:
        emu.stop()


T = TypeVar("T")


def wait_until_or_timeout(ready: Callable[[], T], *, timeout_s: float, poll_s: float = 0.1,
                          sleep: Callable[[float], None] = time.sleep) -> T | None:
    """Poll ``ready`` until it returns something truthy and return that, or None once ``timeout_s`` has passed.

    For the few waits a test goes on from either way (kill a run once it has written some records, or after a
    minute at most); a wait whose condition the test needs is ``wait_until``, which fails instead.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = ready()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        sleep(poll_s)


def wait_until(ready: Callable[[], T], *, timeout_s: float, what: str | Callable[[], str], poll_s: float = 0.1,
               sleep: Callable[[float], None] = time.sleep) -> T:
    """Poll ``ready`` until it returns something truthy and return that; fail naming ``what`` after the timeout.

    Tests synchronise on the event they need (a file line, a ledger entry), never on a sleep of a guessed length.
    ``what`` may be a callable, asked at the timeout, so the failure can show the last state seen; ``sleep`` may be
    a browser's own wait (Playwright's sync API wants its pages to wait with ``page.wait_for_timeout``).
    """
    value = wait_until_or_timeout(ready, timeout_s=timeout_s, poll_s=poll_s, sleep=sleep)
    if value is None:
        raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what if isinstance(what, str) else what()}")
    return value


def wait_answering(url: str, *, timeout_s: float, what: str) -> None:
    """Wait until a server (a Locust web UI, say) answers at ``url`` with any status; fail naming ``what``."""
    def answers() -> bool:
        try:
            requests.get(url, timeout=2)
        except requests.RequestException:
            return False
        return True

    wait_until(answers, timeout_s=timeout_s, what=f"{what} to answer at {url}", poll_s=0.3)


def ledger(url: str) -> list[dict[str, Any]]:
    """The emulator's truth: one entry per finished request."""
    return requests.get(url + "/_emulator/requests", timeout=10).json()


# Flags that say this machine starved the client (a busy neighbour, other tests), not that the run under test went
# wrong: tests that expect a clean step ignore these and check the rest. client_paused too: a load process that the
# machine stopped for a while (one worker of a --processes 3 run stood still 1.23 s beside two other suite runs,
# and its step's tokens/s was still within 2% of the single-process run's).
MACHINE_FLAGS = frozenset({"client_bound", "client_lag", "client_read_lag", "client_paused"})


def read_lag_p90_s(step: dict[str, Any]) -> float:
    """A steps.jsonl line's read lag: the laggiest load process's p90, in seconds (0 where none was measured)."""
    return max(step.get("read_lag_p90_ms", {}).values(), default=0.0) / 1000.0


def run_flags(step: dict[str, Any]) -> set[str]:
    """A step's flags less the ones about this machine's load."""
    return set(step["flags"]) - MACHINE_FLAGS


def ledger_window_tok_s(entries: list[dict[str, Any]], t0: float, t1: float) -> float:
    """Output tokens per second the emulator wrote in [t0, t1): the truth of a step's throughput, on the server's side.

    Needs ledger entries with ``chunk_ms`` (``--ledger-chunk-times``); a failed or cut request counts none, as in
    the suite's own window figure.
    """
    tokens = sum(n for e in entries if e["status"] == 200 and e["finish_reason"] in ("length", "stop")
                 for n, ms in zip(e["tokens_per_chunk"], e["chunk_ms"], strict=True)
                 if t0 <= e["arrival_s"] + ms / 1000.0 < t1)
    return tokens / (t1 - t0)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def locust_cmd(host: str | None, out: Path, *args: str) -> list[str]:
    """The locustfile's command line; with ``--processes`` and no master port, a free one (not Locust's 5557)."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
           "--out", str(out), "--label", "test"]
    if host:
        cmd += ["--host", host]
    if "--processes" in args and "--master-bind-port" not in args:
        port = str(free_port())
        cmd += ["--master-bind-port", port, "--master-port", port]
    return cmd + list(args)


def run_locust(host: str | None, out: Path, *args: str, timeout: float = 180.0,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A real headless Locust run of the suite's locustfile; output captured for assertions."""
    return subprocess.run(locust_cmd(host, out, *args), capture_output=True, text=True, timeout=timeout,
                          cwd=out.parent, env={**os.environ, **(env or {})})


def runs_on_profiles(root: Path, profiles: dict[str, Path], args: tuple[str, ...], *, speed: float,
                     timeout: float = 180.0) -> dict[str, Any]:
    """One headless run of ``args`` per emulator profile, each against a fresh emulator of its own (stopped after).

    For module-scoped fixtures whose tests compare runs of differently configured servers: the answer maps each
    name to its run's directory (``root / name``) and ``f"{name}_ledger"`` to that emulator's truth.
    """
    made: dict[str, Any] = {}
    for name, profile in profiles.items():
        emu = start_emulator_process(str(profile), speed=speed)
        try:
            proc = run_locust(emu.url, root / name, *args, timeout=timeout)
            assert proc.returncode == 0, proc.stderr[-3000:]
            made[name], made[f"{name}_ledger"] = root / name, ledger(emu.url)
            made[f"{name}_log"] = proc.stderr
        finally:
            emu.stop()
    return made


# Steps end on their minimums: tests that check records, faults and wiring need no +-3% precision target (the
# default --step-ci 0.03 would run each step to it, up to --max-step-time); precision has tests of its own.
FAST_LADDER = ("--min-step-time", "1", "--max-step-time", "60", "--step-ci", "0")


# One shortened `specbench demo` serves two tests that judge different things of the same command: the report's
# seed pattern (tests/test_specbench.py) and what the terminal and the run logs show (tests/test_console.py).
# Its top level, above 100, makes the ladder start users at a rate Locust warns about, so the spawn-rate warning
# is really provoked.
SHORT_DEMO_LADDER = (1, 10, 120)


@pytest.fixture(scope="session")
def short_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The demo's output directory and its finished process (exit status, stdout, stderr), run once per session."""
    root = tmp_path_factory.mktemp("short_demo")
    out = root / "demo"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "demo", "--out", str(out), "--ladder",
                           ",".join(map(str, SHORT_DEMO_LADDER)), "--max-tokens", "64", "--min-requests", "10",
                           "--min-step-time", "1", "--step-ci", "0"],
                          capture_output=True, text=True, timeout=400, cwd=root)
    return out, proc


# One `specbench compare` of a baseline and a lossless eagle3 emulator (ladder 1,4) serves two tests that judge
# different things of the same command: the report's figures against the analysis of its own runs
# (tests/test_specbench.py) and the output-equivalence check it makes by default (tests/test_equivalence.py).
COMPARE_PAIR_LADDER = (1, 4)


@pytest.fixture(scope="session")
def compare_pair(tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[Path, subprocess.CompletedProcess[str], str, str]:
    """The report directory, the finished process, and the baseline's and spec server's URLs (since stopped)."""
    out = tmp_path_factory.mktemp("compare_pair") / "report"
    with start_emulator_process("baseline", speed=20) as base, start_emulator_process("eagle3", speed=20) as spec:
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec",
                               spec.url, "--out", str(out), "--ladder", ",".join(map(str, COMPARE_PAIR_LADDER)),
                               "--max-tokens", "48", "--min-requests", "12", "--min-step-time", "1",
                               "--max-step-time", "60", "--step-ci", "0"],
                              capture_output=True, text=True, timeout=300)
    return out, proc, base.url, spec.url


def energy_slack(samples: Sequence[Any], row: Any) -> float:
    """The relative error the client's own measured timing allows a step's energy per token, beyond the 2%.

    A sample is timed midway through its GET, so the energy at a window edge can be off by half the read's
    duration (``read_s``); the tokens counted in the window are those the client read in it, so an event loop
    late by its read lag moves each edge's tokens. Both are measured in the run: on a quiet machine a few ms over
    a window of seconds (~0.1%), more beside a busy neighbour, where a fixed 2% alone failed."""
    near = [s.get("read_s", 0.0) for s in samples
            if row.window_start_s - 1 <= s["t_s"] <= row.window_end_s + 1]
    lag_s = (row.client_read_lag_p90_ms or 0.0) / 1000.0
    return (max(near, default=0.0) + 2 * lag_s) / row.window_s
