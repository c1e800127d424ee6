"""Hardening, fast part: bad input is one line and exit 2 before any load or directory; redaction; readers;
preflight deadlines. Items of issue #11 are named in each test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specbench.contract.redact import MASK, redact, register_key
from specbench.contract.schema import RunFormatError, read_records
from specbench.contract.settings import SettingsError, default_run_dir, parse_ladder, safe_label
from specbench.launch import LaunchError, ServerCommand
from specbench.locustfiles.server_metrics import ServerMetricsSampler
from specbench.preflight import PreflightError, check_server
from tests.conftest import REPO, ledger, run_locust
from tests.tinyservers import tiny_server

SECRET = "sk-hardening-DO-NOT-LEAK-77c1"


def specbench(*args: str, cwd: Path, env: dict[str, str] | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1000:], proc.stderr[-1000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("specbench: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and "run directory" not in proc.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]


# -- items 11, 12: every option checked before preflight and before any directory ---------------------------

@pytest.mark.parametrize("text", ["1,,2", "4,4", "²", "0", "-1", "a"])
def test_bad_ladders_are_refused(text):
    with pytest.raises(SettingsError, match="--ladder"):
        parse_ladder(text)
    assert parse_ladder("4,1,") == [4, 1]  # a descending ladder and a trailing comma are fine


@pytest.mark.parametrize(("args", "needles"), [
    (["--host", "notaurl"], ["--host", "notaurl"]),
    (["--host", "http://"], ["--host", "no host name"]),
    (["--host", "ftp://x"], ["--host", "ftp://x"]),
    (["--host", "http://127.0.0.1:notaport"], ["--host", "bad port"]),
    (["--host", "http://127.0.0.1:9", "--ladder", "²"], ["--ladder", "'²'"]),
    (["--host", "http://127.0.0.1:9", "--ladder", "1,,2"], ["--ladder", "empty level"]),
    (["--host", "http://127.0.0.1:9", "--ladder", "4,4"], ["--ladder", "twice"]),
    (["--host", "http://127.0.0.1:9", "--min-requests", "-3"], ["--min-requests"]),
    (["--host", "http://127.0.0.1:9", "--max-error-rate", "2"], ["--max-error-rate"]),
    (["--host", "http://127.0.0.1:9", "--api-key-env", "EMPTY_KEY_VAR"], ["EMPTY_KEY_VAR", "empty"]),
])
def test_specbench_run_refuses_bad_input_before_preflight_and_directories(tmp_path, args, needles):
    # Port 9 (discard) is closed here: a preflight would fail with "not reachable", which must not be the error.
    proc = specbench("run", "--label", "x", *args, cwd=tmp_path, env={"EMPTY_KEY_VAR": ""})
    one_line_error(proc, *needles)
    assert list(tmp_path.iterdir()) == []  # no run directory, not even an empty one


GPU_A, GPU_B = "http://127.0.0.1:9/metrics", "http://127.0.0.1:9/other"
TWO_SPECS = ["--spec", "a=http://127.0.0.1:9", "--spec", "b=http://127.0.0.1:9"]


@pytest.mark.parametrize(("args", "needles"), [
    (["--baseline-gpu-metrics", "ftp://x", "--spec-gpu-metrics", GPU_B], ["--baseline-gpu-metrics", "ftp://x"]),
    (["--baseline-gpu-metrics", ",", "--spec-gpu-metrics", GPU_B], ["--baseline-gpu-metrics", "expected URL"]),
    (["--baseline-gpu-metrics", f"{GPU_A},{GPU_A}", "--spec-gpu-metrics", GPU_B], ["--baseline-gpu-metrics", "twice"]),
    (["--baseline-gpu-metrics", GPU_A], ["--baseline-gpu-metrics", "spec would have no GPU metrics",
                                         "--spec-gpu-metrics"]),
    (["--spec-gpu-metrics", GPU_B], ["--spec-gpu-metrics", "baseline would have no GPU metrics",
                                     "--baseline-gpu-metrics"]),
    (["--spec-gpu-metrics", f"other={GPU_B}"], ["--spec-gpu-metrics other=", "no --spec is named 'other'"]),
    (["--spec-gpu-metrics", GPU_B, "--spec-gpu-metrics", f"spec={GPU_A}", "--gpu-metrics", GPU_A],
     ["--spec-gpu-metrics", "given twice"]),
    ([*TWO_SPECS, "--spec-gpu-metrics", GPU_B, "--gpu-metrics", GPU_A], ["--spec-gpu-metrics", "name the",
                                                                         "one of a, b"]),
    ([*TWO_SPECS, "--spec-gpu-metrics", f"a={GPU_B}", "--baseline-gpu-metrics", GPU_A],
     ["--spec-gpu-metrics", "b would have no GPU metrics"]),
])
def test_compare_refuses_bad_per_server_exporters_before_preflight(tmp_path, args, needles):
    # #40. Port 9 is closed: a preflight would fail with "not reachable", which must not be the error.
    spec = [] if "--spec" in args else ["--spec", "http://127.0.0.1:9"]
    proc = specbench("compare", "--baseline", "http://127.0.0.1:9", *spec, "--out", str(tmp_path / "r"), *args,
                     cwd=tmp_path)
    one_line_error(proc, *needles)
    assert list(tmp_path.iterdir()) == []


def test_a_runs_own_exporters_replace_the_shared_ones():
    from specbench.exporters import with_own_exporters

    extra = ["--ladder", "1", "--gpu-metrics", GPU_A, "--max-tokens", "8", f"--gpu-metrics={GPU_A}"]
    assert with_own_exporters(extra, GPU_B) == ["--ladder", "1", "--max-tokens", "8", "--gpu-metrics", GPU_B]
    assert with_own_exporters(extra, None) == extra


def test_each_runs_options_carry_its_own_exporters(tmp_path):
    # The ladders and the levels added after them (refinement, pairing) both take a run's options from
    # CompareJob.run_options: a run given its own exporters reads only those, the others keep --gpu-metrics.
    from types import SimpleNamespace

    from specbench import compare

    server = SimpleNamespace(identity=SimpleNamespace(url="http://127.0.0.1:9"))
    job = compare.CompareJob(baseline=server, specs=[("a", server), ("b", server)], out=tmp_path,  # type: ignore[arg-type]
                             extra=["--gpu-metrics", GPU_A], gpu_metrics={"baseline": GPU_B, "a": GPU_B + "2"})
    found = {name: job.run_options(name, job.extra) for name in ("baseline", "a", "b")}
    assert found == {"baseline": ["--gpu-metrics", GPU_B], "a": ["--gpu-metrics", GPU_B + "2"],
                     "b": ["--gpu-metrics", GPU_A]}


def test_profile_errors_name_the_file_and_key_through_specbench(tmp_path):
    cfg = tmp_path / "suite.yaml"
    cfg.write_text("ladder: '4,4'\n")
    proc = specbench("run", "--label", "x", "--host", "http://127.0.0.1:9", "--suite-config", str(cfg),
                     cwd=tmp_path)
    one_line_error(proc, str(cfg), "key 'ladder'")


def test_plain_locust_refuses_a_malformed_host_with_one_line(tmp_path):
    proc = run_locust("notaurl", tmp_path / "run", "--ladder", "1", timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "specbench: error: --host" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "records.jsonl").exists()


# -- item 2: labels become safe file names -------------------------------------------------------------------

def test_labels_never_leave_runs_directory():
    for label in ("../../etc/evil", "a/b", "..", "/abs", "x\\..\\y", ""):
        path = default_run_dir(label)
        assert path.parent == Path("runs") and "/" not in path.name and ".." not in path.name, path
    assert safe_label("eagle3-fair_v1.2") == "eagle3-fair_v1.2"


# -- item 3: one redaction function ------------------------------------------------------------------------

def test_redact_hides_keys_and_url_credentials():
    register_key(SECRET)
    text = f"401 bad key: Bearer {SECRET} at http://alice:hunter2pw@10.0.0.1:8000/v1 and https://tok@h/x"
    out = redact(text)
    assert SECRET not in out and "hunter2pw" not in out and "alice" not in out and "tok@" not in out
    assert out.count(MASK) == 3 and "10.0.0.1:8000/v1" in out
    assert redact("http://127.0.0.1:8000 plain") == "http://127.0.0.1:8000 plain"


def test_the_key_passed_as_api_key_env_is_never_printed(tmp_path):
    proc = specbench("run", "--label", "x", "--host", "http://127.0.0.1:9", "--api-key-env", SECRET, cwd=tmp_path)
    one_line_error(proc, "--api-key-env", "not set")
    assert SECRET not in proc.stderr + proc.stdout
    proc = run_locust("http://127.0.0.1:9", tmp_path / "run", "--api-key-env", SECRET, timeout=60)
    assert proc.returncode == 2 and SECRET not in proc.stderr + proc.stdout


def test_url_credentials_and_an_api_key_together_are_refused(tmp_path, emulator):
    # requests would turn alice:pw@ into Basic auth and drop the Bearer key without a word: refused, one line
    emu = emulator("baseline", speed=20)
    host = emu.url.replace("http://", "http://alice:hunter2pw@")
    proc = run_locust(host, tmp_path / "run", "--api-key-env", "HARDENING_KEY", "--ladder", "1", timeout=60,
                      env={"HARDENING_KEY": SECRET})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--host" in proc.stderr and "credentials" in proc.stderr and "Traceback" not in proc.stderr
    assert SECRET not in proc.stderr + proc.stdout and "hunter2pw" not in proc.stderr + proc.stdout
    assert not (tmp_path / "run").exists() and ledger(emu.url) == []  # nothing sent, nothing written


# -- item 4: never mix two runs -------------------------------------------------------------------------------

def test_existing_run_directory_and_report_are_refused_without_overwrite(tmp_path):
    used = tmp_path / "used"
    used.mkdir()
    (used / "records.jsonl").write_text("{}\n")
    one_line_error(specbench("run", "--label", "x", "--host", "http://127.0.0.1:9", "--out", str(used),
                             cwd=tmp_path), "--out", "--overwrite")
    one_line_error(specbench("compare", "--baseline", "http://127.0.0.1:9", "--spec", "http://127.0.0.1:9",
                             "--out", str(used), cwd=tmp_path), "--out", "--overwrite")
    (used / "report.md").write_text("old\n")
    one_line_error(specbench("compare-runs", "a", "b", "--out", str(used), cwd=tmp_path), "report.md")
    proc = run_locust("http://127.0.0.1:9", used, "--ladder", "1", timeout=60)  # Locust alone refuses too
    assert proc.returncode == 2 and "--overwrite" in proc.stderr, proc.stderr[-1500:]
    assert (used / "records.jsonl").read_text() == "{}\n"


# -- item 13: a corrupt middle line is corruption; only a last line can be torn ------------------------------

def _record(i: int) -> str:
    return json.dumps({"schema": 1, "request_id": f"r{i}", "start_s": 1.0, "e2e_s": 1.0, "status": "ok",
                       "output_tokens": 1, "chunk_ms": [1.0], "chunk_tokens": [1]})


def test_torn_last_line_is_skipped_but_a_corrupt_middle_line_is_an_error(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(f"{_record(1)}\n{_record(2)}\n{{\"schema\": 1, \"requ")
    records, torn = read_records(path)
    assert len(records) == 2 and torn == 1
    path.write_text(f"{_record(1)}\n{{garbage\n{_record(3)}\n")
    with pytest.raises(RunFormatError, match="line 2: corrupt"):
        read_records(path)


# -- item 10: preflight has a total deadline and one line --------------------------------------------------

@pytest.mark.parametrize(("mode", "needle"), [("endless_sse", "did not finish within"),
                                              ("silent_sse", "went silent")])
def test_preflight_ends_on_endless_or_silent_streams(mode, needle):
    with tiny_server(mode) as server:
        t0 = time.monotonic()
        with pytest.raises(PreflightError, match=needle):
            check_server(server.url, "server", api="chat", timeout=1.0, total=2.0)
        assert time.monotonic() - t0 < 6.0


def test_preflight_reads_through_an_interim_103_head_as_the_load_client_does():
    """Before: Python's http.client skips only 100 Continue, so preflight took a 103 Early Hints head for the
    answer and refused a server the load client (which skips every 1xx but 101) would have measured."""
    with tiny_server("early_hints") as server:
        result = check_server(server.url, "server", api="chat", timeout=2.0, total=10.0)
    assert result.api == "chat"
    assert ("POST", "/v1/chat/completions", None) in server.seen


@pytest.mark.parametrize("mode", ["trickle_ready", "trickle_info"])
def test_preflight_ends_on_a_page_that_trickles_a_byte_at_a_time(mode):
    """Each read gets a byte, so a per-read timeout never fires: only the total deadline ends it."""
    with tiny_server(mode) as server:
        t0 = time.monotonic()
        with pytest.raises(PreflightError, match="did not finish within 2 s"):
            check_server(server.url, "server", api="chat", timeout=1.0, total=2.0)
        assert time.monotonic() - t0 < 4.0


def test_metrics_sampler_gives_up_on_a_trickling_page(tmp_path):
    with tiny_server("trickle_metrics") as server:
        sampler = ServerMetricsSampler(server.url, tmp_path, 1.0, timeout_s=1.0)
        t0 = time.monotonic()
        assert sampler.sample_once() is False
        assert time.monotonic() - t0 < 2.5
        assert sampler.disabled_reason == "no answer within 1 s"


def test_sweep_readiness_probe_does_not_take_a_trickle_for_an_answer(tmp_path):
    with tiny_server("trickle_ready") as server:
        cmd = ServerCommand("trickler", [sys.executable, "-c", "import time; time.sleep(30)"],
                            log_path=tmp_path / "log", stop_timeout_s=2.0).start()
        try:
            t0 = time.monotonic()
            with pytest.raises(LaunchError, match="did not answer 200 within 2 s"):
                cmd.wait_ready(server.url + "/ready", timeout_s=2.0, interval_s=0.2)
            assert time.monotonic() - t0 < 4.5
        finally:
            cmd.stop()
