"""The one redaction function: the API key and URL credentials never reach disk or screen, in any form.

Everything the suite stores or prints that may carry text from outside (server error bodies, URLs, the
command line, log lines, raw /metrics series and their labels) passes through ``redact``; server text that is
kept only in part goes through ``clip``, which redacts the whole text before it cuts (a key crossing the cut
would no longer be recognised) and masks a secret's start left at the end. The key is read from the environment
variable named by ``--api-key-env`` (``register_key``), or passed explicitly; URL user:password parts are always
replaced, and a URL's credentials are registered too (``register_url_credentials``), so the password and the
Basic header built from them are hidden wherever a server echoes them.

Each secret is hidden in the forms a server may echo it in: as sent, and its base64 (standard and URL-safe,
padded or not), each of them with any of its characters escaped as a percent-escape (UTF-8 or Latin-1, hex in
any case, ``+`` for a space), a JSON escape (``\\uXXXX`` in any case, ``\\/``, ``\\"``, ``\\\\``) or an HTML
character reference (``&#NN;``, ``&#xHH;`` with any leading zeros, ``&amp;`` ``&lt;`` ``&gt;`` ``&quot;``
``&apos;``). One regular expression per secret, where each character matches itself or any of its escapes,
covers every mix of them.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

import orjson

MASK = "<redacted>"
# user[:password]@ before a host: up to the LAST @ before the path (a raw @ in a password is no end)
_URL_CREDENTIALS = re.compile(r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s?#]*@")
MIN_KEY_LENGTH = 8  # an API key shorter than this is refused by the settings check (it would blank words)
_MIN_KEY = 4  # the shortest secret registered at all (a URL's password may be short; shorter would blank words)
PREFIX_MIN = 8  # a secret's start this long (or longer) left at the end of kept text is masked too
_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos"}
_SECRETS: set[str] = set()  # every registered secret as sent (its other forms are derived)
_REGISTERED: list[frozenset[str]] = []  # _SECRETS frozen, once per change (the cached expressions' key)
# The end of kept text that may be the start of an escape: '%', '%4', '\', '\u00', '&#', '&#x6', '&am'
_PARTIAL_ESCAPE = re.compile(r"%[0-9A-Fa-f]?|\\(?:u[0-9A-Fa-f]{0,3})?|&(?:#[xX]?[0-9A-Fa-f]*|[A-Za-z]*)")


def _b64_forms(secret: str) -> tuple[str, str]:
    raw = secret.encode("utf-8")
    return base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()


def encodings(secret: str) -> set[str]:
    """Literal forms a server may echo ``secret`` in (as is, base64 both alphabets padded or not, percent-encoded
    upper and lower case with and without ``/`` kept, ``+`` for a space, JSON-escaped). ``redact`` hides these
    and every mix of escapes besides (``pattern_of``); this set is what tests search written files for."""
    forms = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret, safe=""), quote_plus(secret)}
    forms |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), f) for f in list(forms)}  # lower-case hex
    for b64 in _b64_forms(secret):
        forms |= {b64, b64.rstrip("="), b64.replace("/", "\\/"), b64.rstrip("=").replace("/", "\\/")}
    forms.add(json.dumps(secret)[1:-1])  # \uXXXX for anything not ASCII, \" and \\
    forms.add(json.dumps(secret)[1:-1].replace("/", "\\/"))
    forms.add("".join(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else json.dumps(c)[1:-1] for c in secret))
    forms.add("".join(f"&#{ord(c)};" for c in secret))
    forms.add("".join(f"&#x{ord(c):x};" for c in secret))
    return {f for f in forms if len(f) >= _MIN_KEY}


def _hex(value: int, width: int) -> str:
    """A hex number of at least ``width`` digits, each letter in either case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{value:0{width}x}")


@functools.lru_cache(maxsize=256)
def _unit(c: str) -> str:
    """One character of a secret: itself, or any escape a server may write it as."""
    cp = ord(c)
    alts = [re.escape(c), "".join(f"%{_hex(b, 2)}" for b in c.encode("utf-8"))]
    if 0x80 <= cp <= 0xFF:
        alts.append(f"%{_hex(cp, 2)}")  # a Latin-1 percent-escape
    if cp <= 0xFFFF:
        alts.append(rf"\\u{_hex(cp, 4)}")
    else:
        hi, lo = 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)
        alts.append(rf"\\u{_hex(hi, 4)}\\u{_hex(lo, 4)}")
    alts.append(rf"&#0*{cp}(?![0-9]);?")
    alts.append(rf"&#[xX]0*{_hex(cp, 1)}(?![0-9A-Fa-f]);?")
    if c in _NAMED:
        alts.append(f"&{_NAMED[c]};")
    if c == " ":
        alts.append(r"\+")
    if c in '/"\\':
        alts.append(re.escape("\\" + c))
    return "(?:" + "|".join(alts) + ")"


_PADDING = "(?:" + _unit("=") + "){0,2}"


def _sources(secret: str) -> list[str]:
    """The texts a secret is written from before any escape: itself and its base64 (without padding)."""
    return [secret, *(b64.rstrip("=") for b64 in _b64_forms(secret))]


@functools.lru_cache(maxsize=64)
def _units(source: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(_unit(c)) for c in source)


@functools.lru_cache(maxsize=64)
def _head(source: str) -> re.Pattern[str]:
    return re.compile("".join(_unit(c) for c in source[:PREFIX_MIN]))


@functools.lru_cache(maxsize=64)
def pattern_of(secrets: frozenset[str]) -> re.Pattern[str] | None:
    """One expression matching every secret of ``secrets`` in any of its forms (longest sources first)."""
    parts = []
    for secret in secrets:
        parts.append("".join(_unit(c) for c in secret))
        parts += ["".join(_unit(c) for c in b64) + _PADDING for b64 in _sources(secret)[1:]]
    if not parts:
        return None
    parts.sort(key=len, reverse=True)  # user:password before password, at the same position
    return re.compile("|".join(parts))


@functools.lru_cache(maxsize=64)
def _needles(secrets: frozenset[str]) -> tuple[str, ...]:
    """What any form of ``secrets`` holds at least one of: a source as it is (no escape at all), or the start
    of an escape one of its characters may take; text with none of them holds no secret, and the expression
    need not run (a record's line is searched for these alone, in C)."""
    sources = [src for secret in secrets for src in _sources(secret)]
    chars = set("".join(sources))
    special = [needle for c, needle in ((" ", "+"), ("/", "\\/"), ('"', '\\"'), ("\\", "\\\\")) if c in chars]
    entity = "&" if chars & set(_NAMED) else "&#"
    return ("%", "\\u", entity, *special, *sources)


def _may_hold(text: str, secrets: frozenset[str]) -> bool:
    return any(needle in text for needle in _needles(secrets))


def register_key(value: str | None) -> None:
    """Remember a secret for this process, so every later ``redact`` call hides it in every form."""
    if value and len(value) >= _MIN_KEY:
        _SECRETS.add(value)


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


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be an API key (never quoting it), or None: too short to be hidden safely, a control
    character (a newline would split the header), or a character outside Latin-1 (HTTP headers cannot carry it)."""
    if len(key) < MIN_KEY_LENGTH:
        return f"the key is shorter than {MIN_KEY_LENGTH} characters (too short to be hidden in what is written)"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in key):
        return "the key holds a control character (a newline, a tab?); an HTTP header cannot carry it"
    if any(ord(c) > 0xFF for c in key):
        return "the key holds a character outside Latin-1; an HTTP header cannot carry it"
    return None


def _secrets(keys: Iterable[str] = ()) -> frozenset[str]:
    extra = [k for k in keys if k and len(k) >= _MIN_KEY]
    if not extra:
        if not _REGISTERED or len(_REGISTERED[0]) != len(_SECRETS):  # registered since: frozen once per change
            _REGISTERED[:] = [frozenset(_SECRETS)]
        return _REGISTERED[0]
    return frozenset({*_SECRETS, *extra})


def mask_url_credentials(text: str) -> str:
    """Every ``scheme://user:password@`` in ``text`` with its credentials, up to the last ``@``, masked."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{MASK}@", text) if "@" in text else text


def redact(text: str, keys: tuple[str, ...] = ()) -> str:
    """``text`` with URL credentials and every known secret (plus ``keys``), in any form, replaced by a mask."""
    if not text or (not _SECRETS and not keys and "@" not in text):  # no secret known, no user@ in a URL
        return text
    out = mask_url_credentials(text)
    secrets = _secrets(keys)
    pattern = pattern_of(secrets)
    return pattern.sub(MASK, out) if pattern is not None and _may_hold(out, secrets) else out


def _trailing_start(text: str, source: str) -> int | None:
    """Where a start of ``source`` (PREFIX_MIN characters or more, any escapes) runs to the end of ``text``."""
    units = _units(source)
    if len(units) <= PREFIX_MIN:
        return None
    head = _head(source)
    pos = 0
    while (m := head.search(text, pos)) is not None:
        at, i = m.end(), PREFIX_MIN
        while i < len(units) and at < len(text) and (step := units[i].match(text, at)) is not None:
            at, i = step.end(), i + 1
        if at == len(text) or (i < len(units) and _PARTIAL_ESCAPE.fullmatch(text, at) is not None):
            return m.start()
        pos = m.start() + 1
    return None


def mask_trailing_prefix(text: str, keys: tuple[str, ...] = ()) -> str:
    """``text`` with a known secret's start (a key cut short, by a server or by a limit) at its end masked."""
    starts = [at for secret in _secrets(keys) for source in _sources(secret)
              if (at := _trailing_start(text, source)) is not None]
    return text[:min(starts)] + MASK if starts else text


def clip(text: str, limit: int, keys: tuple[str, ...] = ()) -> str:
    """At most about ``limit`` characters of ``text`` to keep, with no secret and no secret's start in them:
    redacted whole first, then cut, then a secret's start left at the end masked (a mask may end the text)."""
    out = redact(text, keys)[:limit]
    if not (_SECRETS or keys):
        return out
    masked = mask_trailing_prefix(out, keys)
    if masked != out and len(masked) > limit:  # the mask is longer than the start it hides
        masked = masked[:max(0, limit - len(MASK))].rstrip() + MASK
    return masked


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
    """True when ``key`` is written by orjson with no escape other than ``\\"`` and ``\\\\`` (no control char)."""
    return all(ord(c) >= 0x20 for c in key)


def redacted_json_line(obj: Any) -> bytes:
    """``obj`` as one compact JSON line (newline included), ``redact_obj`` applied: what the JSONL files hold.

    Why not walk every value first: a record is mostly numbers, and the walk cost more than the encoding, on
    every request. The encoded text holds each of ``obj``'s strings verbatim but for quotes, backslashes and
    control characters, which it escapes with a backslash; every form of a secret holds one of a few needles
    (``_needles``: the secret or its base64 as they are, or the start of an escape), each still there after
    that escaping. So when the encoded text holds no needle and no ``@`` (a URL's credentials), the walk would
    change nothing and is skipped; otherwise it runs, exactly as before. Values orjson refuses (integers over
    64 bits, numpy scalars) take the standard library's encoder."""
    try:
        data = orjson.dumps(obj, option=_JSONL)
    except TypeError:
        return (json.dumps(redact_obj(obj), separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
    if b"@" not in data and (not _SECRETS or _unseen_keys(data.decode("utf-8"))):
        return data
    return orjson.dumps(redact_obj(obj), option=_JSONL)


def _unseen_keys(text: str) -> bool:
    """Nothing in the JSON ``text`` that any form of a known secret begins with or is (``_needles``); each
    needle shows in the encoded text if a string held it, as long as no secret holds a control character."""
    secrets = _secrets()
    return all(_json_plain(k) for k in secrets) and not _may_hold(text, secrets)


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
