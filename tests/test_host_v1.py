"""A --host ending in /v1 is refused with the hint to drop it, before any request (#53)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_host_with_v1_is_refused_with_the_hint(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "run", "--host", "http://127.0.0.1:9/v1/",
                           "--label", "x", "--out", str(tmp_path / "run")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "drop '/v1'" in lines[0] and "'http://127.0.0.1:9'" in lines[0]
    assert not (tmp_path / "run").exists()
