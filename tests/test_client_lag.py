"""Send lag: a client whose work between a stream's end and the next send piles up when streams end together is
flagged ``client_lag``.

The server (an emulator whose decode steps last 100 ms) admits every request that arrives during a step at the
next one, so the users' streams end in one step. The suite's user sends its next request within a few ms of
its stream's end; a test-only subclass that blocks 8 ms per request (tests/scripts/slow_user.py) gets its
ten users' requests out over about 80 ms. The flag's limit here is its 20 ms floor (10% of a TTFT of 100-200 ms
is below it). Measured on a quiet 2-core machine: send-lag p90 5 ms unslowed, 70 ms slowed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from specbench.analysis.records.summary import summarize_run
from specbench.contract.policy import CLIENT_LAG_FLOOR_MS, READ_LAG_FLOOR_MS
from specbench.contract.rundir import read_run
from tests.conftest import FAST_LADDER, REPO, ledger, locust_cmd
from tests.neighbours import NeighbourCpu

pytestmark = pytest.mark.serial  # judges timing: runs after the parallel part, alone (pyproject.toml)

PROFILE = """base: baseline
step_a_ms: 100.0
step_b_ms: 0.0
prefill_ms_per_token: 0.0
max_running_requests: 64
"""


def run(emu_url: str, out: Path, locustfile: Path | None, *extra: str) -> None:
    cmd = locust_cmd(emu_url, out, "--ladder", "10", "--max-tokens", "3", "--min-requests", "40", *FAST_LADDER,
                     *extra)
    if locustfile is not None:
        cmd[cmd.index("-f") + 1] = str(locustfile)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=out.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("slowed", [False, True])
def test_streams_ending_together_flag_a_slowed_client_only(tmp_path, emulator, slowed):
    profile = tmp_path / "steps100ms.yaml"
    profile.write_text(PROFILE)
    emu = emulator(str(profile), speed=1.0)
    out = tmp_path / "run"
    run(emu.url, out, REPO / "tests" / "scripts" / "slow_user.py" if slowed else None)
    data = read_run(out)
    (step,) = data.steps
    summary = summarize_run(data)
    (row,) = summary.rows
    lags = sorted(r["send_lag_ms"] for r in data.records if r.get("send_lag_ms") is not None)
    assert len(lags) >= 40 and all(lag >= 0 for lag in lags)
    # The send is what the server saw: the emulator read each body within a few ms of the record's start_s.
    truth = {e["rid"]: e for e in ledger(emu.url)}
    gaps = sorted(truth[r["server_request_id"]]["arrival_s"] - r["start_s"] for r in data.records)
    assert gaps[len(gaps) // 2] < 0.005, gaps
    codes = {w.code for w in summary.warnings}
    if slowed:
        assert row.send_lag_p90_ms > 2 * CLIENT_LAG_FLOOR_MS, (row.send_lag_p50_ms, row.send_lag_p90_ms)
        assert "client_lag" in step["flags"] and "client_lag" in row.flags and "client_lag" in codes
        assert "client_bound" not in step["flags"], "the CPU-based flag cannot see this: the cost blocks, idle"
    else:
        assert row.send_lag_p90_ms < CLIENT_LAG_FLOOR_MS, (row.send_lag_p50_ms, row.send_lag_p90_ms)
        assert "client_lag" not in step["flags"] and "client_lag" not in codes


@pytest.mark.parametrize("clock", ["user", "kernel"])
def test_a_load_process_whose_loop_is_blocked(tmp_path, emulator, clock):
    """A process whose event loop is blocked 30 ms in every 60 serves ready streams up to 30 ms late: its steps
    carry ``read_lag_p90_ms`` above the 10 ms floor, and its requests a receive lag (``recv_lag_ms``: read after
    the kernel stamped their bytes) of that size. The CPU flag cannot see it (the block is idle) and neither can
    send lag. On the event loop's clock (``--receive-clock user``) the late reads are in TTFT and ITL: flag
    ``client_read_lag``, whose warning says by how much; first tokens are seen well after the emulator wrote
    them. On the kernel's clock they are not: first tokens are stamped within a millisecond of their writing
    (median), and nothing is flagged."""
    emu = emulator("baseline", speed=10, extra=["--ledger-chunk-times"])
    out = tmp_path / "run"
    run(emu.url, out, REPO / "tests" / "scripts" / "blocked_loop.py", "--receive-clock", clock)
    data = read_run(out)
    (step,) = data.steps
    summary = summarize_run(data)
    (row,) = summary.rows
    assert data.meta.receive_clock == clock and step["receive_clock"] == clock and row.receive_clock == clock
    assert step["read_lag_p90_ms"]["local"] > 2 * READ_LAG_FLOOR_MS, step
    assert row.client_read_lag_p90_ms == step["read_lag_p90_ms"]["local"]
    assert row.recv_lag_p90_ms is not None and row.recv_lag_p90_ms > READ_LAG_FLOOR_MS, row.recv_lag_p90_ms
    truth = {e["rid"]: e for e in ledger(emu.url)}
    # when the client put each first token against when the emulator wrote it (one machine, one wall clock)
    late_ms = sorted(1000 * (r["start_s"] + r["ttft_s"] - truth[r["server_request_id"]]["first_token_s"])
                     for r in data.records if r["status"] == "ok")
    median = late_ms[len(late_ms) // 2]
    codes = {w.code for w in summary.warnings}
    if clock == "user":
        assert "client_read_lag" in step["flags"] and "client_read_lag" in row.flags and "client_read_lag" in codes
        assert late_ms[int(0.9 * len(late_ms))] > READ_LAG_FLOOR_MS, late_ms[-10:]
    else:
        assert "client_read_lag" not in step["flags"] and "client_read_lag" not in codes, step["flags"]
        assert -0.5 < median < 1.0, late_ms


def test_an_unblocked_load_process_reads_on_time(tmp_path, emulator):
    """The near miss: the suite's own user at C=10 reads within the 10 ms floor, so no ``client_read_lag``. Where
    other processes kept the machine's cores busy meanwhile, this process was late for want of a core, which the
    flag rightly reports: the test then says it cannot judge."""
    emu = emulator("baseline", speed=10)
    out = tmp_path / "run"
    with NeighbourCpu() as neighbours:
        run(emu.url, out, None)
    (step,) = read_run(out).steps
    busy = sum(neighbours.cores) / max(1, len(neighbours.cores))
    if busy > 0.5:
        pytest.skip(f"cannot judge on time reads beside busy neighbours: {neighbours.text()}")
    assert step["read_lag_p90_ms"]["local"] < READ_LAG_FLOOR_MS, (step, neighbours.text())
    assert "client_read_lag" not in step["flags"]
