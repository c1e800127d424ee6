"""Service-level objectives (``--slo ttft=2s,tpot=50ms``) and request-rate levels, parsed once for both sides.

The load side validates them at Start (a bad value stops the run before any load); the analysis reads the
same text back from meta.json, so the SLO a run was judged by is the one it was run with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: SLO attainment a server must keep at a rate for that rate to count as within its capacity.
CAPACITY_ATTAINMENT = 0.90

_KEYS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s", "itl_p99": "itl_p99_s"}
_UNITS = {"ms": 0.001, "s": 1.0}
_VALUE = re.compile(r"^([0-9]*\.?[0-9]+)(ms|s)$")


class SloError(ValueError):
    """A malformed ``--slo`` or ``--rate-ladder``; the message names the flag and what was expected."""


@dataclass(frozen=True)
class Slo:
    """Per-request latency targets in seconds; None = no target on that figure. A request meets the SLO when
    it succeeded and every set target holds (targets are upper bounds, inclusive)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    itl_p99_s: float | None = None

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.ttft_s, self.tpot_s, self.e2e_s, self.itl_p99_s))

    def text(self) -> str:
        """Human form, e.g. 'TTFT<=2s, TPOT<=50ms'."""
        names = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "E2E", "itl_p99_s": "ITL p99"}
        parts = []
        for attr, name in names.items():
            value = getattr(self, attr)
            if value is not None:
                parts.append(f"{name}<={_fmt(value)}")
        return ", ".join(parts) or "no SLO"


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:g}ms" if seconds < 1 else f"{seconds:g}s"


def parse_slo(text: str, where: str = "--slo") -> Slo | None:
    """'ttft=2s,tpot=50ms' -> Slo; '' -> None. Keys: ttft, tpot, e2e, itl_p99; values with unit s or ms."""
    text = str(text or "").strip()
    if not text:
        return None
    values: dict[str, float] = {}
    for part in text.split(","):
        part = part.strip()
        key, sep, raw = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in _KEYS:
            raise SloError(f"{where}: expected KEY=VALUE with KEY one of {', '.join(_KEYS)} (e.g. "
                           f"ttft=2s,tpot=50ms), got {part!r}")
        match = _VALUE.match(raw.strip().lower())
        if match is None or float(match.group(1)) <= 0:
            raise SloError(f"{where}: {key} expects a positive time with unit s or ms (e.g. 2s, 50ms), got "
                           f"{raw.strip()!r}")
        if _KEYS[key] in values:
            raise SloError(f"{where}: {key} given twice")
        values[_KEYS[key]] = float(match.group(1)) * _UNITS[match.group(2)]
    return Slo(**values)


def parse_rates(text: str, where: str = "--rate-ladder") -> list[float]:
    """'0.5,1,2' -> [0.5, 1.0, 2.0] requests/s; '' -> [] (closed loop). Every rate positive."""
    rates: list[float] = []
    for part in str(text or "").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            rate = float(part)
        except ValueError:
            rate = -1.0
        if not rate > 0 or rate == float("inf"):
            raise SloError(f"{where}: expected comma-separated positive request rates (requests/s), got {part!r}")
        rates.append(rate)
    return rates
