"""https:// servers with a certificate no system store trusts (self-signed, a private CA): the preflight says
so in words a user can act on (not 'connection refused'), and --ca-bundle, or the conventional SSL_CERT_FILE /
REQUESTS_CA_BUNDLE, makes the whole run trust it: preflight, server info and the load client alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, read_jsonl
from tests.tlsproxy import self_signed_cert, tls_front

pytestmark = pytest.mark.slow

RUN = ("--label", "x", "--ladder", "1", "--min-step-time", "1", "--max-step-time", "4", "--step-ci", "0",
       "--min-requests", "2", "--max-tokens", "16")


@pytest.fixture(scope="module")
def https_emulator(tmp_path_factory: pytest.TempPathFactory):
    from specbench.locustfiles.target import start_emulator_process

    folder = tmp_path_factory.mktemp("tls")
    cert, key = self_signed_cert(folder)
    with start_emulator_process("baseline", speed=20) as emu, tls_front(emu.url, cert, key) as url:
        yield url, cert


def _run(cwd: Path, url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    return subprocess.run([sys.executable, "-m", "specbench.cli", "run", "--host", url, "--out", str(cwd / "run"),
                           *RUN, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**clean, "PYTHONPATH": str(REPO), **(env or {})})


def test_an_untrusted_certificate_is_named_not_called_a_refusal(tmp_path: Path, https_emulator) -> None:
    url, _cert = https_emulator
    proc = _run(tmp_path, url)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "certificate is not trusted" in proc.stderr and "--ca-bundle" in proc.stderr, proc.stderr
    assert "connection refused" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("how", ["--ca-bundle", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"])
def test_the_bundle_is_trusted_by_every_client_of_the_run(tmp_path: Path, https_emulator, how: str) -> None:
    url, cert = https_emulator
    proc = _run(tmp_path, url, *(["--ca-bundle", str(cert)] if how == "--ca-bundle" else []),
                env={how: str(cert)} if how != "--ca-bundle" else None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_jsonl(tmp_path / "run" / "records.jsonl")
    assert records and {r["status"] for r in records} == {"ok"}, {r["status"] for r in records}


def test_a_bundle_that_is_not_pem_is_one_line(tmp_path: Path, https_emulator) -> None:
    url, _cert = https_emulator
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    proc = _run(tmp_path, url, "--ca-bundle", str(bad))
    assert proc.returncode == 2 and "--ca-bundle: " in proc.stderr and "not a PEM file" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_variable_naming_no_file_is_passed_over_but_the_flag_is_not(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    """A stale SSL_CERT_FILE must not stop a run against an http:// server; a wrong --ca-bundle is a mistake."""
    from specbench.contract.tls import CaBundleError, check_ca_bundle

    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "gone.pem"))
    assert check_ca_bundle("") is None
    with pytest.raises(CaBundleError, match=r"--ca-bundle: .*gone\.pem: no such file"):
        check_ca_bundle(str(tmp_path / "gone.pem"))
