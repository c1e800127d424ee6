"""What a run's records say about a setting its meta.json states (#70): the report's header never states one they
contradict.

Why: the header's ``max_tokens`` came from meta.json alone, so a hand-edited or mixed-up meta.json (512 where every
request asked for 16) put a setting in the report that the measured requests never had. Each record keeps the
``max_tokens`` its request asked for; where they disagree with meta.json, the header shows the requests' and says
what meta.json holds, and the run gets the warning ``meta_contradicted``. A length distribution (``--output-len``)
or a trace replay (``--trace``) draws each request's own count: several counts are then expected, not a
contradiction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from specbench.contract.settings import SuiteSettings


def requested_max_tokens(records: Iterable[Mapping[str, Any]]) -> tuple[int, ...]:
    """The distinct ``max_tokens`` the run's requests asked for, lowest first (0 and absent: not said)."""
    found = {rec.get("max_tokens") for rec in records}
    return tuple(sorted(int(v) for v in found if isinstance(v, int) and not isinstance(v, bool) and v > 0))


def drawn_per_request(settings: SuiteSettings | None) -> bool:
    """Whether each request draws its own output count (a length distribution or a trace's rows)."""
    return settings is not None and bool(settings.output_len or settings.trace)


def contradiction(settings: SuiteSettings | None, requested: tuple[int, ...]) -> str | None:
    """What the records say against meta.json's ``max_tokens``, in words; None when they agree (or cannot say)."""
    if settings is None or not requested or requested == (settings.max_tokens,):
        return None
    if drawn_per_request(settings):
        return None
    asked = str(requested[0]) if len(requested) == 1 else f"{requested[0]} to {requested[-1]}"
    return (f"meta.json says max_tokens {settings.max_tokens}, but the requests in records.jsonl asked for {asked}; "
            "the report shows the requests' (was meta.json edited, or copied from another run?)")


def max_tokens_text(settings: SuiteSettings | None, requested: tuple[int, ...]) -> str:
    """The header's max_tokens: meta.json's where the requests agree, else the requests' with meta.json's beside."""
    if settings is None:
        return "?"
    if not requested or requested == (settings.max_tokens,):
        return str(settings.max_tokens)
    asked = str(requested[0]) if len(requested) == 1 else f"{requested[0]}-{requested[-1]}"
    if drawn_per_request(settings):
        return f"{asked} (drawn per request)"
    return f"{asked} (the requests'; meta.json says {settings.max_tokens})"
