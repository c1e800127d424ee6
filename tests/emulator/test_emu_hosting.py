"""start_emulator works in a plain process (own thread and hub) and in a gevent-patched one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from specbench.emulator import start_emulator

REPO = Path(__file__).resolve().parents[2]

PATCHED_SCRIPT = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()
    import json, urllib.request
    import gevent
    from specbench.emulator import start_emulator

    handle = start_emulator("eagle3", speed=50)
    assert not handle.in_thread

    def call(i):
        body = json.dumps({"text": "patched", "rid": f"p{i}", "stream": True,
                           "sampling_params": {"max_new_tokens": 16, "ignore_eos": True}}).encode()
        with urllib.request.urlopen(urllib.request.Request(handle.url + "/generate", data=body)) as resp:
            return resp.read().decode()

    bodies = [g.get() for g in gevent.joinall([gevent.spawn(call, i) for i in range(3)], timeout=20)]
    assert all(b.rstrip().endswith("data: [DONE]") for b in bodies), bodies
    records = handle.ledger.records()
    assert sorted(r["rid"] for r in records) == ["p0", "p1", "p2"], records
    assert all(r["completion_tokens"] == 16 and r["spec"] for r in records)
    handle.stop()
    print("OK")
""")


def test_plain_process_runs_the_server_in_its_own_thread(make_http) -> None:
    with start_emulator("baseline", speed=50, port=0) as handle:
        assert handle.in_thread and handle.url == f"http://127.0.0.1:{handle.port}"
        assert handle.profile.name == "baseline" and handle.profile.speed == 50
        reply = make_http(handle.url).post("/generate", {"text": "plain", "rid": "plain-1"})
        assert reply.status == 200
        assert handle.ledger.find("plain-1")["completion_tokens"] > 0
    assert not handle._thread.is_alive()


def test_gevent_patched_process_shares_the_callers_hub() -> None:
    done = subprocess.run([sys.executable, "-c", PATCHED_SCRIPT], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "OK"
