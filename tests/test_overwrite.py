"""--overwrite never mixes runs (#53): a run directory reused keeps nothing of the old run (its telemetry files
included: ``contract.rundir.RUN_FILES`` is the one list of what a run writes), and a compare or sweep rerun into
its output removes the runs of configurations it no longer has, when it recognisably made them, and nothing else.
Real ``specbench`` commands against the built-in emulator on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.analysis.records.load import load_run
from specbench.contract.rundir import GPU_METRICS_FILE, LOG_FILE, META_FILE, RUN_FILES, SERVER_METRICS_FILE
from specbench.stale import clear_earlier_job
from tests.conftest import FAST_LADDER

SHORT = ["--ladder", "1", "--max-tokens", "16", "--min-requests", "5", *FAST_LADDER]


def specbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


@pytest.mark.slow
def test_a_run_overwritten_keeps_none_of_the_old_runs_telemetry(emulator, tmp_path: Path) -> None:
    emu = emulator("baseline", speed=20, extra=["--gpu-telemetry", "1"])
    out = tmp_path / "run"
    first = specbench("run", "--host", emu.url, "--label", "base", "--out", str(out), *SHORT, "--check-output",
                      "--gpu-metrics", emu.url + "/_emulator/dcgm/metrics", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert load_run(out).left_out == {}  # a real run's records all pass the evidence screen
    written = {p.name for p in out.iterdir()}
    assert {GPU_METRICS_FILE, SERVER_METRICS_FILE} <= written
    assert written <= {*RUN_FILES, LOG_FILE}, written - {*RUN_FILES, LOG_FILE}  # the one list holds every file
    second = specbench("run", "--host", emu.url, "--label", "base", "--out", str(out), *SHORT, "--no-server-metrics",
                       "--overwrite", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert not (out / GPU_METRICS_FILE).exists() and not (out / SERVER_METRICS_FILE).exists()
    started = json.loads((out / META_FILE).read_text())["started_s"]
    assert all(json.loads(line)["start_s"] >= started for line in (out / "records.jsonl").open())


def _run_dir(root: Path, label: str, *extra: str) -> Path:
    root.mkdir(parents=True)
    (root / META_FILE).write_text(json.dumps({"schema": 2, "settings": {"label": label}}))
    for name in ("records.jsonl", GPU_METRICS_FILE, LOG_FILE, *extra):
        (root / name).write_text("{}\n")
    return root


def test_only_runs_an_earlier_job_made_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run_dir(out / "old", "old")
    _run_dir(out / "old" / "refined" / "round-1", "old")
    _run_dir(out / "old" / "remeasured", "old")  # a top-up's sub-run (#61): the old run is removed with it
    (out / "servers").mkdir()
    (out / "servers" / "old.log").write_text("x")
    (out / "servers" / "kept.log").write_text("x")
    _run_dir(out / "baseline", "baseline")
    _run_dir(out / "baseline" / "refined" / "round-2", "baseline")  # a round the new job may not run again
    _run_dir(out / "baseline" / "paired", "baseline")
    _run_dir(out / "baseline" / "remeasured", "baseline")
    _run_dir(out / "theirs", "someone-else")  # a run, but not one this job would have labelled so
    _run_dir(out / "mixed", "mixed", "notes.txt")  # ours, but holding a file we never write
    (out / "notes").mkdir()
    assert clear_earlier_job(out, ["baseline", "eagle"]) == ["old"]
    assert not (out / "old").exists() and not (out / "servers" / "old.log").exists()
    assert (out / "servers" / "kept.log").exists() and (out / "theirs" / "records.jsonl").exists()
    assert (out / "baseline" / "records.jsonl").exists() and not (out / "baseline" / "refined").exists()
    assert not (out / "baseline" / "paired").exists() and not (out / "baseline" / "remeasured").exists()
    assert (out / "mixed" / "notes.txt").exists() and (out / "mixed" / "records.jsonl").exists()
    assert (out / "notes").is_dir()


@pytest.mark.slow
def test_compare_overwrite_leaves_no_old_configuration_beside_the_new_report(emulator, tmp_path: Path) -> None:
    base, spec = emulator("baseline", speed=20), emulator("eagle3", speed=20)
    out = tmp_path / "cmp"
    args = ["--baseline", base.url, "--out", str(out), *SHORT, "--no-refine"]
    first = specbench("compare", *args, "--spec", f"old={spec.url}", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert (out / "old" / "records.jsonl").exists()
    second = specbench("compare", *args, "--spec", f"new={spec.url}", "--overwrite", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert not (out / "old").exists() and (out / "new" / "records.jsonl").exists()
    assert "removed the earlier runs of old" in second.stdout
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["baseline", "new"]
