"""A server's speculative settings as text people read: ``key=value`` pairs, never a Python dict.

Shared by the preflight line and every report header. SGLang's ``avg_spec_accept_length`` is not a setting but
the server's running average over its traffic so far: read before a run it is 0 (or 1, after the preflight's
tiny request accepted nothing), which would look like a measurement, so it reads "not measured yet" until it
carries information; the run's own acceptance figures are in the report's tables.

It is also the one place where a server's text (and any text read back from a run's files, which a person may
have edited) becomes report text: ``plain`` for the terminal and text files (one line, no control character, so
no forged line and no terminal escape), ``markdown_text`` for report.md and so report.html (the same, with every
Markdown mark escaped, so a model name like ``![x](/etc/passwd)`` stays words and never becomes an image, a
link, a heading or a table cell). Every writer of either kind takes its server text through them.

A dataset's text (prompt categories and ids, read from a user's prompt file) is the same kind of data and takes
the same road, with one rule per output (#70): ``plain_lines`` for a whole terminal text, ``markdown_text`` for
report.md, ``csv_cell`` for a CSV cell (no spreadsheet formula), ``chart_text`` for a label drawn by matplotlib
(no mathtext, no control character for a glyph warning to echo) and ``file_slug`` for a file name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

RUNTIME_FIGURES = {"avg_spec_accept_length": "acceptance length"}  # reported by the server, not set on it


SERVER_TEXT_MAX = 200  # characters of one server value in a report; a longer one is cut, marked with "..."

# Control characters (C0, DEL, C1), line and paragraph separators, zero-width and bidirectional marks: each can
# forge a line, drive a terminal or make text read differently from what it holds.
_UNSEEN = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
# Markdown's marks, each escaped with a backslash (CommonMark renders an escaped punctuation mark as itself). An
# underscore between two letters or digits is left alone: it cannot open or close emphasis there.
_MARK = re.compile(r"[\\`*\[\]<>&~|!#]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def plain(value: Any, limit: int | None = SERVER_TEXT_MAX) -> str:
    """``value`` as one line of inert text: each unseen character written as its escape (``\\n``, ``\\x1b``),
    cut to ``limit`` characters (None: whole)."""
    text = _UNSEEN.sub(lambda m: ascii(m.group(0))[1:-1], _text(value))
    return text if limit is None or len(text) <= limit else text[:limit] + "..."


def markdown_text(value: Any, limit: int | None = SERVER_TEXT_MAX) -> str:
    """``plain(value)`` with every Markdown mark escaped: words in report.md, never markup."""
    return _MARK.sub(lambda m: "\\" + m.group(0), plain(value, limit))


def plain_lines(text: str) -> str:
    """A whole terminal text (our lines, with data woven in) with each line through ``plain``, uncut: the last
    guard before stdout or a .txt file, so no escape sequence of a server's or a dataset's reaches a terminal."""
    return "\n".join(plain(line, None) for line in text.split("\n"))


# A spreadsheet reads a cell starting with one of these as a formula (OWASP's CSV injection list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell that no spreadsheet runs: text starting like a formula gets a leading ``'`` (shown by
    spreadsheets as text, read back by ``csv``/pandas with it); numbers, and text that is a number, stay."""
    if not isinstance(value, str) or not value.startswith(_FORMULA_START):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def chart_text(value: Any, limit: int | None = 60) -> str:
    """Text drawn on a plot: ``plain`` (a control character would also come back in matplotlib's missing-glyph
    warning on stderr, raw) with ``$`` escaped, so a name is never parsed as mathtext (an odd ``$`` fails the
    whole figure)."""
    return plain(value, limit).replace("$", "\\$")


_UNSAFE_FILE = re.compile(r"[^A-Za-z0-9._+-]+")


def file_slug(value: Any, limit: int = 64) -> str:
    """Text as one file name: letters, digits, ``.``, ``_``, ``+`` and ``-`` only, starting with a letter or digit,
    never ``..`` or a path, not ending with ``.``, at most ``limit`` characters; where it had to change, a short
    hash of the original follows, so two names that differ only in what was dropped still name two files. A name
    the command line or a sweep file accepts (``[A-Za-z0-9][A-Za-z0-9._+-]{0,63}``, no ``..``) comes back as it
    is."""
    text = _text(value)
    slug = re.sub(r"\.{2,}", ".", _UNSAFE_FILE.sub("_", text)).lstrip("._+-")  # no "..", even inside
    if slug == text and len(text) <= limit and not text.endswith("."):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    slug = slug[:limit - len(digest) - 1].rstrip("._-")
    return f"{slug}-{digest}" if slug else digest


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_text(v) for v in value)
    return str(value)


def _runtime(label: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 1.0:
        return f"{label} not measured yet"
    return f"{label} {value:.2f} (the server's average before this run)"


def describe_speculative(spec: Mapping[str, Any] | str | None, *, runtime: bool = True) -> str:
    """``speculative algorithm=EAGLE3, num_steps=3, ..., acceptance length not measured yet`` or ``no speculation``.

    ``runtime=False`` (a report's header, written after the run): the settings alone, without the server's
    pre-run figures, which the run's own acceptance columns supersede."""
    if not spec:
        return "no speculation"
    if not isinstance(spec, Mapping):  # an older or hand-written meta.json may name just the algorithm
        return f"speculative {plain(spec)}"
    keys = sorted(spec, key=lambda k: (k != "algorithm", str(k)))
    settings = [f"{plain(k)}={plain(spec[k])}" for k in keys
                if k not in RUNTIME_FIGURES and spec[k] not in (None, "", [], {})]
    figures = [_runtime(label, spec[k]) for k, label in RUNTIME_FIGURES.items() if k in spec and runtime]
    return "speculative " + ", ".join(settings + figures)
