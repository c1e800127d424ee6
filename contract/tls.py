"""Which certificate authorities an https:// server is checked against, the same for every client of a run.

Why one place: the load client (its own transport), the preflight, the server-info and /metrics readers all open
TLS connections; a self-signed or private-CA server must be trusted by all of them or by none. The bundle is
``--ca-bundle FILE`` where given, else the first of the conventional variables that is set, ``SSL_CERT_FILE``
(OpenSSL's), ``REQUESTS_CA_BUNDLE`` and ``CURL_CA_BUNDLE`` (requests' and curl's), else the system's store. The
settings check loads the file once (a file that holds no certificate is refused there, naming it) and
``trust`` makes it this process's choice; ``verify()`` is what a requests session or the transport is given.
"""

from __future__ import annotations

import os
import ssl

CA_ENV = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
_chosen: str | None = None


class CaBundleError(ValueError):
    """A CA bundle that cannot be read or holds no certificate; the message names it and where it came from."""


def ca_bundle_source(flag_value: str) -> tuple[str, str] | None:
    """(path, where it came from) of the bundle to use, or None for the system's store. A variable naming no
    file is passed over (a stale variable must not stop a run against an http:// server); the flag is not."""
    if flag_value:
        return flag_value, "--ca-bundle"
    for name in CA_ENV:
        value = os.environ.get(name)
        if value and os.path.isfile(value):
            return value, name
    return None


def check_ca_bundle(flag_value: str) -> str | None:
    """The bundle's path after loading it once (CaBundleError if it cannot serve), or None for the system's."""
    found = ca_bundle_source(flag_value)
    if found is None:
        return None
    path, where = found
    if not os.path.isfile(path):
        raise CaBundleError(f"{where}: {path}: no such file (expected a PEM file of certificate authorities)")
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise CaBundleError(f"{where}: {path}: not a PEM file of certificate authorities ({exc})") from None
    return path


def trust(path: str | None) -> None:
    """Make ``path`` (None: the system's store) the bundle every TLS client of this process checks servers by."""
    global _chosen
    _chosen = path


def verify() -> bool | str:
    """What requests' ``Session.verify`` and the transport take: the chosen bundle's path, else True (the system's
    store, or the variables above where no settings were read: the same rule, read now)."""
    if _chosen is not None:
        return _chosen
    found = ca_bundle_source("")
    return found[0] if found is not None else True


def is_certificate_error(exc: BaseException) -> bool:
    """A failed TLS handshake because the server's certificate was not trusted (not a refused connection)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(current):
            return True
        current = current.__cause__ or current.__context__ or next(
            (a for a in getattr(current, "args", ()) if isinstance(a, BaseException)), None)
    return False
