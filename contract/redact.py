"""The one redaction function: the API key and URL credentials never reach disk or screen, in any form.

Everything the suite stores or prints that may carry text from outside (server error bodies, URLs, the
command line, log lines, raw /metrics series and their labels) passes through ``redact``. The key is read from
the environment variable named by ``--api-key-env`` (``register_key``), or passed explicitly; URL user:password
parts are always replaced, and a URL's credentials are registered too (``register_url_credentials``), so the
password and the Basic header built from them are hidden wherever a server echoes them. Each secret is
registered with the encodings a server may echo it in: as sent, base64 (standard and URL-safe, with and without
padding) and percent-encoded.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import orjson

MASK = "<redacted>"
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<cred>[^/@\s?#]+)@")
_KEYS: set[str] = set()
_MIN_KEY = 4  # shorter "keys" would blank ordinary words; such a key is refused by the settings check


def encodings(secret: str) -> set[str]:
    """The forms a server may echo ``secret`` in: as is, base64 (both alphabets, padded or not), percent-encoded."""
    raw = secret.encode("utf-8")
    forms = {secret, quote(secret, safe="")}
    for b64 in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms |= {b64, b64.rstrip("=")}
    return {f for f in forms if len(f) >= _MIN_KEY}


def register_key(value: str | None) -> None:
    """Remember a secret for this process, so every later ``redact`` call hides it in every form."""
    if value and len(value) >= _MIN_KEY:
        _KEYS.update(encodings(value))


def register_url_credentials(url: str | None) -> None:
    """Remember a URL's ``user:password`` (and its password alone): requests sends them as Basic auth."""
    try:
        parts = urlsplit(url or "")
    except ValueError:
        return
    if parts.password is None:
        return
    user, password = unquote(parts.username or ""), unquote(parts.password)
    register_key(password)
    register_key(f"{user}:{password}")  # the Basic header's payload, and its base64 (the header's value)


def register_key_env(env_name: str | None) -> None:
    """Remember the key held by ``env_name`` (and the name itself, when someone passed the key there)."""
    if not env_name:
        return
    register_key(os.environ.get(env_name))
    if not looks_like_env_name(env_name):
        register_key(env_name)


def looks_like_env_name(name: str) -> bool:
    """A conventional variable name (``MY_KEY``); anything else may be the key itself and is never echoed."""
    return re.fullmatch(r"[A-Z_][A-Z0-9_]{0,63}", name) is not None


def redact(text: str, keys: tuple[str, ...] = ()) -> str:
    """``text`` with URL credentials and every known key (plus ``keys``) replaced by a mask."""
    if not text or (not _KEYS and not keys and "@" not in text):  # no secret known, no user@ in a URL
        return text
    out = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    for key in sorted({*_KEYS, *(k for k in keys if k and len(k) >= _MIN_KEY)}, key=len, reverse=True):
        out = out.replace(key, MASK)
    return out


def redact_obj(obj: Any) -> Any:
    """``redact`` applied to every string inside a JSON-like value."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):  # keys too: a raw /metrics series name carries its labels
        return {redact(k) if isinstance(k, str) else k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        if all(type(v) is float or type(v) is int for v in obj):  # numbers carry no secret (a record's chunk lists)
            return list(obj)
        return [redact_obj(v) for v in obj]
    return obj


_JSONL = orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE


def _json_plain(key: str) -> bool:
    """True when ``key`` appears in JSON text exactly as it is (nothing in it is escaped by the encoder)."""
    return not any(c in key for c in '"\\') and all(ord(c) >= 0x20 for c in key)


def redacted_json_line(obj: Any) -> bytes:
    """``obj`` as one compact JSON line (newline included), ``redact_obj`` applied: what the JSONL files hold.

    Why not walk every value first: a record is mostly numbers, and the walk cost more than the encoding, on
    every request. The encoded text holds each of ``obj``'s strings verbatim (orjson escapes only quotes,
    backslashes and control characters), so when it contains no known secret and no ``@`` (a URL's
    credentials), the walk would change nothing and is skipped; otherwise it runs, exactly as before. Values
    orjson refuses (integers over 64 bits, numpy scalars) take the standard library's encoder."""
    try:
        data = orjson.dumps(obj, option=_JSONL)
    except TypeError:
        return (json.dumps(redact_obj(obj), separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
    if b"@" not in data and (not _KEYS or _unseen_keys(data.decode("utf-8"))):
        return data
    return orjson.dumps(redact_obj(obj), option=_JSONL)


def _unseen_keys(text: str) -> bool:
    """No known secret in ``text``, and every one would show there as it is (none needs JSON escaping)."""
    return all(_json_plain(k) and k not in text for k in _KEYS)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message, so no handler ever prints a secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the logger's business, not ours
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_filter() -> None:
    """Attach the filter to every handler of the root logger (Locust's console and log file included)."""
    flt = RedactingFilter()
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(flt)
