"""The documentation holds: the site builds with --strict, the generated reference pages are current, the
README stays a front door, and the command blocks marked runnable run as written: a block that compares servers
starts them itself (the built-in emulators), so it passes here only where a reader's copy would too."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from specbench import docgen
from tests.conftest import REPO, wait_until_or_timeout

BIN = Path(sys.executable).parent
#: appended to each `specbench demo|compare|run` of a runnable block: a short ladder (documented in development.md)
DOCS_SHORT = ("--ladder", "1,4", "--max-tokens", "32", "--min-requests", "10", "--min-step-time", "1",
              "--max-step-time", "30", "--step-ci", "0", "--time-budget", "0")


def runnable_blocks() -> list[tuple[str, str]]:
    """(where, commands) of every fenced bash block right after a `<!-- runnable -->` line."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"<!-- runnable -->\n```bash\n(.*?)\n```", text, re.S):
            found.append((f"{path.relative_to(REPO)}:{text[:m.start()].count(chr(10)) + 1}", m.group(1)))
    return found


def test_the_site_builds_strict(tmp_path: Path) -> None:
    proc = subprocess.run([str(BIN / "mkdocs"), "build", "--strict", "-q", "-d", str(tmp_path / "site")], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "all-options" / "index.html").is_file()


def test_the_generated_reference_pages_are_current() -> None:
    for name, make in docgen.PAGES.items():
        assert (REPO / "docs" / "reference" / name).read_text(encoding="utf-8") == make(), (
            f"docs/reference/{name} is stale: run .venv/bin/python -m specbench.docgen")


def test_the_readme_is_a_front_door() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "dated measurements belong in the docs"
    assert not re.search(r"\b[0-9a-f]{7,40}\b", text.split("<!-- test-command -->")[0]), "no commit ids"
    assert "<!-- test-command -->" in text and "specbench demo" in text


def test_the_runnable_blocks_are_found() -> None:
    where = [w for w, _ in runnable_blocks()]
    assert any(w.startswith("docs/getting-started.md") for w in where) and len(where) >= 2, where


def test_a_runnable_block_that_compares_is_bounded_in_time_as_written() -> None:
    """The short settings below speed the test up; a reader runs the block without them, so it must end by itself."""
    for where, commands in runnable_blocks():
        for line in re.findall(r"specbench compare\b[^\n]*", commands):
            assert "--time-budget" in line, f"{where}: {line}"


@pytest.mark.parametrize(("where", "commands"), runnable_blocks(), ids=[w for w, _ in runnable_blocks()])
def test_a_runnable_block_runs(where: str, commands: str, tmp_path: Path) -> None:
    script = commands.replace(".venv/bin/", f"{BIN}/")
    short = " ".join(DOCS_SHORT)
    script = re.sub(r"(specbench (?:demo|compare|run)\b[^\n]*)", lambda m: f"{m.group(1)} {short}", script)
    script = re.sub(r"(specbench demo\b[^\n]*)", r"\1 --speed 50 --no-refine", script)
    # Its own session: whatever the block starts (its servers) is found, and killed if the block hangs.
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        left = wait_until_or_timeout(lambda: not _group_alive(proc.pid), timeout_s=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"{where}:\n{script}\n{stdout[-3000:]}\n{stderr[-3000:]}"
    assert left, f"{where}: the block left processes running (it must stop the servers it starts)"
    if "specbench demo" in script or "specbench compare" in script:
        assert "Verdict: " in stdout and (tmp_path / "reports").is_dir(), stdout[-3000:]


def _group_alive(pgid: int) -> bool:
    """Whether any process of the process group still runs (zombies, already ended, do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # state, parent, process group, ...
        except (OSError, IndexError):
            continue
        if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False
