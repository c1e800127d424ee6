"""Is a ``--host`` a URL the suite can load? Checked before any load, so a typo never becomes 1,000 errors."""

from __future__ import annotations

from urllib.parse import urlsplit

from specbench.contract.redact import MASK, redact, register_url_credentials


class UrlError(ValueError):
    """The URL cannot be a server's base URL; the message names the flag and what was expected."""


def check_url(url: str, flag: str = "--host") -> str:
    """Return ``url`` without a trailing slash, or raise UrlError (credentials in the URL are never echoed)."""
    shown = shown_url(url)
    expected = "expected http://HOST[:PORT] or https://HOST[:PORT]"
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # raises on a port that is not a number in 0-65535
    except ValueError:
        raise UrlError(f"{flag}: {expected}, got {shown!r} (bad port)") from None
    if parts.scheme not in ("http", "https"):
        raise UrlError(f"{flag}: {expected}, got {shown!r}")
    if not parts.hostname:
        raise UrlError(f"{flag}: {expected}, got {shown!r} (no host name)")
    if port == 0:
        raise UrlError(f"{flag}: {expected}, got {shown!r} (port 0)")
    if parts.query or parts.fragment:
        raise UrlError(f"{flag}: {expected}, got {shown!r} (no query or fragment allowed)")
    if parts.path.rstrip("/").lower().endswith("/v1"):  # the API's path, not the server's root (#53)
        root = shown[:shown.lower().rindex("/v1")]
        raise UrlError(f"{flag}: {expected}, got {shown!r}: drop '/v1', the suite adds each API's path "
                       f"(/v1/chat/completions, /generate) itself; give {root!r}")
    register_url_credentials(url.strip())  # hidden in every form from now on, wherever a server echoes them
    return url.strip().rstrip("/")


def shown_url(url: str) -> str:
    """``url`` as a refusal may print it: whatever stands between ``://`` and the last ``@`` masked, so a
    password the URL cannot hold (a raw ``/``, ``#`` or ``?`` in it ends the host part early) is not shown."""
    text = redact(url)
    scheme, sep, rest = text.partition("://")
    if not sep or "@" not in rest:
        return text
    return f"{scheme}{sep}{MASK}{rest[rest.rindex('@'):]}"


def has_credentials(url: str) -> bool:
    """Whether ``url`` carries ``user[:pass]@``: requests turns those into Basic auth, replacing any Bearer key."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    return parts.username is not None or parts.password is not None
