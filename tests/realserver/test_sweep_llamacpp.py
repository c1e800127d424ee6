"""``specbench sweep`` starting and stopping real llama-server processes: a baseline and two draft settings.

The sweep file holds the user's own llama-server command lines with parameters filled in from each entry
(model paths, ``--spec-draft-n-max``); the sweep starts each one, waits for ``/health``, runs the ladder,
stops it, and only then starts the next. The checks: every run was measured on the server its entry
describes (meta.json's server identity), every server is gone afterwards (its port refuses connections and
no process of its group is left), and one report combines them.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.contract.rundir import read_run

from .conftest import PROMPTS_SHORT

pytestmark = pytest.mark.slow

LOAD = ("--ladder", "1,2", "--max-tokens", "32", "--min-requests", "6", "--min-step-time", "1", "--step-ci", "0",
        "--max-step-time", "60", "--prompts", str(PROMPTS_SHORT))
DRAFTS = {"draft2": 2, "draft8": 8}


def _sweep_file(path: Path, binary: Path, target: Path, draft: Path) -> Path:
    common = (f"[{binary}, -m, '{{target}}', --host, 127.0.0.1, --port, '{{port}}', --no-webui, -np, 4, -c, 4096, "
              "-t, 1, --metrics")
    lines = [f"params: {{target: '{target}', draft: '{draft}'}}", "ready_timeout_s: 120", "stop_timeout_s: 15",
             "configurations:", "  - name: base", "    baseline: true", f"    command: {common}]"]
    for name, n_max in DRAFTS.items():
        lines += [f"  - name: {name}", f"    params: {{n_max: {n_max}}}",
                  f"    command: {common}, -md, '{{draft}}', --spec-type, draft-simple, --spec-draft-n-max, "
                  "'{n_max}']"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_sweep_starts_measures_and_stops_each_llama_server(
    tmp_path: Path, llama_server_bin: Path, gguf_models: dict[str, Path]
) -> None:
    sweep = _sweep_file(tmp_path / "sweep.yaml", llama_server_bin, gguf_models["target"], gguf_models["draft-high"])
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "sweep", str(sweep), "--out", str(out), *LOAD],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    # one after another: each server stopped before the next one started
    events = [line for line in proc.stdout.splitlines() if re.match(r"^\w+: (starting|server stopped)", line)]
    assert [e.split(":")[0] + (" start" if "starting" in e else " stop") for e in events] == [
        "base start", "base stop", "draft2 start", "draft2 stop", "draft8 start", "draft8 stop"]
    for name in ("base", *DRAFTS):
        log = (out / "servers" / f"{name}.log").read_text()
        port = int(re.search(r"--port (\d+)", log.splitlines()[0]).group(1))
        assert _refused(port), f"{name}'s server still listens on {port}"
        left = subprocess.run(["pgrep", "-f", "--", f"--port {port} "], capture_output=True, text=True).stdout.strip()
        assert left == "", f"{name}'s server process is still there: {left}"
        meta = read_run(out / name).meta
        assert meta.server.get("kind") == "llamacpp", meta.server
        spec = meta.server.get("speculative")
        if name == "base":
            assert not spec and "--spec-draft-n-max" not in log.splitlines()[0]
        else:
            assert spec, meta.server
            assert f"--spec-draft-n-max {DRAFTS[name]}" in log.splitlines()[0]
    report = json.loads((out / "comparison.json").read_text())
    assert report["kind"] == "multi_comparison" and [c["name"] for c in report["configurations"]] == list(DRAFTS)
    assert [lv["target_c"] for lv in report["levels"]] == [1, 2]
    for lv in report["levels"]:
        assert {c["name"] for c in lv["configs"]} == {"base", *DRAFTS}
        assert all(c["tok_s"] and c["tok_s"] > 0 for c in lv["configs"])
    assert (out / "report.html").exists() and report["policy"]["text"] in proc.stdout
