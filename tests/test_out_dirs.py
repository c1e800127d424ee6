"""An --out that cannot become a directory is one line and exit 2 before any server is asked: a symbolic link
loop, a path under a file, a file system that takes no directories (/proc, /sys). Before, each was a traceback
from the run's mkdir after the server had been checked. Nothing listens on the port given, so a contacted server
would show as 'not reachable' instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specbench.launch import free_port
from tests.conftest import REPO


def _specbench_run(cwd: Path, out: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.cli", "run", "--host", f"http://127.0.0.1:{free_port()}",
                           "--label", "x", "--out", out], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize(("out", "said"), [
    ("loop1", "Too many levels of symbolic links"),
    ("loop1/sub", "Too many levels of symbolic links"),
    ("afile/sub", "Not a directory"),
    ("afile", "cannot be a directory"),
    ("/proc/specbench-test-out", "cannot create /proc/specbench-test-out in /proc"),
])
def test_an_out_that_cannot_be_made_is_one_line_before_any_server(tmp_path: Path, out: str, said: str) -> None:
    (tmp_path / "afile").write_text("")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    proc = _specbench_run(tmp_path, out)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "not reachable" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("specbench: error: --out: ") and said in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_new_nested_out_passes_the_check_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """The near miss: a path that can be made gets past --out to the server check, which then fails here."""
    proc = _specbench_run(tmp_path, "new/deeper")
    assert proc.returncode == 2 and "not reachable" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []  # the probe directory was removed; nothing was made before the run
