"""The documentation holds: the site builds with --strict, the generated reference pages are current, the
README stays a front door, and the command blocks marked runnable run against the built-in emulators."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specbench import docgen
from tests.conftest import REPO

BIN = Path(sys.executable).parent
#: appended to each `specbench demo|compare|run` of a runnable block: a short ladder (documented in development.md)
DOCS_SHORT = ("--ladder", "1,4", "--max-tokens", "32", "--min-requests", "10", "--min-step-time", "1",
              "--max-step-time", "30", "--step-ci", "0", "--time-budget", "0")
BASELINE_URL, SPEC_URL = "http://127.0.0.1:30000", "http://127.0.0.1:30001"


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


@pytest.mark.parametrize(("where", "commands"), runnable_blocks(), ids=[w for w, _ in runnable_blocks()])
def test_a_runnable_block_runs(where: str, commands: str, tmp_path: Path, emulator) -> None:
    script = commands.replace(".venv/bin/", f"{BIN}/")
    if BASELINE_URL in script or SPEC_URL in script:
        script = script.replace(BASELINE_URL, emulator("baseline", speed=50).url)
        script = script.replace(SPEC_URL, emulator("eagle3", speed=50).url)
    short = " ".join(DOCS_SHORT)
    script = re.sub(r"(specbench (?:demo|compare|run)\b[^\n]*)", lambda m: f"{m.group(1)} {short}", script)
    script = re.sub(r"(specbench demo\b[^\n]*)", r"\1 --speed 50 --no-refine", script)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{where}:\n{script}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    if "specbench demo" in script or "specbench compare" in script:
        assert "Verdict: " in proc.stdout and (tmp_path / "reports").is_dir(), proc.stdout[-3000:]
