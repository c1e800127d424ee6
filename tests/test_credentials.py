"""Credentials a server echoes back, in any form we sent them, never reach a file or the terminal.

A tiny server answers every other request with an error body that echoes the Authorization header and the
secret inside it, and serves /metrics whose labels carry both. A real ``specbench run`` against it, once with a
Bearer key and once with a URL's user:password (requests sends those as Basic auth), then every file written
and everything printed is searched for every encoding of every secret.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.contract.redact import encodings
from tests.tinyservers import tiny_server

KEY = "sk-echoed-secret-4711"
USER, PASSWORD = "alice", "pw-s3cret!42"
LOAD = ["--ladder", "1", "--max-tokens", "8", "--min-requests", "6", "--min-step-time", "1",
        "--max-step-time", "20", "--step-ci", "0", "--server-metrics-interval", "0.2", "--max-error-rate", "1"]


def _everything_written(out: Path, proc: subprocess.CompletedProcess[str]) -> str:
    texts = [proc.stdout, proc.stderr]
    texts += [f.read_text(encoding="utf-8", errors="replace") for f in sorted(out.rglob("*")) if f.is_file()]
    return "\n".join(texts)


@pytest.mark.parametrize("form", ["bearer", "basic"])
def test_echoed_credentials_are_redacted_in_every_file_and_stream(tmp_path, form):
    with tiny_server("echo_creds") as server:
        out = tmp_path / "run"
        if form == "bearer":
            host, env, key_args = server.url, {"SPECBENCH_TEST_KEY": KEY}, ["--api-key-env", "SPECBENCH_TEST_KEY"]
            secrets = [KEY]
        else:
            host = server.url.replace("http://", f"http://{USER}:{PASSWORD.replace('!', '%21')}@")
            env, key_args, secrets = {}, [], [PASSWORD, f"{USER}:{PASSWORD}"]
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "run", "--host", host, "--label", "echo",
                               "--out", str(out), *key_args, *LOAD], capture_output=True, text=True, timeout=120,
                              env={**os.environ, **env})
        assert proc.returncode in (0, 3), proc.stderr[-2000:]
        echoed = [s for s in server.seen if s[0] == "POST" and s[2]]
        assert echoed, "the credentials were sent, so the server had something to echo"
    written = _everything_written(out, proc)
    assert (out / "server_metrics.jsonl").exists() and "denied: header" in written, "the echoes were stored"
    leaks = sorted({form for secret in secrets for form in encodings(secret) if form in written})
    assert not leaks, leaks
    assert "<redacted>" in written
