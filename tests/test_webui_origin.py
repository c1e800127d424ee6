"""Issue #53: only the web UI's own page drives the web UI (``locustfiles/webguard.py``).

One real web UI (Locust as a process, the built-in emulator as its server), driven over HTTP as a browser
would from another page: with that page's ``Origin`` (another site, ``null`` from a sandboxed frame, none),
and with ``Sec-Fetch-Site: cross-site`` as browsers mark it. Before #53 each state-changing request below was
applied (a run started into an earlier run's directory, a file written where the form said), and every answer
carried ``Access-Control-Allow-Origin`` for the asking page. The UI's own page still works: the same-origin
Start at the end here, ``tests/test_webui_tokens.py`` in Chromium, and ``tests/test_interrupts.py``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from specbench.launch import free_port
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import LOCUSTFILE, REPO, wait_answering, wait_until
from tests.procs import terminate
from tests.tinyservers import tiny_server

KEY_VAR = "SPECBENCH_TEST_KEY_53"
ENV = {**os.environ, "PYTHONPATH": str(REPO), KEY_VAR: "sk-test-53-abcdefgh"}
EVIL = "http://evil.example"
# An earlier run the attack of #53 replaced: out=THIS&overwrite=true deleted its answers and meta.json
EARLIER = {"records.jsonl": '{"id": 1}\n', "steps.jsonl": '{"index": 0}\n', "meta.json": '{"partial": false}\n',
           "answers.jsonl": '{"answer": "kept"}\n', "server_metrics.jsonl": '{"t": 1}\n'}


class WebUi:
    def __init__(self, root: Path, base: str, proc: subprocess.Popen[str]) -> None:
        self.root, self.base, self.proc = root, base, proc
        self.earlier = root / "earlier"
        self.out = root / "ui-run"

    def disk(self) -> dict[str, str]:
        """Every file under the test's folder, with a hash of its content."""
        return {str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(self.root.rglob("*")) if p.is_file()}

    def state(self) -> str:
        return str(requests.get(self.base + "/stats/requests", timeout=10).json()["state"])


@pytest.fixture(scope="module")
def web_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebUi]:
    root = tmp_path_factory.mktemp("webui53")
    (root / "earlier").mkdir()
    for name, text in EARLIER.items():
        (root / "earlier" / name).write_text(text)
    emu = start_emulator_process("baseline", speed=20)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", emu.url, "--web-port",
                             str(port), "--ladder", "1", "--min-step-time", "60", "--max-step-time", "120",
                             "--step-ci", "0", "--max-tokens", "16", "--out", str(root / "ui-run")],
                            cwd=root / "earlier", env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(base + "/", timeout_s=30, what="the web UI")
        yield WebUi(root, base, proc)
    finally:
        terminate(proc)
        emu.stop()


def _attacks(ui: WebUi) -> list[tuple[str, str, dict[str, Any]]]:
    """Every state-changing request of the web UI (and one to a route that does not exist: the guard is on all)."""
    form = {"user_count": "1", "spawn_rate": "1", "out": str(ui.earlier), "overwrite": "true", "label": "x",
            "json_file": str(ui.root / "pwned.json")}
    return [("POST", "/swarm", {"data": form}), ("POST", "/swarm", {"data": {"user_count": "1", "spawn_rate": "1"}}),
            ("POST", "/stop", {}), ("POST", "/stats/reset", {}),
            ("POST", "/user", {"json": {"user_class_name": "SGLangUser", "host": EVIL}}),
            ("POST", "/no-such-route-yet", {}), ("PUT", "/swarm", {"data": form}), ("DELETE", "/stop", {})]


OTHER_PAGES = [{"Origin": EVIL}, {"Origin": "null"}, {}, {"Origin": "http://127.0.0.1:1"},
               {"Origin": "__base__", "Sec-Fetch-Site": "cross-site"},
               {"Origin": "__base__", "Sec-Fetch-Site": "same-site"}]


def _headers(template: dict[str, str], base: str) -> dict[str, str]:
    return {k: (base if v == "__base__" else v) for k, v in template.items()}


def test_other_pages_change_nothing(web_ui: WebUi) -> None:
    before = web_ui.disk()
    for method, route, kwargs in _attacks(web_ui):
        for page in OTHER_PAGES:
            resp = requests.request(method, web_ui.base + route, headers=_headers(page, web_ui.base), timeout=10,
                                    **kwargs)
            assert resp.status_code == 403, (method, route, page, resp.status_code, resp.text[:300])
            assert "refused" in resp.json()["message"], resp.text
    # the report writes RUN_DIR/report/: refused for another site's page, as a browser marks it or by its Origin
    for page in ({"Origin": EVIL}, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}):
        resp = requests.get(web_ui.base + "/tokens/report", headers=page, timeout=10)
        assert resp.status_code == 403, (page, resp.text[:300])
    time.sleep(1.0)  # a run started by a request above would have written its directory by now
    assert web_ui.state() == "ready"
    assert web_ui.disk() == before
    assert not (web_ui.root / "pwned.json").exists() and not web_ui.out.exists()


def test_no_answer_is_shared_with_another_origin(web_ui: WebUi) -> None:
    """Reading: no Access-Control-* header for any origin (so no other page's script reads an answer), and a
    read a browser marks as another site's is refused outright; a link followed to the UI still opens it."""
    for route in ("/stats/requests", "/tokens/csv", "/tokens/report", "/stats/requests/csv", "/logs"):
        resp = requests.get(web_ui.base + route, headers={"Origin": EVIL}, timeout=30)
        assert not [h for h in resp.headers if h.lower().startswith("access-control-")], (route, resp.headers)
        resp = requests.get(web_ui.base + route, headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors",
                                                         "Origin": EVIL}, timeout=10)
        assert resp.status_code == 403, (route, resp.status_code)
    preflight = requests.options(web_ui.base + "/swarm", timeout=10, headers={
        "Origin": EVIL, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    assert not [h for h in preflight.headers if h.lower().startswith("access-control-")], preflight.headers
    link = requests.get(web_ui.base + "/", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"},
                        timeout=10)
    assert link.status_code == 200


def test_a_form_with_fields_the_ui_does_not_show_is_refused(web_ui: WebUi) -> None:
    before = web_ui.disk()
    for extra, named in (({"out": str(web_ui.earlier), "overwrite": "true"}, "out, overwrite"),
                         ({"json_file": str(web_ui.root / "pwned.json")}, "json_file"),
                         ({"html_file": str(web_ui.root / "pwned.html")}, "html_file"),
                         ({"allow_host_change": "true"}, "allow_host_change")):
        resp = requests.post(web_ui.base + "/swarm", data={"user_count": "1", "spawn_rate": "1", "label": "x",
                                                           **extra}, headers={"Origin": web_ui.base}, timeout=10)
        assert resp.status_code == 400 and not resp.json()["success"], (extra, resp.text)
        assert f"does not show: {named};" in resp.json()["message"], resp.json()
    time.sleep(1.0)
    assert web_ui.state() == "ready"
    assert web_ui.disk() == before


def test_another_host_with_the_forms_key_is_refused_before_any_user_starts(web_ui: WebUi) -> None:
    """Before: the UI answered success, started users, and the run stopped only at its start (no 403)."""
    with tiny_server("ok") as elsewhere:
        resp = requests.post(web_ui.base + "/swarm", headers={"Origin": web_ui.base}, timeout=10,
                             data={"user_count": "1", "spawn_rate": "1", "host": elsewhere.url,
                                   "api_key_env": KEY_VAR})
        assert resp.status_code == 403 and "--allow-host-change" in resp.json()["message"], resp.text
        time.sleep(1.0)
        assert elsewhere.seen == []
    assert web_ui.state() == "ready" and not web_ui.out.exists()


def test_the_uis_own_start_and_stop_still_work(web_ui: WebUi) -> None:
    """Last in this file: it starts a run. The same-origin Start (as the UI's page sends it) and Stop work."""
    own = {"Origin": web_ui.base, "Sec-Fetch-Site": "same-origin"}
    resp = requests.post(web_ui.base + "/swarm", data={"user_count": "1", "spawn_rate": "1", "label": "own"},
                         headers=own, timeout=10)
    assert resp.status_code == 200 and resp.json()["success"], resp.text
    wait_until(lambda: (web_ui.out / "records.jsonl").exists(), timeout_s=60, what="the run's first record")
    resp = requests.post(web_ui.base + "/stop", headers=own, timeout=30)
    assert resp.status_code == 200 and resp.json()["success"], resp.text
    wait_until(lambda: web_ui.state() == "stopped", timeout_s=30, what="the run to stop")
    assert (web_ui.earlier / "answers.jsonl").read_text() == EARLIER["answers.jsonl"]


def test_a_name_a_page_could_rebind_is_refused_for_reads_and_writes(web_ui: WebUi) -> None:
    """DNS rebinding: a page of rebind.example, its name pointed at 127.0.0.1, is same-origin to the browser (its
    Origin matches its Host), so the Origin check passes; the Host name is what gives it away. Before, its reads
    were answered and its Start applied."""
    port = web_ui.base.rsplit(":", 1)[1]
    rebound = {"Host": f"rebind.example:{port}", "Origin": f"http://rebind.example:{port}"}
    before, state = web_ui.disk(), web_ui.state()
    for route in ("/stats/requests", "/tokens/csv", "/"):
        resp = requests.get(web_ui.base + route, headers=rebound, timeout=10)
        assert resp.status_code == 403 and "DNS rebinding" in resp.json()["message"], (route, resp.status_code)
    resp = requests.post(web_ui.base + "/swarm", headers=rebound, data={"user_count": "1", "spawn_rate": "1"},
                         timeout=10)
    assert resp.status_code == 403, resp.text[:300]
    proxied = requests.get(web_ui.base + "/stats/requests", headers={"X-Forwarded-Host": "rebind.example"},
                           timeout=10)
    assert proxied.status_code == 403
    time.sleep(0.5)
    assert web_ui.state() == state and web_ui.disk() == before
    # names that cannot be rebound still reach it: an IP address, localhost, this machine's name
    import socket

    for name in ("127.0.0.1", "localhost", "[::1]", socket.gethostname()):
        resp = requests.get(web_ui.base + "/stats/requests", headers={"Host": f"{name}:{port}"}, timeout=10)
        assert resp.status_code == 200, (name, resp.status_code)


def test_a_name_the_user_allows_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind a proxy under a domain name: the names in SPECBENCH_WEB_ALLOWED_HOSTS are served, others not."""
    from specbench.locustfiles.webguard import ALLOWED_HOSTS_VAR, host_refusal

    environ = {"HTTP_HOST": "bench.example.org", "wsgi.url_scheme": "https"}
    assert host_refusal(environ) is not None
    monkeypatch.setenv(ALLOWED_HOSTS_VAR, "other.example, Bench.Example.org.")
    assert host_refusal(environ) is None
    assert host_refusal({**environ, "HTTP_HOST": "bench.example.org.evil.example"}) is not None
