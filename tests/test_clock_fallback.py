"""The kernel's receive clock where the kernel will not give it (#70 item 7): real runs on the emulator.

Before: where ``setsockopt(SO_TIMESTAMPNS)`` was refused (ENOPROTOOPT: a sandbox, another architecture's option
number) every connect raised, every request failed with ``[Errno 92] Protocol not available`` (about 1,700 a
second) and the run exited 3; where the kernel accepted the option and stamped nothing, steps and meta.json
still said ``"receive_clock": "kernel"``. Now the load process reads on its own clock, says so in one note, and
the records, steps and meta.json name the clock that dated the chunks.

The kernel's own answers are met through the test seam ``SPECBENCH_TEST_TIMESTAMP_OPTION`` (the option number
asked instead of SO_TIMESTAMPNS; ``contract.receiveclock``): 9999, which no kernel knows, is refused with
ENOPROTOOPT, as the real option is where it does not exist; SO_KEEPALIVE (9) is accepted and stamps nothing, so
every ``recvmsg`` comes back without the SCM_TIMESTAMPNS control message. The near miss: the same run without
the seam keeps the kernel's clock, with no note.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from specbench.contract.receiveclock import KERNEL_STAMPS, TEST_OPTION_ENV, clock_of, step_clock
from specbench.contract.rundir import read_run
from tests.conftest import FAST_LADDER, locust_cmd, run_locust, wait_until

pytestmark = pytest.mark.skipif(not KERNEL_STAMPS, reason="kernel receive stamps: Linux on x86-64 or arm64")

NOTE = "chunk times are on this load process's clock instead"
ARGS = ("--ladder", "2,4", "--max-tokens", "16", "--min-requests", "20", "--exit-code-on-error", "0", *FAST_LADDER)


def _run(tmp_path: Path, url: str, name: str, option: str | None, *extra: str) -> dict[str, Any]:
    env = {TEST_OPTION_ENV: option} if option is not None else {}
    proc = run_locust(url, tmp_path / name, *ARGS, *extra, env=env)
    run = read_run(tmp_path / name)
    meta = json.loads((tmp_path / name / "meta.json").read_text())
    return {"proc": proc, "run": run, "meta": meta}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    from specbench.locustfiles.target import start_emulator_process

    root = tmp_path_factory.mktemp("clock")
    with start_emulator_process("baseline", speed=20.0) as emu:
        return {"kernel": _run(root, emu.url, "kernel", None),
                "refused": _run(root, emu.url, "refused", "9999"),
                "unstamped": _run(root, emu.url, "unstamped", "9"),
                "two": _run(root, emu.url, "two", "9999", "--processes", "2")}


def _clean(done: dict[str, Any]) -> None:
    proc = done["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "Protocol not available" not in "".join(r.get("error") or "" for r in done["run"].records)
    statuses = {r["status"] for r in done["run"].records}
    assert statuses <= {"ok", "cancelled"}, statuses


def test_the_working_kernel_clock_still_says_kernel(runs: dict[str, dict[str, Any]]) -> None:
    """The near miss: nothing refused, every chunk stamped; no note, no per-record clock."""
    done = runs["kernel"]
    _clean(done)
    assert NOTE not in done["proc"].stderr
    assert [s["receive_clock"] for s in done["run"].steps] == ["kernel", "kernel"]
    assert done["meta"]["receive_clock"] == "kernel"
    assert not any("receive_clock" in r for r in done["run"].records)
    assert any("recv_lag_ms" in r for r in done["run"].records)  # the stamps were there


@pytest.mark.parametrize("case", ["refused", "unstamped"])
def test_no_kernel_stamps_fall_back_to_the_user_clock_with_one_note(runs: dict[str, dict[str, Any]],
                                                                    case: str) -> None:
    """Refused (ENOPROTOOPT) or accepted without stamps: every request served, one note, "user" everywhere."""
    done = runs[case]
    _clean(done)
    stderr = done["proc"].stderr
    assert stderr.count(NOTE) == 1, stderr[-3000:]
    why = "setsockopt SO_TIMESTAMPNS: [Errno 92] Protocol not available" if case == "refused" else \
        "the kernel gave no receive stamps"
    assert why in stderr
    records = done["run"].records
    assert sum(r["status"] == "ok" for r in records) >= 40
    assert all(r.get("receive_clock") == "user" for r in records if r["chunk_ms"])
    assert not any("recv_lag_ms" in r for r in records)  # no read carried a stamp
    assert [s["receive_clock"] for s in done["run"].steps] == ["user", "user"]
    assert done["meta"]["receive_clock"] == "user"


def test_each_load_process_notes_once_and_the_master_books_the_users_clock(runs: dict[str, dict[str, Any]]) -> None:
    """Distributed: each worker falls back on its own (one note each, never one per request); the master's steps
    and meta.json say "user" from the records the workers sent."""
    done = runs["two"]
    _clean(done)
    assert 1 <= done["proc"].stderr.count(NOTE) <= 2, done["proc"].stderr[-3000:]
    assert [s["receive_clock"] for s in done["run"].steps] == ["user", "user"]
    assert done["meta"]["receive_clock"] == "user"


def test_a_step_says_the_clock_that_dated_its_chunks() -> None:
    """A step of records all stamped is "kernel", of unstamped ones "user", of both "mixed"; records without a
    chunk say nothing, and a run that asked for the user clock keeps it."""
    stamped, unstamped = {"chunk_ms": [1.0]}, {"chunk_ms": [1.0], "receive_clock": "user"}
    refused = {"chunk_ms": [], "receive_clock": None}
    assert step_clock("kernel", [stamped, refused]) == "kernel"
    assert step_clock("kernel", [unstamped, refused]) == "user"
    assert step_clock("kernel", [stamped, unstamped]) == "mixed"
    assert step_clock("kernel", [refused]) == "kernel"
    assert step_clock("user", [stamped]) == "user"
    assert clock_of(["user", "kernel"]) == "mixed" and clock_of([]) is None


def test_meta_says_user_once_a_step_did_so_a_killed_run_never_claims_kernel(tmp_path: Path) -> None:
    """meta.json is rewritten when the first step's clock differs from the one asked, not only at the end: a run
    killed after its first step (SIGKILL: no end hook runs) says "user" for its unstamped chunks."""
    from specbench.locustfiles.target import start_emulator_process

    out = tmp_path / "killed"
    with start_emulator_process("baseline", speed=20.0) as emu:
        proc = subprocess.Popen(locust_cmd(emu.url, out, "--ladder", "2,3,4,5,6,7,8", "--max-tokens", "16",
                                           "--min-requests", "20", *FAST_LADDER),  # six more steps to go
                                cwd=tmp_path, env={**os.environ, TEST_OPTION_ENV: "9999"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            steps = out / "steps.jsonl"
            wait_until(lambda: steps.exists() and steps.read_text().strip(), timeout_s=90, what="the first step")
            meta = json.loads((out / "meta.json").read_text())
        finally:
            proc.kill()
            proc.wait(timeout=30)
    assert meta["ended_s"] is None  # read during the run, not its end's rewrite
    assert meta["receive_clock"] == "user", meta["receive_clock"]
