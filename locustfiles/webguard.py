"""Only the web UI's own page drives the web UI: other pages are refused, and nothing is shared cross-origin.

Locust's Flask app answers every origin (``CORS(app)`` reflects it), so any page open in the user's browser
could start a run, stop one, or read the statistics, the Tokens CSV and the report. This WSGI layer, around the
whole app (every route, Locust's and ours, present and future), refuses with HTTP 403, before any route runs:

- a request that changes state (any method but GET, HEAD and OPTIONS) whose ``Origin`` is missing, ``null``
  or another origin than the one the request was sent to (its ``Host``, or a proxy's ``X-Forwarded-Host``).
  Browsers send ``Origin`` with every POST, the UI's own included; a script (curl, requests) must send it too:
  ``-H 'Origin: http://127.0.0.1:8089'``. A GET of the Tokens report (it writes RUN_DIR/report/) with an
  ``Origin`` must name the UI's too;
- any request a browser marks as sent from another site's page (``Sec-Fetch-Site: cross-site`` or
  ``same-site``: another port on the same host is another site's page too), but a link followed to the UI's
  start page;

and it drops every ``Access-Control-*`` header from the answers, so no other origin can read one. A page whose
own host name is made to resolve to this machine (DNS rebinding) is same-origin to the browser, so every request,
reads included, must name the UI by a name that cannot be rebound: an IP address, ``localhost`` (or a name under
``.localhost``), this machine's host name, or a name listed in ``SPECBENCH_WEB_ALLOWED_HOSTS`` (comma-separated:
the UI served behind a proxy under a domain name); any other ``Host`` is refused with 403. A UI that listens
beyond 127.0.0.1 wants ``--web-login`` as well.

The start form is held to the fields the UI shows (``FORM_FIELDS`` and the suite's options shown under Custom
parameters): Locust applies any field whose name is an option, so ``out=...&overwrite=true`` replaced an earlier
run and ``json_file=PATH`` wrote a file where the page said.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

ORIGIN_REFUSED = ("refused: this request did not come from the web UI's own page (its Origin header is {origin}, "
                  "the UI is {expected}); a script must send the header 'Origin: {expected}'")
SITE_REFUSED = "refused: a page of another site (Sec-Fetch-Site: {site}) may not use the web UI"
HOST_REFUSED = ("refused: the request names the UI as {host}, a name that is not an IP address, localhost or this "
                "machine's name (a page of another site can point such a name at this machine: DNS rebinding); "
                "to serve the UI under that name, list it in {var}")
ALLOWED_HOSTS_VAR = "SPECBENCH_WEB_ALLOWED_HOSTS"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WRITING_GETS = ("/tokens/report",)  # GET routes that write files (the report into RUN_DIR/report/)
# The fields Locust's own Start form sends (the suite's shown options come on top: ``form_fields``)
FORM_FIELDS = frozenset({"user_count", "spawn_rate", "host", "run_time", "profile", "user_classes", "shape_class"})
_DEFAULT_PORTS = {"http": 80, "https": 443}

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _origin_of(url: str, scheme: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an ``Origin`` value, or of a ``Host`` header given the request's scheme."""
    parts = urlsplit(url if "://" in url else f"{scheme}://{url}")
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.scheme not in _DEFAULT_PORTS:
        return None
    return parts.scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[parts.scheme]


def _rebindable(name: str) -> bool:
    """A host name a page of another site could point at this machine (DNS rebinding): not an IP address, not
    localhost, not this machine's name, not one the user allowed."""
    name = name.strip("[]").rstrip(".").lower()
    if not name or name == "localhost" or name.endswith(".localhost"):
        return False
    try:
        ipaddress.ip_address(name)
        return False
    except ValueError:
        pass
    allowed = {h.strip().rstrip(".").lower() for h in os.environ.get(ALLOWED_HOSTS_VAR, "").split(",") if h.strip()}
    return name not in allowed | {socket.gethostname().lower()}


def host_refusal(environ: dict[str, Any]) -> str | None:
    """Why the request's ``Host`` (or a proxy's ``X-Forwarded-Host``) may not name the UI, or None."""
    scheme = str(environ.get("wsgi.url_scheme", "http"))
    for header in ("HTTP_HOST", "HTTP_X_FORWARDED_HOST"):
        value = str(environ.get(header, "")).split(",")[0].strip()
        if not value:
            continue
        parsed = _origin_of(value, scheme)
        name = parsed[1] if parsed is not None else value
        if parsed is None or _rebindable(name):
            return HOST_REFUSED.format(host=repr(value[:100]), var=ALLOWED_HOSTS_VAR)
    return None


def refusal(environ: dict[str, Any], base: str) -> str | None:
    """Why this request may not reach the web UI (one line), or None."""
    rebound = host_refusal(environ)
    if rebound is not None:
        return rebound
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    path = str(environ.get("PATH_INFO", "/"))
    site = str(environ.get("HTTP_SEC_FETCH_SITE", "")).lower()
    start_page = method == "GET" and path.rstrip("/") == base and environ.get("HTTP_SEC_FETCH_MODE") == "navigate"
    if site in ("cross-site", "same-site") and not start_page:
        return SITE_REFUSED.format(site=site)
    if method in SAFE_METHODS and not any(path == base + route for route in WRITING_GETS):
        return None
    scheme = str(environ.get("wsgi.url_scheme", "http"))
    hosts = [str(environ.get("HTTP_HOST", "")), str(environ.get("HTTP_X_FORWARDED_HOST", "")).split(",")[0].strip()]
    allowed = {o for o in (_origin_of(h, scheme) for h in hosts if h) if o is not None}
    origin = str(environ.get("HTTP_ORIGIN", ""))
    if origin and _origin_of(origin, scheme) in allowed:
        return None
    if method == "GET" and not origin:  # the report: a link (the UI's, typed, bookmarked) or a script sends none
        return None
    expected = next((f"{s}://{h}" + ("" if p == _DEFAULT_PORTS[s] else f":{p}") for s, h, p in allowed), "?")
    return ORIGIN_REFUSED.format(origin=repr(origin) if origin else "missing", expected=expected)


class OriginGuard:
    """WSGI middleware: refuse what ``refusal`` names (403, JSON as Locust's own answers), strip CORS headers."""

    def __init__(self, app: WsgiApp, base: str) -> None:
        self.app, self.base = app, base

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        why = refusal(environ, self.base)
        if why is not None:
            body = json.dumps({"success": False, "message": why}).encode()
            start_response("403 FORBIDDEN", [("Content-Type", "application/json"),
                                             ("Content-Length", str(len(body)))])
            return [body]

        def no_cors(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, exc_info) if exc_info is not None else start_response(status, kept)

        return self.app(environ, no_cors)


def install_origin_guard(web_ui: Any, base: str) -> None:
    """Put ``OriginGuard`` around the web UI's Flask app (``base``: ``--web-base-path``, no trailing slash)."""
    app = web_ui.app
    app.wsgi_app = OriginGuard(app.wsgi_app, base)


_shown: frozenset[str] | None = None


def form_fields() -> frozenset[str]:
    """The fields the web UI's Start form shows: Locust's own and the options under Custom parameters."""
    global _shown
    if _shown is None:  # as Locust's ui_extra_args_dict picks them, without parsing this process's argv
        from locust.argument_parser import default_args_dict, get_parser

        shown = frozenset(get_parser().args_included_in_web_ui) - frozenset(default_args_dict()) - {"help"}
        _shown = FORM_FIELDS | shown
    return _shown


def unshown_fields(form: Any) -> list[str]:
    """The names in a Start form that the UI does not show (sorted); such a form is refused."""
    return sorted(set(form.keys()) - form_fields())
