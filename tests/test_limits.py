"""Issue #22, limits and late checks: every number has a range checked before anything starts, and every
setting is checked before any request or directory. Each case here passed (or forked, or contacted the
server first) on main before #22."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from specbench.contract.limits import LIMITS, flag, max_processes, num
from tests.conftest import LOCUSTFILE, REPO
from tests.procs import children
from tests.test_hardening_inputs import one_line_error, specbench
from tests.tinyservers import tiny_server


@pytest.mark.parametrize(("args", "needles"), [
    (["--ladder", "1000000000"], ["--ladder", "1000 users", "add load processes"]),
    (["--ladder", "1500", "--processes", "1"], ["--ladder", "1000 users for 1 load process"]),
    (["--min-step-time", "50", "--max-step-time", "10"], ["--min-step-time", "--max-step-time"]),
    (["--read-timeout", "inf"], ["--read-timeout", "finite"]),
    (["--temperature", "nan"], ["--temperature", "got nan"]),
    (["--temperature", "-0.5"], ["--temperature", "at least 0"]),
    (["--emulator-speed", "-1"], ["--emulator-speed"]),
    (["--rate-ladder", "1e9"], ["--rate-ladder", "requests/s"]),
    (["--max-in-flight", "999999"], ["--max-in-flight", "per process"]),
    (["--server-metrics-interval", "0.001"], ["--server-metrics-interval", "at least 0.05"]),
])
def test_out_of_range_numbers_are_one_line_before_any_request_or_directory(tmp_path, args, needles):
    with tiny_server("ok") as server:
        proc = specbench("run", "--label", "x", "--host", server.url, *args, cwd=tmp_path)
        one_line_error(proc, *needles)
        assert server.seen == [], server.seen  # no preflight request reached the server
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("count", ["50000", str(max_processes() + 1)])
def test_specbench_refuses_more_processes_than_the_machine_holds(tmp_path, count):
    # A closed port: on main this got past the check to "not reachable" (and with a live server, forked them all).
    proc = specbench("run", "--label", "x", "--host", "http://127.0.0.1:9", "--processes", count, cwd=tmp_path)
    one_line_error(proc, "--processes", f"at most {max_processes()}", "per core")
    assert list(tmp_path.iterdir()) == []


def test_a_ladder_above_one_process_fits_more_processes(tmp_path):
    """The users-per-process bound scales with the load processes: 1500 users fit two processes."""
    proc = specbench("run", "--label", "x", "--host", "http://127.0.0.1:9", "--ladder", "1500",
                     "--processes", "2", cwd=tmp_path)
    one_line_error(proc, "not reachable")  # got past every check to the (closed) server


@pytest.mark.parametrize("speed", ["nan", "-1", "0", "1e9"])
def test_demo_speed_is_bounded_before_any_emulator_starts(tmp_path, speed):
    began = time.monotonic()
    proc = specbench("demo", "--speed", speed, "--out", str(tmp_path / "d"), cwd=tmp_path)
    one_line_error(proc, "--speed")
    assert time.monotonic() - began < 20 and not (tmp_path / "d").exists()


def test_plain_locust_refuses_a_fork_bomb_before_forking(tmp_path):
    """Locust forks --processes children before any hook; the bound sits in the flag's own parser.

    One above the bound, not 50000: on main this forked that many (harmless at cores*4+1) and the test failed."""
    proc = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--processes",
                             str(max_processes() + 1), "--host", "http://127.0.0.1:9", "--out", str(tmp_path / "r")],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        most = 0
        while proc.poll() is None:
            most = max(most, len(children(proc.pid, with_exited=True)))
            time.sleep(0.02)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2 and "--processes" in err and "per core" in err, err[-1500:]
    assert most == 0 and "Traceback" not in err


@pytest.mark.parametrize(("args", "needles"), [
    (["--prompts", "no-such-set"], ["--prompts", "no-such-set"]),
    (["--prompt-mode", "fixed", "--prompt-id", "zzz"], ["--prompt-id", "zzz"]),
    (["--bogus-flag", "3"], ["unknown option", "--bogus-flag"]),
    (["-u", "abc"], ["Locust option", "-u/--users"]),
    (["--processes", "-5"], ["--processes"]),
])
def test_late_checks_now_come_before_any_request_or_directory(tmp_path, args, needles):
    with tiny_server("ok") as server:
        proc = specbench("run", "--label", "x", "--host", server.url, *args, cwd=tmp_path)
        one_line_error(proc, *needles)
        assert server.seen == []
    assert list(tmp_path.iterdir()) == []


def test_url_credentials_next_to_a_key_are_refused_before_any_request(tmp_path):
    with tiny_server("ok") as server:
        url = server.url.replace("http://", "http://user:pw@")
        proc = specbench("run", "--label", "x", "--host", url, "--api-key-env", "K22", cwd=tmp_path,
                         env={"K22": "sk-limits-22-secret"})
        one_line_error(proc, "--host", "credentials")
        assert server.seen == [] and "user:pw" not in proc.stderr
        proc = specbench("compare", "--baseline", server.url, "--spec", url, "--api-key-env", "K22",
                         "--out", str(tmp_path / "c"), cwd=tmp_path, env={"K22": "sk-limits-22-secret"})
        one_line_error(proc, "--spec", "credentials")
        assert server.seen == []
    assert list(tmp_path.iterdir()) == []


def test_readme_limits_table_is_the_code_table():
    section = (REPO / "docs" / "reference" / "limits.md").read_text(encoding="utf-8")
    for dest, limit in LIMITS.items():
        row = next((ln for ln in section.splitlines() if ln.startswith(f"| `{flag(dest)}` |")), None)
        assert row is not None, f"docs/reference/limits.md has no row for {flag(dest)}"
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert re.sub(r"[>≥ ]", "", cells[1]) == num(limit.lo) and cells[2] == num(limit.hi), row
        assert cells[3] == limit.why, row


def test_plain_locust_applies_the_same_limits_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--ladder", "5000",
                           "--host", "http://127.0.0.1:9", "--out", str(tmp_path / "r")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and "specbench: error: --ladder: level 5000" in proc.stderr, proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr and not (tmp_path / "r").exists()
