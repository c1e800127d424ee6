"""A key echoed by a server in any encoding, or cut by any limit, never reaches a file or the terminal (#37).

A realistic 164-character key (``sk-proj-`` and 156 more, a ``/`` and a ``+`` among them, as base64 keys have)
is echoed by a tiny server on 127.0.0.1 in every form a server may write it in: as sent, percent-escaped in
upper, lower and mixed case, ``+`` for a space, JSON ``\\uXXXX`` escapes, HTML character references, base64 and
base64url; each placed to cross one of the cuts the client makes in server text (an error event's message, a
chunk that is not JSON, an error page, a page that is not a stream). A real ``specbench run`` against it, then
every file written and everything printed is searched for every form of the key and any 16 characters of it.
Before, each text was cut first and redacted after: the start of the key before the cut was no longer the key,
and 40 characters of it were in records.jsonl.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from specbench.contract.redact import MASK, clip, encodings, key_problem, redact, redacted_json_line, register_key
from specbench.contract.urls import shown_url
from specbench.launch import free_port
from specbench.locustfiles.streams import StreamState
from tests.tinyservers import SSE_OK, QuietHandler, _Server, serving, tiny_server

_BODY = "".join(chr(c) for c in [*range(48, 58), *range(65, 91), *range(97, 123)]) + "-_"
KEY = ("sk-proj-" + "".join(_BODY[(i * 37 + 11) % len(_BODY)] for i in range(150)) + "/Zx+9q=")[:164]
assert len(KEY) == 164


def _pct(upper: bool | None) -> Callable[[str], str]:
    """Every character percent-escaped: upper-case hex, lower-case, or (None) alternating."""
    def enc(c: str, i: int = 0) -> str:
        code = f"{ord(c):02X}"
        return "%" + (code if upper or (upper is None and i % 2) else code.lower())
    return enc  # type: ignore[return-value]


# One character at a time: how a server may write each character of a secret.
PER_CHAR: dict[str, Callable[..., str]] = {
    "as-is": lambda c, i=0: c,
    "quote": lambda c, i=0: quote(c, safe="/"),
    "quote-lower": lambda c, i=0: quote(c, safe="").lower() if "%" in quote(c, safe="") else c,
    "quote_plus": lambda c, i=0: quote_plus(c),
    "pct-upper": _pct(True), "pct-lower": _pct(False), "pct-mixed": _pct(None),
    "json-u-lower": lambda c, i=0: f"\\u{ord(c):04x}",
    "json-u-upper": lambda c, i=0: f"\\u{ord(c):04X}",
    "json-slash": lambda c, i=0: "\\/" if c == "/" else c,
    "html-dec": lambda c, i=0: f"&#{ord(c)};",
    "html-dec-zeros": lambda c, i=0: f"&#000{ord(c)};",
    "html-hex": lambda c, i=0: f"&#x{ord(c):x};",
    "html-hex-upper": lambda c, i=0: f"&#X{ord(c):04X};",
}
B64 = base64.b64encode(KEY.encode()).decode()
B64URL = base64.urlsafe_b64encode(KEY.encode()).decode()
SOURCES = {"key": KEY, "base64": B64, "base64-unpadded": B64.rstrip("="), "base64url": B64URL}


def units(source: str, how: str, every: int = 1) -> list[str]:
    """``source`` as a list of its characters, each written ``how`` (one in ``every``; the others as they are)."""
    enc = PER_CHAR[how]
    return [enc(c, i) if i % every == 0 else c for i, c in enumerate(source)]


def all_forms() -> dict[str, list[str]]:
    """name -> the key's characters as written: every source in every per-character escape, whole or mixed."""
    forms = {f"{src}/{how}": units(text, how) for src, text in SOURCES.items() for how in PER_CHAR}
    forms |= {f"{src}/{how}/mixed": units(text, how, every=3) for src, text in SOURCES.items()
              for how in ("pct-lower", "json-u-upper", "html-hex")}
    forms["base64/json"] = list(json.dumps(B64)[1:-1].replace("/", "\\/"))
    return forms


FORMS = all_forms()


def _windows(form: list[str], width: int = 16) -> set[str]:
    return {"".join(form[i:i + width]) for i in range(len(form) - width + 1)}


def leaks(text: str) -> list[str]:
    """Every form of the key, and any 16 characters of any form, found in ``text``."""
    found = sorted({f for f in encodings(KEY) if f in text})
    found += sorted({f"{name}: {w!r}" for name, form in FORMS.items() for w in _windows(form) if w in text})
    return found


def _json_strings(text: str) -> str:
    """Every string inside the JSON documents or lines of ``text``, decoded (a JSON escape is no hiding place)."""
    docs: list[Any] = []
    for chunk in [text, *text.splitlines()]:
        try:
            docs.append(json.loads(chunk))
        except ValueError:
            continue
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    for doc in docs:
        walk(doc)
    return "\n".join(out)


# -- the redaction itself -------------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def _key_registered() -> None:
    register_key(KEY)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_form_of_the_key_is_redacted(name: str) -> None:
    """Old code knew the key as is, base64 and upper-case quote(safe="") only: lower, mixed and kept-'/' percent
    forms, JSON and HTML escapes passed through."""
    form = "".join(FORMS[name])
    assert redact(f"denied: {form}; retry") == f"denied: {MASK}; retry"
    assert leaks(redact(f"a{form}b")) == []


def test_encodings_lists_the_literal_forms() -> None:
    forms = encodings(KEY)
    for expected in (KEY, quote(KEY, safe=""), quote(KEY), quote_plus(KEY), B64, B64.rstrip("="), B64URL,
                     B64.replace("/", "\\/"), json.dumps(KEY)[1:-1].replace("/", "\\/")):
        assert expected in forms, expected
    lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(KEY, safe=""))
    assert lower != quote(KEY, safe="") and lower in forms
    assert all(redact(f) == MASK for f in forms)


@pytest.mark.parametrize("name", ["key/as-is", "key/pct-mixed", "key/json-u-upper", "key/html-dec",
                                  "base64/as-is", "base64url/quote"])
def test_clip_redacts_the_whole_text_before_it_cuts(name: str) -> None:
    """Old code cut first (streams: message[:200]): the key's first 40 characters were no longer the key."""
    form = "".join(FORMS[name])
    text = "x" * 160 + form + " and more"
    kept = clip(text, 200)
    assert kept == "x" * 160 + MASK + " and more"
    assert len(clip(text, 170)) <= 170 and leaks(clip(text, 170)) == []


@pytest.mark.parametrize("name", ["key/as-is", "key/pct-lower", "key/json-u-lower", "key/html-hex-upper",
                                  "base64/as-is", "base64url/as-is"])
@pytest.mark.parametrize("n", [8, 9, 16, 40, 163])
@pytest.mark.parametrize("partial", [0, 1, 2])
def test_clip_masks_the_start_of_a_key_left_at_the_end(name: str, n: int, partial: int) -> None:
    """A key cut short (by a server's own limit, or inside an escape) leaves no 8 characters of its start."""
    form = FORMS[name]
    if n >= len(form):
        pytest.skip("the form is shorter")
    text = "error: bad key " + "".join(form[:n]) + form[n][:partial]
    assert clip(text, 1000) == "error: bad key " + MASK
    assert clip("error: bad key " + "".join(form[:7]), 1000) == "error: bad key " + "".join(form[:7])
    assert len(clip("y" * 300 + text, 200)) <= 200


def test_clip_stays_within_its_limit_and_leaves_other_text_alone() -> None:
    assert clip("plain text " * 30, 50) == ("plain text " * 30)[:50]
    assert clip("sk-proj- is how keys start", 200) == "sk-proj- is how keys start"
    cut = clip("z" * 190 + KEY[:30], 200)
    assert cut.endswith(MASK) and len(cut) <= 200 and KEY[:16] not in cut


def test_stream_errors_and_bad_chunks_are_redacted_before_their_cut() -> None:
    """Real StreamState objects fed what a server sends: old code kept payload[:120] and message[:200]."""
    for name in ("key/as-is", "key/pct-upper", "base64/as-is"):
        form = "".join(FORMS[name])
        state = StreamState("chat")
        state.feed(0.1, json.dumps({"error": {"message": "m" * 170 + form, "code": 401}}).encode())
        assert state.error is not None and len(state.error) <= 200 and leaks(state.error) == [], state.error
        bad = StreamState("chat")
        bad.feed(0.1, ("not json " + "n" * 80 + form).encode())
        assert bad.malformed is not None and len(bad.malformed) <= 120 and leaks(bad.malformed) == []
        gen = StreamState("generate")
        gen.take_generate_finish({"type": "abort", "status_code": 401, "message": "a" * 180 + form})
        assert gen.error is not None and len(gen.error) <= 200 and leaks(gen.error) == [], gen.error


def test_a_record_line_hides_escaped_forms_and_keeps_its_fast_path() -> None:
    for name in ("key/pct-mixed", "key/json-u-upper", "base64/json-slash", "key/html-dec"):
        line = redacted_json_line({"status": "http_error", "error": "HTTP 401: " + "".join(FORMS[name])})
        assert leaks(line.decode()) == [] and MASK.encode() in line
    plain = {"status": "ok", "chunk_t": [0.1, 0.2], "error": None, "prompt_id": "p-1"}
    assert redacted_json_line(plain) == json.dumps(plain, separators=(",", ":")).encode() + b"\n"


# -- a real run against a server that echoes the key across every cut ------------------------------------------

# (status, content type, how the body is built from the text that holds the key) and where the key starts
CUTS: dict[str, tuple[int, str, Callable[[str], bytes], int]] = {
    # an error event: its message kept to 200 characters (streams.py), key from character 160
    "error_event": (200, "text/event-stream",
                    lambda t: b"data: " + json.dumps({"error": {"message": t, "code": 401}}).encode() + b"\n\n", 160),
    # a chunk that is not JSON: 120 characters kept, key from character 80
    "bad_chunk": (200, "text/event-stream", lambda t: b"data: " + t.encode() + b"\n\n", 80),
    # an error page: the record keeps 200 characters of "HTTP 500: <page>", key from character 150 of the page
    "error_page": (500, "text/plain", lambda t: t.encode(), 150),
    # a page where a stream was asked for: read to 200 bytes before, key from byte 120
    "not_a_stream": (200, "text/html", lambda t: t.encode(), 120),
    # the same, its content type echoing the key: it names the failure in Locust's table
    "content_type": (200, "text/html; echo=", lambda t: b"<html>sign in</html>", 0),
}
_DISTINCT = {"".join(form): name for name, form in sorted(FORMS.items(), reverse=True) if not name.endswith("/mixed")}
PLAN = [(cut, name) for cut in CUTS for name in sorted(_DISTINCT.values())]


class _EchoHandler(QuietHandler):
    """Every other POST: the key from the Authorization header echoed in the next (cut, form) of ``PLAN``."""

    def do_GET(self) -> None:
        if self.path in ("/health", "/ready"):
            self._send(200, "text/plain", b"ok")
        elif self.path == "/v1/models":
            self._send(200, "application/json", b'{"data": [{"id": "tiny"}]}')
        else:
            self._send(404, "text/plain", b"not found")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sent = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        with self.server.lock:
            self.server.posts += 1
            n = self.server.posts
        if n % 2 or sent != KEY:  # the preflight's probe, and every other request: a good stream
            self._send(200, "text/event-stream", SSE_OK)
            return
        cut, name = PLAN[(n // 2 - 1) % len(PLAN)]
        status, ctype, build, at = CUTS[cut]
        self.server.played.add((cut, name))
        text = "e" * at + "".join(FORMS[name]) + " (check your key)"
        self._send(status, ctype + text if ctype.endswith("=") else ctype, build(text))


def test_a_key_echoed_in_every_form_across_every_cut_never_reaches_a_file_or_the_terminal(tmp_path: Path) -> None:
    server: Any = _Server(("127.0.0.1", 0), _EchoHandler)
    server.daemon_threads, server.lock, server.posts, server.played = True, threading.Lock(), 0, set()
    out = tmp_path / "run"
    with serving(server) as url:
        proc = subprocess.run(
            [sys.executable, "-m", "specbench.cli", "run", "--host", url, "--label", "forms", "--out", str(out),
             "--api-key-env", "SPECBENCH_FORMS_KEY", "--ladder", "2", "--max-tokens", "8",
             "--min-requests", str(2 * len(PLAN) + 4), "--min-step-time", "1", "--max-step-time", "60",
             "--step-ci", "0", "--max-error-rate", "1"],
            capture_output=True, text=True, timeout=180, env={**os.environ, "SPECBENCH_FORMS_KEY": KEY})
    assert proc.returncode in (0, 3), proc.stderr[-3000:]
    assert server.played == set(PLAN), sorted(set(PLAN) - server.played)[:5]
    files = sorted(f for f in out.rglob("*") if f.is_file())
    assert files
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        found = leaks(text) + leaks(_json_strings(text))
        assert not found, (f.name, found[:5])
    assert leaks(proc.stdout + proc.stderr) == []
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    errors = [r["error"] or "" for r in records if r["status"] != "ok"]
    assert {r["status"] for r in records} >= {"stream_error", "http_error", "not_streaming"}
    assert sum(MASK in e for e in errors) >= len(PLAN), "the echoes were kept, masked"


# -- keys refused up front ---------------------------------------------------------------------------------------

def _specbench(*args: str, env: dict[str, str] | None = None, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def _one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1000:], proc.stderr[-1000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("specbench: error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("key", "why"), [
    ("sk-abc", "shorter than 8"),
    ("sk-line-one\nsk-line-two", "control character"),
    ("sk-tab\tseparated-key", "control character"),
    ("sk-ключ-не-латиница-42", "outside Latin-1"),
])
def test_a_key_that_cannot_be_sent_or_hidden_is_refused_in_one_line(tmp_path: Path, key: str, why: str) -> None:
    """Before: a 6-character key was accepted (and never redacted: too short to register); a newline or a
    non-Latin-1 character reached requests, whose traceback printed the key."""
    with _EchoServer() as server:
        proc = _specbench("run", "--host", server.url, "--label", "k", "--out", str(tmp_path / "run"),
                          "--api-key-env", "SPECBENCH_BAD_KEY", env={"SPECBENCH_BAD_KEY": key}, cwd=tmp_path)
        _one_line(proc, "--api-key-env", "SPECBENCH_BAD_KEY", why)
        assert server.posts == 0 and server.gets == 0, "refused before any request"
    printed = proc.stdout + proc.stderr
    assert all(part not in printed for part in key.split() if len(part) >= 4), printed
    assert not (tmp_path / "run").exists()


def test_the_key_rules_name_the_problem_and_accept_ordinary_keys() -> None:
    assert key_problem("sk-8char") is None and key_problem(KEY) is None and key_problem("clé-latin1-ok") is None
    assert "shorter than 8" in (key_problem("1234567") or "")
    assert "control" in (key_problem("sk-abcdef\r") or "") and "control" in (key_problem("sk-abc\x7fdef") or "")
    assert "Latin-1" in (key_problem("sk-abcdef\u20ac") or "")


class _EchoServer:
    """_EchoHandler on a free loopback port, counting what reached it."""

    def __enter__(self) -> Any:
        server: Any = _Server(("127.0.0.1", 0), _CountingHandler)
        server.daemon_threads, server.lock, server.posts, server.played, server.gets = (
            True, threading.Lock(), 0, set(), 0)
        self._serving = serving(server)
        server.url = self._serving.__enter__()
        self.server = server
        return server

    def __exit__(self, *exc: Any) -> None:
        self._serving.__exit__(*exc)


class _CountingHandler(_EchoHandler):
    def do_GET(self) -> None:
        with self.server.lock:
            self.server.gets += 1
        super().do_GET()


# -- URLs with credentials --------------------------------------------------------------------------------------

PASSWORD = "hunter2@pw-Tail-9931"  # a raw '@' in the password: the host starts after the LAST '@'


def test_redact_masks_url_credentials_up_to_the_last_at() -> None:
    """Before: the mask stopped at the first '@', and 'pw-Tail-9931@127.0.0.1' was printed and stored."""
    text = f"server: http://alice:{PASSWORD}@127.0.0.1:8000/v1 is up; mail bob@example.org"
    assert redact(text) == f"server: http://{MASK}@127.0.0.1:8000/v1 is up; mail bob@example.org"
    assert shown_url("http://alice:pa/ss-Secret-77@127.0.0.1:8000/") == f"http://{MASK}@127.0.0.1:8000/"
    assert shown_url("http://127.0.0.1:8000/") == "http://127.0.0.1:8000/"


def test_a_long_error_page_with_an_at_is_redacted_in_linear_time() -> None:
    """Before: a URL scheme was tried at every letter of a run and each try scanned the rest of the run, so a
    64 KiB error page of letters holding one '@' took seconds (quadratic) on every failed request."""
    page = "http://" + "a" * 65536 + " mail admin@example.org"
    started = time.perf_counter()
    assert redact(page) == page and clip(page, 200) == page[:200]
    assert time.perf_counter() - started < 0.5


def test_a_raw_at_in_the_url_password_never_shows_its_tail(tmp_path: Path) -> None:
    with tiny_server("ok") as server:
        host = server.url.replace("http://", f"http://alice:{PASSWORD}@")
        out = tmp_path / "run"
        proc = _specbench("run", "--host", host, "--label", "at", "--out", str(out), "--ladder", "1",
                          "--max-tokens", "8", "--min-requests", "4", "--min-step-time", "1",
                          "--max-step-time", "20", "--step-ci", "0", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        basic = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
        assert any(auth == basic for _m, _p, auth in server.seen), "the whole password was sent"
    written = [proc.stdout, proc.stderr] + [f.read_text(errors="replace") for f in out.rglob("*") if f.is_file()]
    everything = "\n".join(written)
    for secret in ("pw-Tail-9931", PASSWORD, f"alice:{PASSWORD}"):
        assert not [f for f in encodings(secret) if f in everything], secret
    meta = json.loads((out / "meta.json").read_text())
    assert meta["server"]["url"].startswith(f"http://{MASK}@127.0.0.1:"), meta["server"]["url"]
    assert f"http://{MASK}@127.0.0.1:" in proc.stdout


@pytest.mark.parametrize("char", ["/", "#", "?"])
def test_a_url_refused_for_its_password_does_not_echo_it(tmp_path: Path, char: str) -> None:
    """A '/', '#' or '?' in a password ends the URL's host part early: the URL is refused, and the refusal
    printed it whole before (the mask needs an '@' after the credentials, which the early end hid)."""
    with tiny_server("ok") as server:
        host = server.url.replace("http://", f"http://alice:pa{char}ss-Secret-5521@")
        proc = _specbench("run", "--host", host, "--label", "u", "--out", str(tmp_path / "run"), cwd=tmp_path)
        line = _one_line(proc, "--host")
        assert server.seen == []
    assert "Secret-5521" not in proc.stdout + proc.stderr and "alice" not in line, line


def test_preflight_names_the_server_once(tmp_path: Path) -> None:
    """Before: 'specbench: error: server server http://...: not reachable'."""
    url = f"http://127.0.0.1:{free_port()}"
    line = _one_line(_specbench("run", "--host", url, "--label", "p", "--out", str(tmp_path / "r"), cwd=tmp_path),
                     "not reachable")
    assert f"error: server {url}: " in line and "server server" not in line, line
