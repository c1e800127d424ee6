"""Before any load: is the server up, allowed, serving the route, and streaming? Who is it?

Each failure is one sentence naming the server and what to do; the caller prints it and exits 2.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import requests
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from specbench.contract import tls
from specbench.contract.redact import clip
from specbench.contract.servertext import describe_speculative, plain
from specbench.locustfiles.auth import auth_headers
from specbench.locustfiles.deadline import Deadline, DeadlineExceeded, fetch
from specbench.locustfiles.dialects import dialect
from specbench.locustfiles.httpsession import new_session
from specbench.locustfiles.refusals import RefusalBackoff, is_refusal, retry_after_s
from specbench.locustfiles.run import resolve_api
from specbench.locustfiles.serverinfo import ServerIdentity, identify

PROBE_TRIES = 5  # tiny requests a refusing server gets (backing off between them) before it is said to refuse all


class PreflightError(Exception):
    """The server cannot be measured as it stands; the message says why in one line."""


@dataclass
class Preflight:
    identity: ServerIdentity
    api: str

    def describe(self, role: str) -> str:
        ident = self.identity
        spec_text = describe_speculative(ident.speculative)
        cap = f", max_running_requests={plain(ident.max_running_requests)}" if ident.max_running_requests else ""
        return (f"{role}: {ident.url} is {plain(ident.kind)}, model {plain(ident.model or '?')}, {spec_text}{cap}; "
                f"api {self.api}")


def check_server(url: str, role: str, *, api: str = "auto", api_key: str | None = None,
                 timeout: float = 10.0, total: float = 30.0) -> Preflight:
    """Raise PreflightError with one clear line when the server cannot be measured.

    ``timeout`` bounds each network wait; ``total`` the whole check, so a server that trickles bytes or
    streams forever cannot hold the command.
    """
    base = url.rstrip("/")
    try:
        return _preflight(base, role, api, api_key, min(timeout, total), Deadline(total))
    except DeadlineExceeded:
        raise PreflightError(f"{_server(role)} {base}: preflight did not finish within {total:g} s "
                             "(the server answers too slowly, trickles, or streams without end)") from None


def _preflight(base: str, role: str, api: str, api_key: str | None, timeout: float, deadline: Deadline) -> Preflight:
    headers = auth_headers(api_key)
    with new_session() as session:
        session.headers.update(headers)
        alive = False
        for path in ("/ready", "/health", "/v1/models", "/props"):
            try:
                resp = fetch(session, "GET", base + path, deadline=deadline, per_read_s=timeout, max_bytes=1 << 20,
                             allow_redirects=False)
            except requests.ConnectionError as exc:
                raise PreflightError(f"{_server(role)} {base}: {_unreachable(exc)}") from None
            except (requests.Timeout, ReadTimeoutError):
                raise PreflightError(f"{_server(role)} {base}: no answer within {timeout:.0f} s") from None
            if resp.status in (401, 403):
                raise PreflightError(f"{_server(role)} {base}: answers {resp.status} on {path}; "
                                     "give an API key with --api-key-env NAME")
            if 300 <= resp.status < 400:  # never followed: the suite measures the server it was given (#53)
                where = plain(resp.headers.get("Location") or resp.headers.get("location") or "nowhere")
                raise PreflightError(f"{_server(role)} {base}: answers {resp.status} on {path}, redirecting to "
                                     f"{where}; the suite follows no redirect: give the URL of the server itself")
            if resp.status == 200:
                alive = True
                break
        if not alive:
            raise PreflightError(f"{_server(role)} {base}: answers none of /ready, /health, /v1/models, /props "
                                 "with 200 (not ready, or not an inference server)")
        identity = identify(base, api_key=api_key, timeout=timeout, deadline=deadline)
        chosen = resolve_api(api, identity)
        _check_streams(session, base, chosen, identity, role, timeout, deadline)
    return Preflight(identity=identity, api=chosen)


def _server(role: str) -> str:
    """How a message names the server: "baseline server", "eagle3 server"; "server" alone for ``run``'s own."""
    return "server" if role == "server" else f"{role} server"


def _unreachable(exc: BaseException) -> str:
    """Why a connection failed, in the words a user can act on: a certificate not trusted is not a refusal."""
    if tls.is_certificate_error(exc):
        return ("TLS: its certificate is not trusted (self-signed, or signed by a private CA?): give --ca-bundle FILE "
                "with the CA's certificate (or set SSL_CERT_FILE)")
    if isinstance(exc, requests.exceptions.SSLError):
        return f"TLS handshake failed ({clip(str(exc), 200)}): is it an https:// server?"
    if "BadStatusLine" in str(exc):  # it answered, but not in HTTP/1.x: an HTTP/2-only server sends binary frames
        return ("answered in something other than HTTP/1.1 (an HTTP/2-only server? the suite speaks HTTP/1.1: "
                "enable HTTP/1.1 on the server, or put an HTTP/1.1 proxy in front)")
    return "not reachable (connection refused or no route)"


def _check_streams(session: requests.Session, base: str, api: str, identity: ServerIdentity, role: str,
                   timeout: float, deadline: Deadline) -> None:
    route = dialect(api)
    path = route.path
    body = route.probe_body(identity.model or "default")
    resp = _probe(session, base, path, body, role, timeout, deadline)
    with resp:
        if resp.status_code == 404:
            raise PreflightError(f"{_server(role)} {base}: does not serve {path} (404); choose another --api")
        if resp.status_code in (401, 403):
            raise PreflightError(f"{_server(role)} {base}: answers {resp.status_code} on {path}; "
                                 "give an API key with --api-key-env NAME")
        if resp.status_code != 200:
            raise PreflightError(f"{_server(role)} {base}: {path} answers HTTP {resp.status_code} to a tiny request")
        ctype = resp.headers.get("content-type", "")
        first = b""
        try:
            # read1: whatever has arrived; iter_content would read a response without chunked encoding to EOF.
            while b"\n" not in first and len(first) <= 4096:
                deadline.check()
                block = resp.raw.read1(4096)
                if not block:
                    break
                first += block
        except (requests.RequestException, ReadTimeoutError, ProtocolError, OSError) as exc:
            silent = isinstance(exc, ReadTimeoutError | TimeoutError)
            why = f"went silent for {timeout:g} s" if silent else f"broke ({type(exc).__name__})"
            raise PreflightError(f"{_server(role)} {base}: the stream from {path} {why} before its first "
                                 "line") from None
        if "text/event-stream" not in ctype and not first.lstrip().startswith(b"data:"):
            raise PreflightError(f"{_server(role)} {base}: {path} does not stream (content-type "
                                 f"{plain(ctype or 'none')}); the suite measures streaming servers only")


def _probe(session: requests.Session, base: str, path: str, body: dict[str, Any], role: str, timeout: float,
           deadline: Deadline) -> requests.Response:
    """The tiny streamed request, sent again after a refusal (HTTP 429/503) with the users' back-off.

    Why: a refusal is a server declining a moment of load, measured as ``refused`` work during a run (exit 0), so
    one refused probe must not end the command; a server that refuses every try measured nothing and never would,
    which is a preflight failure (exit 2) saying so."""
    backoff, started = RefusalBackoff(), time.monotonic()
    for tries in range(1, PROBE_TRIES + 1):
        try:
            resp = session.post(base + path, json=body, timeout=deadline.timeout(timeout), stream=True,
                                allow_redirects=False)
        except requests.RequestException as exc:
            raise PreflightError(f"{_server(role)} {base}: {path} failed ({type(exc).__name__})") from None
        if not is_refusal(resp.status_code):
            return resp
        resp.close()
        wait = backoff.next_wait(retry_after_s(resp.headers.get("retry-after")))
        if tries == PROBE_TRIES or wait >= deadline.left():
            break
        time.sleep(wait)
    after = retry_after_s(resp.headers.get("retry-after"))
    asked = f"; it asks to come back in {after:g} s: Retry-After" if after is not None else ""
    raise PreflightError(f"{_server(role)} {base}: refuses every request: {path} answered HTTP {resp.status_code} to "
                         f"{tries} tiny request(s) over {time.monotonic() - started:.1f} s (a full queue or a rate "
                         f"limit{asked}); nothing can be measured while it takes no work on")
