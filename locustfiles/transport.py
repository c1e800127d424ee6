"""One streamed POST on a user's requests session: prepared once, then only its body changes.

Why not ``HttpSession.post``: requests' ``Session.request`` rebuilds each request from nothing. It merges the
session's and the call's headers, parameters, hooks and cookie jars (each merge an ``isinstance`` against a
runtime-checked protocol in requests 2.34), creates three cookie jars with their locks and parses the URL
again. Measured at C=4 with one-token requests, that was about a third of the suite's CPU per request, and it
is serial work: when many streams end in one decode step, each user's preparation delays every other user's
send. A user's requests to its server differ only in their body, so requests itself prepares the request once
(URL, merged headers) and each send copies it with the new body and hands it to the session's adapter, as
``Session.send`` would. Left out, because a streamed completion never uses them: cookies, redirects (a 3xx
is then reported as not a stream, with its status) and response hooks.

Locust's statistics get the event ``HttpSession.request`` fires (``report``), once per request.
"""

from __future__ import annotations

from typing import Any

import requests
from locust.exception import CatchResponseError
from requests.models import PreparedRequest


class StreamPost:
    """Sends streamed POSTs to one session's base URL; the prepared request is kept per (path, headers)."""

    __slots__ = ("_adapter", "_key", "_session", "_template")

    def __init__(self, session: requests.Session) -> None:
        self._session = session
        self._key: tuple[str, tuple[tuple[str, str], ...]] | None = None
        self._template = PreparedRequest()
        self._adapter: Any = None

    def _prepared(self, path: str, headers: dict[str, str]) -> PreparedRequest:
        key = (path, tuple(headers.items()))
        if key != self._key:  # the first request, or headers changed (another API key): requests prepares it
            url = f"{getattr(self._session, 'base_url', '') or ''}{path}"
            request = requests.Request("POST", url, headers={"Content-Type": "application/json", **headers})
            self._template = requests.Session.prepare_request(self._session, request)  # not Locust's: no name
            self._adapter = self._session.get_adapter(url)
            self._key = key
        return self._template

    def send(self, path: str, headers: dict[str, str], body: bytes,
             timeout: tuple[float, float]) -> requests.Response:
        """Write the request and return its response once its head arrived (the body is left to stream).
        Raises what ``Session.send`` raises: ``requests.RequestException`` and its kinds."""
        template = self._prepared(path, headers)
        prep = PreparedRequest()
        prep.method, prep.url, prep.hooks = template.method, template.url, template.hooks
        prep._cookies = template._cookies  # type: ignore[attr-defined]  # read by nothing on this path
        prep.headers = template.headers.copy()
        prep.headers["Content-Length"] = str(len(body))
        prep.body = body
        session = self._session
        return self._adapter.send(prep, stream=True, timeout=timeout, verify=session.verify, cert=session.cert,
                                  proxies=session.proxies)


def report(user: Any, name: str, start_time: float, response_time_ms: float, length: int,
           response: requests.Response | None, failure: str | None, url: str) -> None:
    """One request in Locust's statistics, as ``HttpSession.request`` with ``catch_response`` reports it:
    a failure's text arrives as a ``CatchResponseError``."""
    user.environment.events.request.fire(
        request_type="POST", name=name, response_time=response_time_ms, response_length=length,
        response=response, context=user.context(), start_time=start_time, url=url,
        exception=CatchResponseError(failure) if failure is not None else None)
