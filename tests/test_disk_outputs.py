"""A disk that refuses a command's output (#53): named as a disk error, one line, exit 2 with the path, no
traceback, no 0-byte or cut file left; a comparison stops at the first run the disk refused instead of starting
the next one. Real small file systems (tmpfs mounted for the test, as tests/test_disk_errors.py does: as root,
chmod stops no write), real emulators, real specbench and analysis processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.analysis.synthetic_runs import small_pair, write_run
from tests.conftest import FAST_LADDER, REPO, ledger
from tests.test_disk_errors import _mount

pytestmark = pytest.mark.slow


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    yield from _mount(tmp_path / "small", "size=48k")


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """Room for a summary's text files, not for its plots."""
    yield from _mount(tmp_path / "tiny", "size=16k")


@pytest.fixture
def one_mb_disk(tmp_path: Path) -> Iterator[Path]:
    """Room for a ladder's first step of records; Locust's log file on it fills with them."""
    yield from _mount(tmp_path / "onemb", "size=1m")


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    yield from _mount(tmp_path / "ro", "size=48k,ro")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base_spec, spec_spec = small_pair()
    root = tmp_path_factory.mktemp("pair")
    return write_run(root / "base", base_spec), write_run(root / "spec", spec_spec)


def _run(module: str, *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


def _one_error(proc: subprocess.CompletedProcess[str], prefix: str, *needles: str, progress: bool = False) -> str:
    """The one line on stderr (``progress``: the one error line among a load run's progress lines)."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    errors = [ln for ln in proc.stderr.splitlines() if ln.strip() and (not progress or "error:" in ln)]
    assert len(errors) == 1 and errors[0].startswith(prefix), proc.stderr[-3000:]
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def _no_cut_files(root: Path) -> None:
    empty = [p for p in root.rglob("*") if p.is_file() and p.stat().st_size == 0 and p.name != "locust.log"]
    assert not empty, f"0-byte files left: {empty}"
    assert not list(root.rglob(".*.part")), "a begun file was left beside its place"


def test_compare_on_a_disk_that_fills_stops_at_the_first_run_and_names_the_disk(full_disk, emulator):
    """Before the fix: "a step failed more than --max-error-rate", the spec's ladder started anyway on the full
    disk, a 0-byte PNG and tracebacks from the report."""
    base, spec = emulator("baseline"), emulator("eagle3")
    proc = _run("specbench.cli", "compare", "--baseline", base.url, "--spec", spec.url, "--out",
                str(full_disk / "report"), "--ladder", "1,4,8", "--max-tokens", "16", "--min-requests", "200",
                "--no-refine", *FAST_LADDER, cwd=full_disk.parent, timeout=240)
    line = _one_error(proc, "specbench: error: cannot write ", "No space left on device (ENOSPC)", progress=True)
    assert str(full_disk / "report" / "baseline") in line
    assert "baseline: the disk refused the run's files" in proc.stdout and "stopping here" in proc.stdout
    assert "max-error-rate" not in proc.stdout + proc.stderr
    assert "spec: ladder against" not in proc.stdout, "the spec's ladder never started"
    assert not (full_disk / "report" / "spec").exists()
    assert not [p for p in (full_disk / "report").iterdir() if p.is_file()], "no report written (nor begun)"
    assert not list(full_disk.rglob("*.png"))


def test_compare_on_a_1_mb_disk_prints_its_one_line_and_no_logging_traceback(one_mb_disk, emulator):
    """#70: on a 1 MB disk the records fill it mid-ladder, and Locust's closing tables then meet the full log file
    on the same disk: each line printed "--- Logging error ---" and a traceback (five around the one line) until
    the Locust child dropped a log line it cannot write (``console.quiet_logging_errors``)."""
    disk = one_mb_disk
    base, spec = emulator("baseline"), emulator("eagle3")
    proc = _run("specbench.cli", "compare", "--baseline", base.url, "--spec", spec.url, "--out",
                str(disk / "report"), "--ladder", "1,4,8", "--max-tokens", "16", "--min-requests", "400",
                "--no-refine", *FAST_LADDER, cwd=disk.parent, timeout=240)
    assert "Logging error" not in proc.stderr, proc.stderr[-3000:]
    line = _one_error(proc, "specbench: error: cannot write ", "No space left on device (ENOSPC)", progress=True)
    assert str(disk / "report" / "baseline" / "records.jsonl") in line
    assert "baseline: the disk refused the run's files" in proc.stdout


@pytest.mark.parametrize("command", ["analysis", "specbench"])
def test_summary_and_comparison_files_on_a_full_disk_are_one_line_and_leave_no_cut_png(tiny_disk, pair, command):
    if command == "analysis":
        proc = _run("specbench.analysis", "summarize", str(pair[0]), "--out", str(tiny_disk / "sum"),
                    cwd=tiny_disk.parent)
        _one_error(proc, "error: cannot write ", str(tiny_disk / "sum"), "(ENOSPC)")
    else:
        proc = _run("specbench.cli", "compare-runs", str(pair[0]), str(pair[1]), "--out", str(tiny_disk / "cmp"),
                    cwd=tiny_disk.parent)
        _one_error(proc, "specbench: error: cannot write ", str(tiny_disk / "cmp"), "(ENOSPC)")
    _no_cut_files(tiny_disk)
    for png in tiny_disk.rglob("*.png"):  # what was written is whole
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.read_bytes()[-8:-4] == b"IEND", png


def test_outputs_on_a_read_only_disk_are_one_line(read_only_disk, pair, tmp_path):
    proc = _run("specbench.analysis", "summarize", str(pair[0]), "--out", str(read_only_disk / "sum"), cwd=tmp_path)
    _one_error(proc, "error: --out: cannot create ", "Read-only file system (EROFS)")
    proc = _run("specbench.analysis", "compare", str(pair[0]), str(pair[1]), "--out", str(read_only_disk), cwd=tmp_path)
    _one_error(proc, "error: cannot write ", str(read_only_disk), "Read-only file system (EROFS)")
    proc = _run("specbench.cli", "compare-runs", str(pair[0]), str(pair[1]), "--out", str(read_only_disk),
                cwd=tmp_path)
    _one_error(proc, "specbench: error: --out: ", f"{read_only_disk} is not writable (Read-only file system)")


def test_run_into_an_existing_unwritable_directory_is_refused_before_any_request(read_only_disk, emulator,
                                                                                tmp_path):
    """errors.md promised exit 2 "not writable"; before the fix an existing directory passed the check."""
    emu = emulator("baseline")
    proc = _run("specbench.cli", "run", "--host", emu.url, "--label", "x", "--out", str(read_only_disk),
                "--ladder", "1", "--max-tokens", "8", *FAST_LADDER, cwd=tmp_path)
    _one_error(proc, "specbench: error: --out: ", "is not writable (Read-only file system)")
    assert ledger(emu.url) == []


@pytest.mark.parametrize("argv", [
    ["specbench.cli", "compare-runs", "{base}", "{spec}", "--out", "{link}"],
    ["specbench.cli", "run", "--host", "http://127.0.0.1:9", "--label", "x", "--out", "{link}"],
    ["analysis", "summarize", "{base}", "--out", "{link}"],
    ["analysis", "compare", "{base}", "{spec}", "--out", "{link}"],
])
def test_a_dangling_symlink_as_out_is_one_line(tmp_path, pair, argv):
    """Before the fix mkdir met the link itself: FileExistsError and a traceback."""
    link = tmp_path / "report"
    link.symlink_to(tmp_path / "gone")
    args = [a.format(base=pair[0], spec=pair[1], link=link) for a in argv]
    proc = _run(args[0], *args[1:], cwd=tmp_path)
    _one_error(proc, "specbench: error: --out: " if args[0] == "specbench.cli" else "error: --out: ",
               f"{link} is a symbolic link to {tmp_path / 'gone'}, which does not exist")
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_a_non_finite_step_end_is_one_line(tmp_path, pair, value):
    """Before the fix: ValueError "cannot convert float NaN to integer" deep in the rate series."""
    run = tmp_path / "run"
    shutil.copytree(pair[1], run)
    steps = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines() if line.strip()]
    steps[0]["end_s"] = float(value.replace("Infinity", "inf"))
    (run / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    proc = _run("specbench.analysis", "summarize", str(run), cwd=tmp_path)
    _one_error(proc, "error: ", "steps.jsonl", "'end_s' should be a finite number", value.lower()[:3])
