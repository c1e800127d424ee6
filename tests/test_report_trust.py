"""A server's text never becomes report markup, and report.html inlines only the images the report wrote (#53).

Two ways in, both real: a run against emulators whose model name and draft model path hold a newline and
Markdown that names an absolute image path (``![x](/.../secret.png)``), then ``specbench compare-runs``; and
``compare-runs`` on runs whose meta.json was doctored by hand. The secret file lies outside the output
directory; report.html must not carry its bytes (base64 or not), every image it inlines must be one of the
report's own PNGs, and report.md must hold no image line of the server's. The HTML writer's own rule (a plain
name the report wrote, inside its directory once links are followed) is checked on a directory that offers it
an absolute path, ``..`` and a symbolic link leading out.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specbench.analysis.reporting.html import write_html
from specbench.contract.rundir import META_FILE
from specbench.contract.servertext import markdown_text, plain
from tests.analysis.synthetic_runs import small_pair, write_run
from tests.conftest import FAST_LADDER, runs_on_profiles

SECRET = b"\x89PNG\r\n\x1a\n-the-secret-bytes-of-a-local-file-"
IMG = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]*)"')
ARGS = ("--ladder", "1", "--max-tokens", "16", "--min-requests", "4", *FAST_LADDER)


def _secret(root: Path) -> Path:
    path = root / "secret.png"
    path.write_bytes(SECRET)
    return path


def _hostile(secret: Path) -> str:
    return f"m\n![x]({secret})\n# Forged heading\n| a | b |\n<script>alert(1)</script> **bold** `code`"


def _compare_runs(base: Path, spec: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.cli", "compare-runs", str(base), str(spec),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)


def _assert_report_clean(out: Path, secret: Path) -> None:
    page = (out / "report.html").read_text(encoding="utf-8")
    own = {base64.b64encode(p.read_bytes()).decode() for p in out.glob("*.png")}
    inlined = IMG.findall(page)
    assert inlined and set(inlined) <= own  # the plots, and nothing else
    assert base64.b64encode(SECRET).decode()[:24] not in page and "the-secret-bytes" not in page
    assert "<script>" not in page and "Forged heading</h" not in page
    report = (out / "report.md").read_text(encoding="utf-8")
    images = [line for line in report.splitlines() if line.startswith("![")]
    assert images and all(re.fullmatch(r"!\[[^\]]*\]\([a-z_]+\.png\)", line) for line in images), images
    assert not any(line.startswith(("# Forged", "| a |")) for line in report.splitlines())
    assert str(secret) in page  # the server's text is still there, as words
    text = (out / "comparison.txt").read_text(encoding="utf-8")
    assert not any(line.startswith(("![x]", "# Forged")) for line in text.splitlines())


@pytest.mark.slow
def test_server_names_with_markup_reach_no_report_as_markup(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    name, draft = json.dumps(_hostile(secret)), json.dumps("/d\n" + _hostile(secret))
    profiles = {"base": tmp_path / "base.yaml", "spec": tmp_path / "spec.yaml"}
    profiles["base"].write_text(f"base: baseline\nserved_model_name: {name}\n", encoding="utf-8")
    profiles["spec"].write_text(f"base: eagle3\nserved_model_name: {name}\nspeculative:\n"
                                f"  draft_model_path: {draft}\n", encoding="utf-8")
    (tmp_path / "runs").mkdir()
    runs = runs_on_profiles(tmp_path / "runs", profiles, ARGS, speed=20, timeout=150)
    meta = json.loads((runs["spec"] / META_FILE).read_text(encoding="utf-8"))
    assert "![x](" in meta["server"]["model"] and "\n" in meta["server"]["speculative"]["draft_model_path"]
    # The run's own log names the model in one line too: a newline in it forges no log line of its own.
    assert "Run directory: " in runs["spec_log"]
    assert not any(line.startswith(("![x]", "# Forged")) for line in runs["spec_log"].splitlines())
    out = tmp_path / "report"
    proc = _compare_runs(runs["base"], runs["spec"], out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _assert_report_clean(out, secret)


def _doctor(run: Path, secret: Path) -> None:
    meta_path = run / META_FILE
    meta: dict[str, Any] = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["server"]["model"] = _hostile(secret)
    meta["server"]["kind"] = f"![k]({secret})"
    meta["server"]["speculative"] = {"algorithm": "EAGLE3", "draft_model_path": "\n" + _hostile(secret)}
    meta["prompts"]["name"] = f"\n![p](../{secret.name})\n"
    meta["api"] = f"generate\n![a]({secret})"
    meta_path.write_text(json.dumps(meta), encoding="utf-8")


def test_compare_runs_on_a_doctored_meta_json_inlines_nothing_from_outside(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    base_spec, spec_spec = small_pair()
    base, spec = write_run(tmp_path / "base", base_spec), write_run(tmp_path / "spec", spec_spec)
    _doctor(base, secret)
    _doctor(spec, secret)
    out = tmp_path / "report"
    proc = _compare_runs(base, spec, out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _assert_report_clean(out, secret)


def test_html_inlines_only_its_own_images_from_its_own_directory(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    own = out / "own.png"
    own.write_bytes(b"\x89PNG-own")
    link = out / "link.png"
    link.symlink_to(secret)
    (out / "unlisted.png").write_bytes(b"\x89PNG-unlisted")
    markdown = "\n".join(["# R", "", "![own](own.png)", "", "![link](link.png)", "", f"![abs]({secret})", "",
                          "![up](../secret.png)", "", "![unlisted](unlisted.png)", ""])
    page = write_html(markdown, out, title="t", images=[own, link, secret]).read_text(encoding="utf-8")
    assert IMG.findall(page) == [base64.b64encode(b"\x89PNG-own").decode()]
    assert "the-secret-bytes" not in page and "unlisted" in page  # the refused lines stay, as text


def test_server_text_is_one_line_of_words() -> None:
    hostile = "a\r\nb\x1b[31m\u2028c\u202ed"
    assert plain(hostile) == "a\\r\\nb\\x1b[31m\\u2028c\\u202ed"
    assert markdown_text("![x](/etc/passwd) a_b _c_ *d* <s> | & `e`") == (
        "\\!\\[x\\](/etc/passwd) a_b \\_c\\_ \\*d\\* \\<s\\> \\| \\& \\`e\\`")
    assert plain("x" * 500).endswith("...") and len(plain("x" * 500)) == 203
