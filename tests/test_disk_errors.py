"""A disk that refuses the run's files: one clear line, the run stops at once, what reached disk is kept.

Real small file systems (tmpfs mounted for the test: a 48 KiB one fills after some fifty records, a read-only one
refuses the run directory), a real emulator and a real headless Locust run. Mounting needs root, which CI has;
elsewhere the tests are skipped with that reason.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench.analysis import load_run
from specbench.contract.rundir import RECORDS_FILE, SERVER_METRICS_FILE
from tests.conftest import FAST_LADDER, ledger, run_locust

pytestmark = pytest.mark.slow

# Three levels of 200 requests each: minutes of load if the run did not stop at the full disk.
LADDER = ("--ladder", "1,4,8", "--max-tokens", "16", "--min-requests", "200", *FAST_LADDER)


def _mount(path: Path, options: str) -> Iterator[Path]:
    path.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}): needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    yield from _mount(tmp_path / "small", "size=48k")


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    yield from _mount(tmp_path / "ro", "size=48k,ro")


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("specbench: error:")]


def test_a_disk_that_fills_mid_run_stops_it_with_one_line_and_keeps_what_was_written(full_disk, emulator):
    emu = emulator("baseline")
    started = time.monotonic()
    proc = run_locust(emu.url, full_disk / "run", *LADDER)
    elapsed = time.monotonic() - started
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 3, proc.stderr[-3000:]
    errors = _errors(proc.stderr)
    assert len(errors) == 1, errors
    assert f"cannot write {full_disk / 'run'}" in errors[0] and "No space left on device (ENOSPC)" in errors[0]
    assert "line(s) were not written" in errors[0]
    assert elapsed < 60, "the run stopped at the full disk instead of running its 600 requests"
    run = load_run(full_disk / "run")  # every whole line is a record; at most the last one is torn
    # Each appended file is whole lines but for at most its last, cut where the disk filled: records.jsonl and the
    # server-metrics sampler's file can both end so (a loaded CI clone read 2 torn lines, one in each).
    for name in (RECORDS_FILE, SERVER_METRICS_FILE):
        path = full_disk / "run" / name
        lines = path.read_bytes().split(b"\n")[:-1] if path.exists() else []  # the part after the last newline: torn
        assert all(json.loads(line) for line in lines), name
    assert run.skipped_lines <= 2 and len(run.records) >= 10
    served = {e["rid"] for e in ledger(emu.url)}
    assert {r["server_request_id"] for r in run.records} <= served
    assert len(served) < 600


def test_a_read_only_disk_is_refused_before_any_request(read_only_disk, emulator):
    emu = emulator("baseline")
    proc = run_locust(emu.url, read_only_disk / "run", *LADDER)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 2
    assert _errors(proc.stderr) == [f"specbench: error: --out: cannot create {read_only_disk / 'run'}: "
                                    "Read-only file system"]
    assert ledger(emu.url) == [], "no request was sent"
