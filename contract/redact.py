"""The one redaction function: the API key and URL credentials never reach disk or screen.

Everything the suite stores or prints that may carry text from outside (server error bodies, URLs, the
command line, log lines) passes through ``redact``. The key is read from the environment variable named by
``--api-key-env`` (``register_key``), or passed explicitly; URL user:password parts are always replaced.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

MASK = "<redacted>"
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<cred>[^/@\s?#]+)@")
_KEYS: set[str] = set()
_MIN_KEY = 4  # shorter "keys" would blank ordinary words; such a key is refused by the settings check


def register_key(value: str | None) -> None:
    """Remember a secret for this process, so every later ``redact`` call hides it."""
    if value and len(value) >= _MIN_KEY:
        _KEYS.add(value)


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
    if not text:
        return text
    out = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    for key in sorted({*_KEYS, *(k for k in keys if k and len(k) >= _MIN_KEY)}, key=len, reverse=True):
        out = out.replace(key, MASK)
    return out


def redact_obj(obj: Any) -> Any:
    """``redact`` applied to every string inside a JSON-like value."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    return obj


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
