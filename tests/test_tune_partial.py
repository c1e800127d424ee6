"""A tune that did not measure every depth at every level never leaves a setting that looks complete (#70).

Real components: the built-in emulators started by the tune, a real Locust ladder each, and a depth server killed
mid-run (its process, found by its own ledger path) or the whole job interrupted (SIGINT to specbench's process
group) at a phase. Each case: the documented exit code, ``tuned/`` absent or marked partial with nothing to
launch, and no server left running. The near misses: failures under --max-error-rate, and a tune left alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.conftest import wait_until

pytestmark = pytest.mark.slow

LOAD = ["--ladder", "1,4", "--max-tokens", "32", "--min-requests", "8", "--min-step-time", "1", "--max-step-time",
        "8", "--step-ci", "0", "--server-metrics-interval", "0.2"]


def _server(root: Path, name: str, profile: str, *extra: str) -> str:
    py = sys.executable
    args = ", ".join(f"'{arg}'" for arg in (py, "-m", "specbench.emulator", "--profile", profile, "--port", "{port}",
                                             "--speed", "20", "--ledger-file", str(root / f"{name}.ledger.jsonl"),
                                             *extra))
    return f"command: [{args}], ready: {{url: 'http://127.0.0.1:{{port}}/health', interval_s: 0.1}}"


def _tune_yaml(root: Path, k2_faults: tuple[str, ...] = (), max_batch: int = 64) -> Path:
    path = root / "tune.yaml"
    path.write_text("\n".join([
        f"max_batch: {max_batch}",
        f"baseline: {{{_server(root, 'baseline', 'tune-baseline')}}}",
        "speculative:",
        f"  - {{depth: 1, {_server(root, 'k1', 'tune-spec', '--num-speculative-tokens', '1')}}}",
        f"  - {{depth: 2, {_server(root, 'k2', 'tune-spec', '--num-speculative-tokens', '2', *k2_faults)}}}",
    ]) + "\n")
    return path


def _servers(root: Path, name: str = "") -> list[psutil.Process]:
    """The emulators this test's tune started (their command lines hold its ledger paths)."""
    mark = str(root / f"{name}.ledger.jsonl") if name else str(root)
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(mark in part for part in cmdline) and "specbench.emulator" in cmdline:
            found.append(proc)
    return found


def _steps(run: Path) -> int:
    steps = run / "steps.jsonl"
    return len(steps.read_text().splitlines()) if steps.exists() else 0


def _tune(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "specbench.cli", "tune", str(root / "tune.yaml"), "--out",
                             str(root / "out"), *LOAD, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _assert_partial(out: Path, stdout: str) -> dict[str, object]:
    tuned = out / "tuned"
    assert sorted(p.name for p in tuned.iterdir()) == ["README.md", "tune.json"], stdout[-3000:]
    data = json.loads((tuned / "tune.json").read_text())
    assert data["complete"] is False and data["problems"] and data["schedule"] == [], data
    assert data["best_single"] is None
    assert (tuned / "README.md").read_text().startswith("# Tuned speculative depth: PARTIAL, not a setting to use")
    assert "tuned: PARTIAL, nothing to launch" in stdout
    return data


def test_a_depth_server_that_dies_mid_run_leaves_no_schedule_and_exits_3(tmp_path: Path) -> None:
    _tune_yaml(tmp_path)
    proc = _tune(tmp_path)
    wait_until(lambda: _steps(tmp_path / "out" / "k2") >= 1, timeout_s=240, what="k2's first step")
    for server in _servers(tmp_path, "k2"):
        server.kill()  # the server dies after C=1; C=4 meets a closed port
    stdout, _ = proc.communicate(timeout=240)
    assert proc.returncode == 3, stdout[-3000:]
    data = _assert_partial(tmp_path / "out", stdout)
    # the step's window may hold requests answered before the kill: the share is above the limit, not always 100%
    assert any(str(p).startswith("C=4: more than --max-error-rate 5% of requests failed: k2 ")
               for p in data["problems"]), data  # type: ignore[union-attr]
    assert not _servers(tmp_path)


def test_failures_under_the_limit_leave_a_complete_tune(tmp_path: Path) -> None:
    """Near miss: k2 fails a tenth of its requests, under --max-error-rate 0.5: chosen from, exit 0."""
    _tune_yaml(tmp_path, ("--fault-500", "0.1"))
    proc = _tune(tmp_path, "--max-error-rate", "0.5", "--vllm-release", "0.9.0")
    stdout, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, stdout[-3000:]
    data = json.loads((tmp_path / "out" / "tuned" / "tune.json").read_text())
    assert data["complete"] is True and data["problems"] == [] and data["schedule"], data
    assert (tmp_path / "out" / "tuned" / "launch.txt").exists()
    assert not _servers(tmp_path)


@pytest.mark.parametrize("phase", ["baseline", "k1"])
def test_an_interrupt_at_any_phase_leaves_nothing_that_looks_complete(tmp_path: Path, phase: str) -> None:
    _tune_yaml(tmp_path)
    proc = _tune(tmp_path)
    wait_until(lambda: _steps(tmp_path / "out" / phase) >= 1, timeout_s=240, what=f"{phase}'s first step")
    os.killpg(proc.pid, signal.SIGINT)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout[-3000:]
    out = tmp_path / "out"
    if (out / "tuned").exists():
        data = _assert_partial(out, stdout)
        assert any("interrupted while measuring" in str(p) for p in data["problems"]), data  # type: ignore[union-attr]
    else:
        assert "tuned: not written" in stdout, stdout[-3000:]
    assert not (out / ".tuned.part").exists()
    assert not _servers(tmp_path)


def test_a_server_running_more_than_max_batch_makes_the_tune_partial(tmp_path: Path) -> None:
    """max_batch: 1 with a ladder to 4: the emulator ran about 4 requests at C=4, so max_batch is wrong and the
    tune says so. (Keyed on concurrency, where the server's gauge was read too rarely in a starved window, C=4 is
    the server at its cap: the schedule still ends at max_batch.)"""
    _tune_yaml(tmp_path, max_batch=1)
    proc = _tune(tmp_path)
    stdout, _ = proc.communicate(timeout=300)
    tuned = tmp_path / "out" / "tuned"
    data = json.loads((tuned / "tune.json").read_text())
    if data["keyed_on"] == "batch":
        assert proc.returncode == 3, stdout[-3000:]
        _assert_partial(tmp_path / "out", stdout)
        assert any("more than max_batch 1" in str(p) for p in data["problems"]), data
    else:
        assert proc.returncode == 0 and data["schedule"][-1][1] == 1, data


def test_an_interrupt_during_validation_writes_no_validation(tmp_path: Path) -> None:
    """The tune was measured whole, so tuned/ stands as the tune's; the cut validation is not written as one."""
    spec = _server(tmp_path, "spec-{k}", "tune-spec", "--speculative-config", "{speculative_config}")
    (tmp_path / "tune.yaml").write_text("\n".join([
        "depths: [1, 2]", "max_batch: 64", "speculative_config: {method: eagle3, model: /emulated/tune-draft}",
        f"baseline: {{{_server(tmp_path, 'baseline', 'tune-baseline')}}}", f"speculative: {{{spec}}}"]) + "\n")
    proc = _tune(tmp_path, "--validate")
    check = tmp_path / "out" / "validate" / "baseline"
    wait_until(lambda: _steps(check) >= 1, timeout_s=300, what="the validation's first step")
    os.killpg(proc.pid, signal.SIGINT)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout[-3000:]
    tuned = tmp_path / "out" / "tuned"
    assert json.loads((tuned / "tune.json").read_text())["complete"] is True
    assert (tuned / "vllm-speculative-config.json").exists() and not (tuned / "validation.json").exists()
    assert "## Validation" not in (tuned / "README.md").read_text()
    assert "validate: interrupted while measuring baseline" in stdout and "no validation written" in stdout
    assert not _servers(tmp_path)
