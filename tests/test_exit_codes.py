"""Exit codes against refusing servers (#70), one test per row of docs/reference/errors.md's refusal rows, for each
entry point the row names: plain ``locust -f locustfiles/sglang.py``, ``specbench run`` and ``specbench compare``.

Before #70 plain Locust exited 1 against a server refusing 30% of requests with 503 (Locust counted each refusal
as a failure for its ``--exit-code-on-error``) where the table promised 0, and a ``specbench`` command exited 2
when the preflight's one tiny request met a refusal, even from a server that went on to serve most of its load.
Now: refusals alone exit 0 everywhere (near miss: one real failure beside them is Locust's 1 again); a step in
which every request was refused measured nothing and exits 3; a server refusing every preflight try exits 2.
Real emulators with their fault settings (``--fault-503``, ``--fault-500``, ``--fault-seed``), real headless Locust
runs and real specbench subprocesses; each run is a few seconds of load.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from specbench.contract.rundir import read_run
from specbench.emulator.faults import FaultPicker
from specbench.emulator.profile import Faults
from specbench.launch import free_port
from specbench.locustfiles.target import EmulatorProcess
from tests.conftest import FAST_LADDER, REPO, ledger, run_locust

pytestmark = pytest.mark.slow

# One level of 2 users, 20 requests, at most 3 s: a step that cannot fill (every request refused) still ends soon.
SHORT = ("--ladder", "2", "--max-tokens", "16", "--min-requests", "20", *FAST_LADDER, "--max-step-time", "3")
ALL_REFUSED = "all {} requests were refused (HTTP 429/503: a full queue or a rate limit); it measured nothing"


def _seed(fraction: float, wanted: Callable[[FaultPicker], bool]) -> int:
    """A fault seed whose deterministic choice of faulted requests (``emulator.faults``) is ``wanted``."""
    for seed in range(100_000):
        if wanted(FaultPicker(Faults(seed=seed, error_503=fraction))):
            return seed
    raise AssertionError("no such seed")


# 30% refused, and the preflight's probe (the emulator's request 0) among them: the preflight must try again.
PROBE_REFUSED = _seed(0.3, lambda p: p.pick(0, stream=True) == "error_503")
# 99.9% refused, but not the probe: the preflight passes and every request of the load after it is refused.
PROBE_SERVED = _seed(0.999, lambda p: p.pick(0, stream=True) is None
                     and all(p.pick(n, stream=True) for n in range(1, 400)))


def _specbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=180, env={**os.environ, "PYTHONPATH": str(REPO)})


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error:" in line.lower()]


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def _statuses(run_dir: Path) -> Counter[str]:
    return Counter(r["status"] for r in read_run(run_dir).records)


def test_refusals_alone_exit_0_from_plain_locust_and_run_even_when_the_probe_was_refused(
        emulator: Callable[..., EmulatorProcess], tmp_path: Path) -> None:
    """Row "the server refused requests at once": 0 from plain Locust (no --exit-code-on-error given) and from
    ``specbench run``, whose preflight probe was refused once and tried again."""
    emu = emulator("baseline", extra=["--fault-503", "0.3", "--fault-seed", str(PROBE_REFUSED)])
    proc = run_locust(emu.url, tmp_path / "locust", *SHORT)
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused: HTTP 503" in proc.stderr + proc.stdout, "Locust's failure table still lists the refusals"
    statuses = _statuses(tmp_path / "locust")
    assert set(statuses) == {"ok", "refused"} and statuses["refused"] >= 2, statuses
    # Distributed, the master reads the workers' failures as text (``CatchResponseError('refused: HTTP 503')``).
    proc = run_locust(emu.url, tmp_path / "fleet", *SHORT, "--processes", "2")
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _statuses(tmp_path / "fleet")["refused"] >= 1

    proc = _specbench("run", "--host", emu.url, "--label", "x", "--out", str(tmp_path / "run"), *SHORT, cwd=tmp_path)
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _errors(proc.stderr) == []
    assert _statuses(tmp_path / "run")["refused"] >= 1


def test_one_real_failure_beside_refusals_is_locusts_exit_code_on_error(
        emulator: Callable[..., EmulatorProcess], tmp_path: Path) -> None:
    """Near miss of the row above: a 500 among the refusals is a failed request, so plain Locust's
    --exit-code-on-error (1 by default) applies again; within --max-error-rate, ``specbench run`` exits 0."""
    emu = emulator("baseline", extra=["--fault-503", "0.3", "--fault-500", "0.05", "--fault-seed", "3"])
    proc = run_locust(emu.url, tmp_path / "locust", *SHORT, "--max-error-rate", "0.9")
    _no_traceback(proc)
    statuses = _statuses(tmp_path / "locust")
    assert statuses["http_error"] >= 1 and statuses["refused"] >= 1, statuses
    assert proc.returncode == 1, proc.stderr[-3000:]
    proc = _specbench("run", "--host", emu.url, "--label", "x", "--out", str(tmp_path / "run"), *SHORT,
                      "--max-error-rate", "0.9", cwd=tmp_path)
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_step_whose_every_request_was_refused_exits_3_naming_it(
        emulator: Callable[..., EmulatorProcess], tmp_path: Path) -> None:
    """Row "every request of a step refused": 3 and one line, from plain Locust and from ``specbench run``
    (whose preflight probe was served); --max-error-rate does not matter, the step measured nothing."""
    proc = run_locust(emulator("baseline", extra=["--fault-503", "1"]).url, tmp_path / "locust", *SHORT,
                      "--max-error-rate", "1")
    _no_traceback(proc)
    assert proc.returncode == 3, proc.stderr[-3000:]
    statuses = _statuses(tmp_path / "locust")
    assert set(statuses) == {"refused"}, statuses
    (line,) = [ln for ln in proc.stderr.splitlines() if "it measured nothing" in ln]
    assert line.endswith("step 1 C=2: " + ALL_REFUSED.format(statuses["refused"])), line

    emu = emulator("baseline", extra=["--fault-503", "0.999", "--fault-seed", str(PROBE_SERVED)])
    proc = _specbench("run", "--host", emu.url, "--label", "x", "--out", str(tmp_path / "run"), *SHORT, cwd=tmp_path)
    _no_traceback(proc)
    assert proc.returncode == 3, proc.stderr[-3000:]
    refused = _statuses(tmp_path / "run")["refused"]
    assert any(ln.endswith("step 1 C=2: " + ALL_REFUSED.format(refused)) for ln in proc.stderr.splitlines()), \
        proc.stderr[-3000:]


def test_a_server_refusing_from_the_first_request_fails_preflight_with_exit_2(
        emulator: Callable[..., EmulatorProcess], tmp_path: Path) -> None:
    """Row "a server refusing every preflight try": ``specbench run`` and ``compare`` exit 2 with one line, before
    any load (the emulator saw only the probe's tries); near miss: a server that refused only the first try passes
    (the first test)."""
    refusing = emulator("baseline", extra=["--fault-503", "1"])
    proc = _specbench("run", "--host", refusing.url, "--label", "x", "--out", str(tmp_path / "run"), *SHORT,
                      cwd=tmp_path)
    _no_traceback(proc)
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = _errors(proc.stderr)
    assert re.fullmatch(rf"specbench: error: server {re.escape(refusing.url)}: refuses every request: /generate "
                        r"answered HTTP 503 to 5 tiny request\(s\) over \d+\.\d s \(a full queue or a rate limit\); "
                        "nothing can be measured while it takes no work on", line), line
    assert len(ledger(refusing.url)) == 5, "only the preflight's five tries reached the server"
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())

    serving = emulator("baseline")
    proc = _specbench("compare", "--baseline", serving.url, "--spec", refusing.url, "--out", str(tmp_path / "cmp"),
                      *SHORT, "--no-refine", cwd=tmp_path)
    _no_traceback(proc)
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = _errors(proc.stderr)
    assert line.startswith(f"specbench: error: spec server {refusing.url}: refuses every request"), line
    assert len(ledger(serving.url)) == 1, "the baseline got its preflight probe and no load"


def test_compare_with_a_refusing_baseline_exits_0(emulator: Callable[..., EmulatorProcess], tmp_path: Path) -> None:
    """Row "the server refused requests at once" for ``specbench compare``: 0, a report, and the refusals named."""
    base = emulator("baseline", extra=["--fault-503", "0.3", "--fault-seed", str(PROBE_REFUSED)])
    spec = emulator("eagle3")
    proc = _specbench("compare", "--baseline", base.url, "--spec", spec.url, "--out", str(tmp_path / "cmp"),
                      *SHORT, "--no-refine", cwd=tmp_path)
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "cmp" / "report.md").exists()
    assert _statuses(tmp_path / "cmp" / "baseline")["refused"] >= 1


def test_a_server_that_is_down_is_2_at_preflight_and_3_for_plain_locust(tmp_path: Path) -> None:
    """The rows "server down ...; specbench commands (preflight)" and "the same for plain Locust": the commands
    stop before any load with one line; plain Locust has no preflight, so its step fails every request (3)."""
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    proc = _specbench("run", "--host", url, "--label", "x", "--out", str(tmp_path / "run"), *SHORT, cwd=tmp_path)
    _no_traceback(proc)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert _errors(proc.stderr) == [f"specbench: error: server {url}: not reachable (connection refused or no route)"]
    proc = run_locust(url, tmp_path / "locust", *SHORT)
    _no_traceback(proc)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert re.search(r"step 1 C=2: (\d+) of \1 requests failed \(100%\), above --max-error-rate 5%", proc.stderr)
