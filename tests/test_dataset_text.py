"""A dataset's and a server's text is data in every output: report.md, the terminal, CSV and file names (#70).

One real ``specbench compare`` of two built-in emulators whose model name carries an OSC title sequence and
Markdown, driven by a prompt file whose categories (and two prompt ids) are hostile: an image line naming
/etc/hostname, a script tag, terminal escape sequences, a path out of the directory, a spreadsheet formula and a
lone ``$`` that matplotlib would parse as mathtext. The categories reach report.md, report.html, the terminal
(``--verbose`` prints the full text, and the plots' warnings go to stderr), comparison.txt and the plots; the
run labels, doctored into the runs' meta.json, reach ``pairs/NAME/`` of a many-run ``compare-runs``. The near
misses (spaces, accents, hyphens, ``C++``, ``Q&A``) must come through readable and, where safe, unchanged.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis.reporting.csvtext import csv_text
from specbench.contract.rundir import META_FILE
from specbench.contract.servertext import chart_text, csv_cell, file_slug
from specbench.locustfiles.target import start_emulator_process
from tests.tinyservers import tiny_server

pytestmark = pytest.mark.slow

OSC = "\x1b]0;pwned\x07\x1b[31m"
IMAGE = "![x](/etc/hostname)"
SCRIPT = "<script>alert(1)</script>"
FORMULA = '=HYPERLINK("http://e.invalid/x","y")'
HOSTILE = (IMAGE, SCRIPT, OSC, "../../etc/x", FORMULA, "cost $x^{$", "a | b")
NEAR = ("C++", "Q&A", "café au lait", "long-form", "open qa")
MODEL = f"m{OSC}{IMAGE}"
# Control characters a terminal obeys (newline and tab aside, which our own text uses).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
OWN_IMAGE = re.compile(r"!\[[^\]]*\]\([a-z_]+\.png\)")
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def _prompts(path: Path) -> Path:
    rows = [{"id": f"p{i}", "category": cat, "prompt": f"Say something about item {i}."}
            for i, cat in enumerate((*HOSTILE, *NEAR))]
    rows[0]["id"], rows[1]["id"] = IMAGE, f"={OSC}"  # prompt ids are the file's text too
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("dataset_text")
    prompts = _prompts(root / "prompts.jsonl")
    profiles = {}
    for name, base in (("base", "baseline"), ("spec", "eagle3")):
        profiles[name] = root / f"{name}.yaml"
        profiles[name].write_text(f"base: {base}\nserved_model_name: {json.dumps(MODEL)}\n", encoding="utf-8")
    out = root / "report"
    with start_emulator_process(str(profiles["base"]), speed=20) as base, \
            start_emulator_process(str(profiles["spec"]), speed=20) as spec:
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec",
                               spec.url, "--out", str(out), "--prompts", str(prompts), "--ladder", "1,2",
                               "--max-tokens", "16", "--min-requests", "22", "--min-step-time", "1",
                               "--max-step-time", "60", "--step-ci", "0", "--verbose"],
                              capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"root": root, "out": out, "proc": proc}


def _report_dir(out: Path) -> Path:
    return next(p.parent for p in out.rglob("report.md"))


def test_hostile_categories_are_words_in_report_md_and_html(compared: dict[str, Any]) -> None:
    report_dir = _report_dir(compared["out"])
    md = (report_dir / "report.md").read_text(encoding="utf-8")
    assert "| category |" in md  # the per-category tables were written
    assert not RAW_CONTROL.search(md)
    images = [line for line in md.splitlines() if line.lstrip("| ").startswith("![")]
    assert images and all(OWN_IMAGE.fullmatch(line) for line in images), images
    assert IMAGE not in md and "\\!\\[x\\](/etc/hostname)" in md
    assert "<script>" not in md and "\\<script\\>alert(1)\\</script\\>" in md
    assert "\\\\x1b\\]0;pwned\\\\x07" in md  # the escape sequence as visible text: \x1b]0;pwned\x07
    for table in re.findall(r"(?:^\|.*\n)+", md, re.M):  # no cell of a category splits a row in two
        assert len({len(re.findall(r"(?<!\\)\|", line)) for line in table.splitlines()}) == 1, table
    for near in ("C++", "café au lait", "long-form", "open qa", "Q\\&A"):
        assert f"| {near} |" in md, near  # unchanged but for the one mark CommonMark needs escaped
    page = (report_dir / "report.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Q&amp;A" in page and "café au lait" in page and "C++" in page
    assert not RAW_CONTROL.search(page) and "/etc/hostname" in page  # still there, as words


def test_the_terminal_sees_visible_escapes_and_readable_names(compared: dict[str, Any]) -> None:
    proc = compared["proc"]
    for stream in (proc.stdout, proc.stderr):
        assert not RAW_CONTROL.search(stream), repr(RAW_CONTROL.search(stream))
    assert "Glyph 27" not in proc.stderr  # no plot drew the ESC (its warning named it, raw, before)
    text = (_report_dir(compared["out"]) / "comparison.txt").read_text(encoding="utf-8")
    for shown in (proc.stdout, text):
        assert "\\x1b]0;pwned\\x07\\x1b[31m" in shown  # the category, as its escapes
        for near in NEAR:
            assert re.search(rf"^{re.escape(near)}  ", shown, re.M), near  # a row of the category table
    assert not RAW_CONTROL.search(text)
    assert "m\\x1b]0;pwned" in proc.stdout  # the server's model name, echoed by the preflight line


def test_csv_cells_are_never_formulas(compared: dict[str, Any]) -> None:
    written = list(compared["out"].rglob("*.csv"))
    assert written
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert not RAW_CONTROL.search(text), path
        for row in csv.reader(text.splitlines()):
            for cell in row:
                assert not cell.startswith(("=", "+", "@")) and not re.fullmatch(r"-[^0-9.].*", cell), (path, cell)


def test_every_file_name_is_safe_and_inside(compared: dict[str, Any]) -> None:
    root, out = compared["root"], compared["out"]
    assert not (root / "etc").exists() and not (root.parent / "etc").exists()
    for path in out.rglob("*"):
        assert SAFE_NAME.fullmatch(path.name), path


def _labelled(src: Path, dst: Path, label: str) -> Path:
    shutil.copytree(src, dst)
    meta_path = dst / META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["settings"]["label"] = label
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    return dst


def test_labels_from_meta_json_name_safe_pair_directories(compared: dict[str, Any], tmp_path: Path) -> None:
    runs = [p.parent for p in compared["out"].rglob(META_FILE)]
    base = next(p for p in runs if p.name == "baseline")
    spec = next(p for p in runs if p.name != "baseline" and p.parent == base.parent)
    one = _labelled(spec, tmp_path / "one", "../../etc/x")
    two = _labelled(spec, tmp_path / "two", FORMULA)
    out = tmp_path / "multi"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare-runs", str(base), str(one), str(two),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pairs = sorted(p.name for p in (out / "pairs").iterdir())  # each label as a slug with a short hash
    assert re.fullmatch(r"HYPERLINK_http_e\.invalid_x_y-[0-9a-f]{8}", pairs[0]), pairs
    assert re.fullmatch(r"etc_x-[0-9a-f]{8}", pairs[1]), pairs
    assert not (tmp_path / "etc").exists() and not (out.parent.parent / "etc").exists()
    md = (out / "report.md").read_text(encoding="utf-8")
    assert all(f"`pairs/{name}/report.md`" in md for name in pairs)
    for path in out.rglob("*.csv"):
        for row in csv.reader(path.read_text(encoding="utf-8").splitlines()):
            assert not any(cell.startswith("=") for cell in row), (path, row)


def test_a_servers_header_in_a_preflight_refusal_is_one_inert_line(tmp_path: Path, emulator: Any) -> None:
    good = emulator("baseline", speed=20)
    with tiny_server("no_stream_escape") as server:
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", good.url, "--spec",
                               server.url, "--out", str(tmp_path / "r"), "--ladder", "1"],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "does not stream (content-type application/json\\x1b]0;pwned\\x07)" in proc.stderr
    assert not RAW_CONTROL.search(proc.stdout + proc.stderr)


def test_each_rule_leaves_ordinary_text_alone() -> None:
    """The near misses of the helpers themselves: what is safe passes unchanged."""
    for name in ("eagle3-fair_v1.2", "C++", "run.1"):
        assert file_slug(name) == name
    assert file_slug("../../etc/x").startswith("etc_x-") and file_slug("a b") != file_slug("a/b")
    for path_like in ("..", ".", "/abs/..", "x/../y", "a..b"):
        assert file_slug(path_like) and "/" not in file_slug(path_like) and ".." not in file_slug(path_like)
    assert len(file_slug("é" * 80)) <= 64 and file_slug("é" * 80) != file_slug("é" * 81)
    assert [csv_cell(v) for v in ("-1.5", "+3", -2.0, "abc", "", None)] == ["-1.5", "+3", -2.0, "abc", "", None]
    assert [csv_cell(v) for v in ("=1+1", "@SUM(A1)", "-x", "+cmd|' /C calc'!A0")] == [
        "'=1+1", "'@SUM(A1)", "'-x", "'+cmd|' /C calc'!A0"]
    assert chart_text("café au lait") == "café au lait"
    assert chart_text(f"a{OSC}$b") == "a\\x1b]0;pwned\\x07\\x1b[31m\\$b"
    quoted = FORMULA.replace('"', '""')  # CSV's own quoting of the cell's quotes
    assert csv_text(("a", "b"), [{"a": FORMULA, "b": -1.5}]) == f"a,b\n\"'{quoted}\",-1.5\n"
